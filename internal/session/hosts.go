package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"sync"
	"sync/atomic"
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
// resolve (ZOOKEEPER-1576); so does the Session:
//
//   - [hosts] is go-zookeeper's HostProvider over the names as typed
//     ("zk1:2181"): Next hands go-zookeeper a name, which go-zookeeper
//     hands to the wire's dialer (Conn.connect);
//   - [wire.dialer] resolves the name with the Session's lookup and dials
//     its addresses, each in turn from where the name's last attempt
//     began, until one answers; a name that does not resolve fails the
//     dial, and go-zookeeper moves on to the next name, as after any
//     failed dial.
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

	now  atomic.Bool // the next Next is a reconnect, not a new round (see wireConn.shut)
	next func()      // called at every Next (see wire.nextServer)
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
// second before it dials). After the wire closed a connection on purpose
// (wireConn.shut), a round begins at once: every server is tried before
// any pause, the one just left last. A round is
// one attempt per server: a name that resolves to three addresses gets
// three attempts, each starting at another address (wire.resolve), as
// DNSHostProvider, which listed every address, gave each one.
func (h *hosts) Next() (server string, retryStart bool) {
	h.mu.Lock()
	h.cur = (h.cur + 1) % len(h.names)
	if h.now.Swap(false) {
		h.tries = 0 // a round begins here, with no pause
	}
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

// newHosts makes the server list of a new go-zookeeper connection.
func (w *wire) newHosts() *hosts {
	h := &hosts{cur: -1}
	if w.tls != nil {
		h.next = w.nextServer
	}
	w.mu.Lock()
	w.hosts = h
	w.mu.Unlock()
	return h
}

// Lookup resolves a host name to addresses, as net.Resolver.LookupHost.
type Lookup func(ctx context.Context, host string) ([]string, error)

// names is what the wire knows of each name it resolved: where its next
// attempt starts, and what it resolved to last (to log a change once).
type names struct {
	lookup Lookup // nil: net.DefaultResolver.LookupHost
	known  map[string]*name
}

type name struct {
	addrs      []string // as last resolved; nil if the last lookup failed
	start      int      // the address the next attempt dials first
	unresolved bool     // the last lookup failed (logged once)
}

// resolve looks name's host up (an IP literal is its own address) and
// returns the addresses to dial, "ip:port", in the order to try them:
// from the one after where the name's last attempt began, so that a server
// that accepts connections but never answers the handshake is not the
// first tried every time. A failed lookup is logged at Warn once, until
// the name resolves again, and recorded for Open's error.
func (w *wire) resolve(server string) ([]string, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil, err
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		addrs, err = w.lookupHost(host)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.names.of(server)
	if err != nil {
		w.lookupErr = err
		if !n.unresolved {
			n.unresolved = true
			w.log().Warn("zklock: a ZooKeeper server's name does not resolve; trying the others", "server", server, "err", err)
		}
		n.addrs = nil
		w.countSpreadLocked()
		return nil, err
	}
	if n.unresolved || (n.addrs != nil && !sameSet(n.addrs, addrs)) {
		w.log().Info("zklock: a ZooKeeper server's name resolves to new addresses", "server", server, "addrs", addrs)
	}
	if n.addrs == nil && len(addrs) > 1 {
		n.start = rand.Intn(len(addrs))
	}
	n.addrs, n.unresolved = addrs, false
	w.countSpreadLocked()
	out := make([]string, len(addrs))
	for i := range addrs {
		out[i] = net.JoinHostPort(addrs[(n.start+i)%len(addrs)], port)
	}
	n.start = (n.start + 1) % len(addrs)
	return out, nil
}

// lookupHost resolves host with the wire's lookup, within lookupTimeout
// and the Session's life. Its error names the host: a *net.DNSError does
// ("lookup zk1 on 10.0.0.2:53: no such host"); a user's lookup's error is
// wrapped to.
func (w *wire) lookupHost(host string) ([]string, error) {
	lookup := w.names.lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ctx, cancel := context.WithTimeout(w.lifetime(), lookupTimeout)
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

func (ns *names) of(server string) *name {
	if ns.known == nil {
		ns.known = make(map[string]*name)
	}
	n := ns.known[server]
	if n == nil {
		n = &name{}
		ns.known[server] = n
	}
	return n
}

// countSpreadLocked sets the hosts' spread from what the names resolved
// to. w.mu is held.
func (w *wire) countSpreadLocked() {
	h := w.hosts
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	spread := 0
	for _, s := range h.names {
		if n := w.names.known[s]; n != nil && len(n.addrs) > 1 {
			spread += len(n.addrs)
		} else {
			spread++
		}
	}
	h.spread = spread
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
