package zklock_test

// Names resolved at every connection attempt, on a real server: a name
// that does not resolve is skipped, and a name that moves to a new address
// is followed, with the session and its leases kept. A server "moves" the
// way a Kubernetes pod does: a forwarder in front of the test's ZooKeeper
// listens on one loopback address (127.0.0.2:P), then on another
// (127.0.0.3:P) while the first closes, and the test's lookup follows.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// forwarder is a server at a loopback address that passes every
// connection on to target; Move puts it at another address, on the same
// port, and closes the old listener and its connections, as a restarted
// pod's old address stops answering.
type forwarder struct {
	t      testing.TB
	target string
	port   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// forward starts a forwarder to target on ip, at a free port.
func forward(t testing.TB, ip, target string) *forwarder {
	t.Helper()
	f := &forwarder{t: t, target: target, conns: make(map[net.Conn]struct{})}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	must(t, err, "listen on %s", ip)
	_, f.port, _ = net.SplitHostPort(ln.Addr().String())
	f.serve(ln)
	t.Cleanup(f.close)
	return f
}

// at starts a forwarder to target on ip at port.
func forwardAt(t testing.TB, ip, port, target string) *forwarder {
	t.Helper()
	f := &forwarder{t: t, target: target, port: port, conns: make(map[net.Conn]struct{})}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
	must(t, err, "listen on %s:%s", ip, port)
	f.serve(ln)
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.pass(c)
		}
	}()
}

// pass connects c to the target, both ways, until either side closes.
func (f *forwarder) pass(c net.Conn) {
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns[c], f.conns[up] = struct{}{}, struct{}{}
	f.mu.Unlock()
	f.wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer f.wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		f.mu.Lock()
		delete(f.conns, dst)
		delete(f.conns, src)
		f.mu.Unlock()
	}
	go pipe(up, c)
	go pipe(c, up)
}

// move listens at ip instead, same port, and closes the old address's
// listener and connections.
func (f *forwarder) move(ip string) {
	f.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, f.port))
	must(f.t, err, "listen on %s:%s", ip, f.port)
	f.mu.Lock()
	old := f.ln
	conns := f.conns
	f.conns = make(map[net.Conn]struct{})
	f.mu.Unlock()
	_ = old.Close()
	for c := range conns {
		_ = c.Close()
	}
	f.serve(ln)
}

func (f *forwarder) close() {
	f.mu.Lock()
	_ = f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// names is a lookup the test moves: name to addresses.
type names struct {
	mu    sync.Mutex
	addrs map[string][]string
	calls map[string]int
}

func newNames() *names {
	return &names{addrs: make(map[string][]string), calls: make(map[string]int)}
}

func (n *names) set(name string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addrs[name] = addrs
}

func (n *names) lookup(_ context.Context, host string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls[host]++
	if a, ok := n.addrs[host]; ok && len(a) > 0 {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (n *names) lookups(host string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[host]
}

// sessions records a Client's session events.
type sessions struct {
	mu     sync.Mutex
	events []zklock.SessionInfo
}

func (s *sessions) trace() *zklock.Trace {
	return &zklock.Trace{Session: func(i zklock.SessionInfo) {
		s.mu.Lock()
		s.events = append(s.events, i)
		s.mu.Unlock()
	}}
}

// last is the latest event.
func (s *sessions) last() zklock.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return zklock.SessionInfo{}
	}
	return s.events[len(s.events)-1]
}

// reconnectedAfter waits until, after event n, the session was lost and
// is connected again; it returns the server.
func (s *sessions) reconnectedAfter(t testing.TB, n int) string {
	t.Helper()
	var server string
	eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		lost := false
		for _, e := range s.events[n:] {
			switch e.State {
			case zklock.SessionDisconnected, zklock.SessionExpired:
				lost = true
			case zklock.SessionConnected:
				if lost {
					server = e.Server
					return true
				}
			}
		}
		return false
	}, "reconnect")
	return server
}

func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// recorded is a slog handler that keeps every record.
type recorded struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorded) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorded) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorded) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level say msg (a substring).
func (r *recorded) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == level && strings.Contains(rec.Message, msg) {
			n++
		}
	}
	return n
}

// One name that does not resolve, among good ones, is skipped: Connect
// succeeds (within 2 s, the bound: a lookup that fails costs
// milliseconds) and the name is logged at Warn. With the system's own
// resolver, as a Kubernetes pod that is not ready has no DNS record.
func TestConnectSkipsUnresolvableName(t *testing.T) {
	log := &recorded{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv := servers(t)
	for i := 0; i < 3; i++ { // the names are shuffled: some runs try the missing one first
		c, err := zklock.Connect(ctx, append([]string{"zk-gone.invalid:2181"}, srv...), zklock.WithLogger(slog.New(log)))
		must(t, err, "connect with one name that does not resolve")
		_ = c.Close()
	}
	// And with our own lookup: a name it does not know is skipped, and
	// named in the log.
	n := newNames()
	for i := 0; i < 3; i++ {
		c, err := zklock.Connect(ctx, append([]string{"zk-missing:2181"}, srv...), zklock.WithHostResolver(n.lookup), zklock.WithLogger(slog.New(log)))
		must(t, err, "connect with a lookup that does not know one name")
		_ = c.Close()
	}
	if log.count(slog.LevelWarn, "does not resolve") == 0 && n.lookups("zk-missing") > 0 {
		t.Fatal("a name that did not resolve was not logged at Warn")
	}
}

// When no name resolves, Connect waits for its context and then fails with
// an error that names the lookup's failure beside the deadline.
func TestConnectNoNameResolves(t *testing.T) {
	n := newNames()
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond) // two rounds: a second's pause between
	defer cancel()
	_, err := zklock.Connect(ctx, []string{"zk-a:2181,zk-b:2181"}, zklock.WithHostResolver(n.lookup))
	mustIs(t, err, context.DeadlineExceeded)
	var de *net.DNSError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "last lookup error") {
		t.Fatalf("Connect: %v, want it to name the last lookup error (a *net.DNSError)", err)
	}
	if n.lookups("zk-a") < 2 || n.lookups("zk-b") < 2 {
		t.Fatalf("lookups zk-a %d, zk-b %d: want every name looked up again at each attempt", n.lookups("zk-a"), n.lookups("zk-b"))
	}
}

// A name that moves to a new address while a lease is held: the Client
// reconnects, within the session, at the new address; the lease stays
// live on the same node and is confirmed again.
func TestNameMovedWhileLeaseHeld(t *testing.T) {
	ctx := ctxT(t)
	n := newNames()
	fw := forward(t, "127.0.0.2", servers(t)[0])
	n.set("zk-a", "127.0.0.2")
	var s sessions
	c, m, l := lockThroughNames(t, ctx, []string{"zk-a:" + fw.port}, n, &s)
	sid, node := c.SessionID(), l.Node()

	before := s.count()
	n.set("zk-a", "127.0.0.3")
	fw.move("127.0.0.3")
	moved := time.Now()
	if server := s.reconnectedAfter(t, before); server != "zk-a:"+fw.port {
		t.Fatalf("reconnected to %q, want the name zk-a:%s", server, fw.port)
	}
	if got := c.SessionID(); got != sid {
		t.Fatalf("session %#x after the move, want the same %#x", got, sid)
	}
	mustLive(t, l)
	if l.Node() != node {
		t.Fatalf("node %s after the move, want %s", l.Node(), node)
	}
	eventually(t, func() bool { return l.ValidUntil().After(moved.Add(time.Second)) }, "the lease confirmed again after the move")
	mustLive(t, l)
	if ps, err := m.Participants(ctx); err != nil || len(ps) != 1 || ps[0].Node != node {
		t.Fatalf("participants %+v, %v: want the one holder %s", ps, err, node)
	}
	release(t, l)
}

// Three names, moved one after another, the one in use last (how Vitess
// lost a cluster with a client that resolved once): every address the
// Client first resolved is dead by the end, and it still keeps its session
// and lease.
func TestEnsembleMovesNameInUseLast(t *testing.T) {
	ctx := ctxT(t)
	target := servers(t)[0]
	n := newNames()
	names := []string{"zk-a", "zk-b", "zk-c"}
	fws := map[string]*forwarder{}
	port := ""
	var connect []string
	for i, name := range names {
		ip := "127.0.0." + string(rune('2'+i))
		if port == "" {
			fws[name] = forward(t, ip, target)
			port = fws[name].port
		} else {
			fws[name] = forwardAt(t, ip, port, target)
		}
		n.set(name, ip)
		connect = append(connect, name+":"+port)
	}
	var s sessions
	c, _, l := lockThroughNames(t, ctx, connect, n, &s)
	sid, node := c.SessionID(), l.Node()

	inUse := strings.TrimSuffix(s.last().Server, ":"+port)
	if fws[inUse] == nil {
		t.Fatalf("the session is on %q, not one of %v", s.last().Server, names)
	}
	order := []string{}
	for _, name := range names {
		if name != inUse {
			order = append(order, name)
		}
	}
	order = append(order, inUse)
	for i, name := range order {
		ip := "127.0.0." + string(rune('5'+i))
		before := s.count()
		n.set(name, ip)
		fws[name].move(ip)
		if name == inUse {
			s.reconnectedAfter(t, before)
		}
	}
	if got := c.SessionID(); got != sid {
		t.Fatalf("session %#x after the moves, want the same %#x", got, sid)
	}
	mustLive(t, l)
	if l.Node() != node {
		t.Fatalf("node %s after the moves, want %s", l.Node(), node)
	}
	moved := time.Now()
	eventually(t, func() bool { return l.ValidUntil().After(moved.Add(time.Second)) }, "the lease confirmed again after the moves")
	release(t, l)
}

// lockThroughNames connects a Client to servers through n's lookup, with
// an 8 s session timeout and its sessions traced into s (closed when the
// test ends), and takes a Mutex on a lock path of the test's.
func lockThroughNames(t *testing.T, ctx context.Context, servers []string, n *names, s *sessions) (*zklock.Client, *zklock.Mutex, *zklock.Lease) {
	t.Helper()
	c, err := zklock.Connect(ctx, servers, zklock.WithHostResolver(n.lookup),
		zklock.WithSessionTimeout(8*time.Second), zklock.WithTrace(s.trace()))
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m, err := zklock.NewMutex(c, lockPath(t))
	must(t, err)
	l, err := m.Acquire(ctx)
	must(t, err)
	return c, m, l
}
