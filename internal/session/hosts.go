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

// Names are resolved when they are dialed, not once: go-zookeeper's
// DNSHostProvider resolves every name at Connect, fails the whole Connect
// on the first name that does not resolve, and never resolves again, so a
// ZooKeeper pod that is not ready (no DNS record behind its headless
// service) stops every client from starting, and an ensemble whose servers
// move to new addresses one by one (a StatefulSet's rolling update) leaves
// a client with addresses that no longer answer; its session expires.
// ZooKeeper's Java client resolves at every connection attempt
// (StaticHostProvider.next, ZOOKEEPER-2184) and skips a name that does not
// resolve (ZOOKEEPER-1576); so does the Session: [hosts] hands
// go-zookeeper the names as typed ("zk1:2181"), which it hands to
// [wire.dialer] (Conn.connect), which resolves the name ([resolver]) and
// dials its addresses; a name that does not resolve fails the dial, and
// go-zookeeper moves on to the next name, as after any failed dial.
//
// Resolving costs nothing per request: it happens once per connection
// attempt. It changes nothing that holds a lease: which server a session
// is on never decides whether its leases live (the quorum's confirmation
// does, keeper.go), and a connection to a moved server is a connection like
// any other, on which go-zookeeper resumes the session.

// lookupTimeout bounds one name's lookup (go-zookeeper's DNSHostProvider's
// bound).
const lookupTimeout = 3 * time.Second

// hosts is the server list of one go-zookeeper connection: the names as
// the user typed them, shuffled once (as DNSHostProvider shuffles, so that
// clients spread over the servers), handed out in turn.
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

// Next hands out the next name, and reports whether a whole round has
// passed since a session was last established (go-zookeeper then waits a
// second before it dials). A round is one attempt per server: a name that
// resolves to three addresses gets three attempts, each starting at
// another address (resolver.resolve), as DNSHostProvider, which listed
// every address, gave each one.
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

// Connected records that a session was established on the last name,
// which counts as the first attempt of the next round: after a drop, the
// other servers are tried at once and this one again after the pause, as
// DNSHostProvider (and the Java client's StaticHostProvider) do.
func (h *hosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries = 1
}

// servers is how many servers there are to try: the addresses the names
// resolved to when last dialed (a name that did not resolve counts one).
// The handshake's bound divides the session timeout among them.
func (h *hosts) servers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spread
}

// Lookup resolves a host name to addresses, as net.Resolver.LookupHost.
type Lookup func(ctx context.Context, host string) ([]string, error)

// resolver resolves the names go-zookeeper hands the wire's dialer, at
// each attempt, and keeps what the Session's error needs: the last lookup
// and the last dial that failed. Under mu: all but lookup; resolve takes
// hosts.mu under it (countSpreadLocked).
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

// resolve looks name's host up (an IP literal is its own address), within
// ctx, and returns the addresses to dial, "ip:port", in the order to try
// them: from the one after where the name's last attempt began, so that a
// server that accepts connections but never answers the handshake is not
// the first tried every time. A failed lookup is logged at Warn once,
// until the name resolves again, and recorded for Open's error.
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

// lookupHost resolves host with the resolver's lookup, within lookupTimeout
// and ctx. Its error names the host: a *net.DNSError does ("lookup zk1 on
// 10.0.0.2:53: no such host"); a user's lookup's error is wrapped to.
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

// countSpreadLocked sets the hosts' spread from what the names resolved
// to. r.mu is held; it takes hosts.mu.
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

// newHosts makes the server list of a new go-zookeeper connection, which
// calls next at every Next (nil: nothing).
func (r *resolver) newHosts(next func()) *hosts {
	h := &hosts{cur: -1, next: next}
	r.mu.Lock()
	r.hosts = h
	r.mu.Unlock()
	return h
}

// servers is the number of servers to spread the handshake's bound over:
// the addresses the names resolved to (hosts.servers), at least one.
func (r *resolver) servers() int {
	if h := r.current(); h != nil {
		return max(h.servers(), 1)
	}
	return 1
}

// names is how many names the current server list has, 0 without one.
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

// sameSet reports whether a and b hold the same addresses, in any order.
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
