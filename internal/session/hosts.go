package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"slices"
	"sync"
	"time"
)

// [hosts] hands go-zookeeper the names as typed ("zk1:2181"), and
// [wire.dialer] resolves one at each dial (Conn.connect), as the Java client
// does (StaticHostProvider.next, ZOOKEEPER-2184), skipping a name that does
// not resolve (ZOOKEEPER-1576): go-zookeeper moves on as after any failed
// dial. DNSHostProvider resolves all once, at Connect, and fails it on the
// first that does not resolve: a pod not yet ready (no DNS record behind its
// headless service) stops every client from starting, and servers moving
// one by one (a StatefulSet's rolling update) leave dead addresses until the
// session expires. It costs a lookup per attempt, none per request, and no
// lease depends on it: the quorum's confirmation (keeper.go), not the
// server, decides whether leases live, and go-zookeeper resumes the session
// on a moved server as on any other.

// lookupTimeout bounds one lookup, as DNSHostProvider does.
const lookupTimeout = 3 * time.Second

// hosts is one go-zookeeper connection's server list: the names as typed,
// shuffled once (as DNSHostProvider does, to spread clients), each in turn.
type hosts struct {
	mu     sync.Mutex
	names  []string
	cur    int // the name Next handed out last; -1 before the first
	tries  int // names handed out since a session was established or a round began
	spread int // addresses behind the names as last resolved, at least one a name

	next func() // called at every Next (see tlsState.nextServer)
}

// Init takes the names, "host:port" each ([Options.Servers]).
func (h *hosts) Init(servers []string) error {
	if len(servers) == 0 {
		return errors.New("no servers")
	}
	names := slices.Clone(servers)
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names, h.cur, h.tries, h.spread = names, -1, 0, len(names)
	return nil
}

// Len is the number of names.
func (h *hosts) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.names)
}

// Next hands out the next name, and reports whether a round has passed
// since a session was last established (go-zookeeper then waits a second).
// A round is one attempt per address, as DNSHostProvider listed each: a
// name with three gets three, each starting at another (resolver.resolve).
func (h *hosts) Next() (server string, retryStart bool) {
	h.mu.Lock()
	h.cur = (h.cur + 1) % len(h.names)
	h.tries++
	if h.tries > h.spread {
		retryStart, h.tries = true, 1
	}
	server = h.names[h.cur]
	h.mu.Unlock()
	if h.next != nil {
		h.next()
	}
	return server, retryStart
}

// Connected counts a session on the last name as the next round's first
// attempt: after a drop the others are tried at once, this one after the
// pause, as DNSHostProvider and the Java client's StaticHostProvider do.
func (h *hosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries = 1
}

// servers is the spread, among which [handshakes.bound] divides the timeout.
func (h *hosts) servers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spread
}

// Lookup resolves a host name to addresses, as net.Resolver.LookupHost.
type Lookup func(ctx context.Context, host string) ([]string, error)

// resolver resolves the names handed to the wire's dialer, and keeps the
// last failed lookup and dial for the Session's error. mu guards all but
// lookup; resolve takes hosts.mu under it (countSpreadLocked).
type resolver struct {
	lookup Lookup // nil: net.DefaultResolver.LookupHost

	mu        sync.Mutex
	known     map[string]*name // what each name resolved to
	hosts     *hosts           // the current go-zookeeper connection's server list
	lookupErr error
	dialErr   error
}

type name struct {
	addrs      []string // as last resolved; nil if the last lookup failed
	start      int      // the address the next attempt dials first
	unresolved bool     // the last lookup failed (logged once)
}

// resolve looks server's host up within ctx (an IP literal is its own
// address) and returns the "ip:port"s to dial, from the one after where the
// last attempt began, lest a server that accepts but never answers the
// handshake be tried first every time. A failed lookup is kept for Open's
// error and logged at Warn once, until the name resolves again.
func (r *resolver) resolve(ctx context.Context, server string, log *slog.Logger) ([]string, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil, err
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		addrs, err = r.lookupHost(ctx, host)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.known[server]
	if n == nil {
		n = &name{}
		r.known[server] = n
	}
	if err != nil {
		r.lookupErr = err
		if !n.unresolved {
			n.unresolved = true
			log.Warn("zklock: a ZooKeeper server's name does not resolve; trying the others", "server", server, "err", err)
		}
		n.addrs = nil
		r.countSpreadLocked()
		return nil, err
	}
	if n.unresolved || (n.addrs != nil && !sameSet(n.addrs, addrs)) {
		log.Info("zklock: a ZooKeeper server's name resolves to new addresses", "server", server, "addrs", addrs)
	}
	if n.addrs == nil && len(addrs) > 1 {
		n.start = rand.Intn(len(addrs))
	}
	n.addrs, n.unresolved = addrs, false
	r.countSpreadLocked()
	out := make([]string, len(addrs))
	for i := range addrs {
		out[i] = net.JoinHostPort(addrs[(n.start+i)%len(addrs)], port)
	}
	n.start = (n.start + 1) % len(addrs)
	return out, nil
}

// lookupHost resolves host within lookupTimeout and ctx. Its error names
// host, as a *net.DNSError does; a user's lookup's error is wrapped so.
func (r *resolver) lookupHost(ctx context.Context, host string) ([]string, error) {
	lookup := r.lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := lookup(ctx, host)
	var de *net.DNSError
	switch {
	case errors.As(err, &de) && de.Name == host:
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("lookup %s: %w", host, err)
	case len(addrs) == 0:
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// countSpreadLocked sets hosts.spread; r.mu is held, and it takes hosts.mu.
func (r *resolver) countSpreadLocked() {
	h := r.hosts
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	spread := 0
	for _, s := range h.names {
		if n := r.known[s]; n != nil && len(n.addrs) > 1 {
			spread += len(n.addrs)
		} else {
			spread++
		}
	}
	h.spread = spread
}

// newHosts makes a new connection's server list, calling next at each Next.
func (r *resolver) newHosts(next func()) *hosts {
	h := &hosts{cur: -1, next: next}
	r.mu.Lock()
	r.hosts = h
	r.mu.Unlock()
	return h
}

// servers is hosts.servers, at least one.
func (r *resolver) servers() int {
	if h := r.current(); h != nil {
		return max(h.servers(), 1)
	}
	return 1
}

func (r *resolver) names() int {
	if h := r.current(); h != nil {
		return h.Len()
	}
	return 0
}

func (r *resolver) current() *hosts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts
}

func (r *resolver) dialFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dialErr = err
}

func (r *resolver) errs() (lookup, dial error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupErr, r.dialErr
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
