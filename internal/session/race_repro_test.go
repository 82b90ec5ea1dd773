package session

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// raceRepro has TestLastZxidRace drive a bare go-zookeeper Conn (dialed
// with the same transport, with no Session and no wire under it) instead
// of a Session, to show that the harness provokes the race the wire
// closes: such a run must fail, under -race, with a DATA RACE between
// go-zookeeper's recvLoop and sendSetWatches (docs/contributing-tests.md,
// "The `-race` promise"). It is not a CI run.
var raceRepro = flag.String("race-repro", "",
	`run TestLastZxidRace on a bare zk.Conn, without the wire: "none"; the run must report a DATA RACE under -race`)

// stepCycles is how many reconnects TestLastZxidRace provokes the race on.
const stepCycles = 6

// TestLastZxidRace provokes go-zookeeper v1.0.4's lastZxid race on every
// reconnect of a session, and holds the Client's wire to leaving none for
// the race detector to find: the test runs under -race in CI, and fails
// there if recvLoop's write of Conn.lastZxid (conn.go:849) is unordered
// with sendSetWatches's read (conn.go:614).
//
// Each reconnect is provoked the same way, without timing. The transport
// drops the connection and, before it dials the next one (A), has a
// request queued, which A's sendLoop takes first (Conn.sendChan is a
// queue); A cuts that request's write, so that A's sendLoop ends
// (Conn.sendData) without taking the setWatches that A's loop queued
// after reading lastZxid (sendSetWatches). The server list names the
// server twice, so go-zookeeper moves on without a retry round, which
// would flush the queue (Conn.connect, DNSHostProvider.Next). The next
// connection (B) is dialed once A's setWatches is queued, so B's sendLoop
// writes it before B's own; the transport holds B's sendLoop there until
// recvLoop has had the reply to that stale setWatches, and recvLoop writes
// lastZxid while B's own sendSetWatches has read it. Nothing orders the
// two: B has no credentials to re-send, so B's sendLoop draws no xid
// after B's setWatches did (go-zookeeper's xid counter is atomic: such a
// draw would order it), and takes no request made after B's
// sendSetWatches ran. That is the case of a setWatches left queued by a
// connection that closed (issue 30's trace, on a session's second
// connection during Connect, was this case), and the plain case of a
// reply that beats the new connection's setWatches. The session is a new
// one, so its first connections run under -race too.
//
// Beside the race detector it checks what the server gets: each connect
// request carries the last zxid read before it (LastZxidSeen), each
// setWatches the one its connection started from (RelativeZxid), as
// go-zookeeper's own would without the race; that B's first setWatches
// is A's (so the case was provoked); and that watches set before the
// reconnects fire after them.
//
// With -race-repro=none (see raceRepro) the same run is made on a bare
// go-zookeeper Conn, and must fail with a DATA RACE.
func TestLastZxidRace(t *testing.T) {
	switch *raceRepro {
	case "":
	case "none":
		t.Log("-race-repro=none: a bare zk.Conn, no wire; under -race this run must report a DATA RACE")
	default:
		t.Fatalf("-race-repro=%q: want none", *raceRepro)
	}
	env := os.Getenv("ZKLOCK_TEST_SERVERS")
	if env == "" {
		t.Fatal("ZKLOCK_TEST_SERVERS is not set: run `make test`")
	}
	addr := strings.Split(env, ",")[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := &stepper{}
	var c raceTarget
	if *raceRepro == "none" {
		c = openBare(t, st, addr)
	} else {
		c = openRaceSession(ctx, t, st, addr)
	}
	defer c.close()
	raw := c.zk

	// Watches of the user's: their setWatches must bring them back.
	var b [8]byte
	_, _ = rand.Read(b[:])
	node := "/zklock-race-" + hex.EncodeToString(b[:])
	if _, err := raw.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Delete(node+"/x", -1); _ = raw.Delete(node, -1) }()
	st.mu.Lock()
	st.raw, st.node = raw, node
	st.mu.Unlock()
	defer st.pending.Wait()
	_, _, dataW, err := raw.GetW(node)
	if err != nil {
		t.Fatal(err)
	}
	_, _, kidsW, err := raw.ChildrenW(node)
	if err != nil {
		t.Fatal(err)
	}

	for i := 0; i < stepCycles; i++ {
		st.cycle(t, c, i)
	}

	if _, err := raw.Set(node, []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(node+"/x", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		ch   <-chan zk.Event
		want zk.EventType
	}{{dataW, zk.EventNodeDataChanged}, {kidsW, zk.EventNodeChildrenChanged}} {
		select {
		case ev := <-w.ch:
			if ev.Type != w.want {
				t.Errorf("a watch set before %d reconnects fired with %v, want %v", stepCycles, ev.Type, w.want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a watch set before %d reconnects did not fire (%v)", stepCycles, w.want)
		}
	}
}

// raceTarget is what TestLastZxidRace drives: a go-zookeeper Conn, and
// how to drop its connection, make a request on it, and close it.
type raceTarget struct {
	zk      *zk.Conn
	drop    func()
	request func() error
	close   func()
}

// openRaceSession opens a Session through the stepper, as the Client does: the
// wire between go-zookeeper and the stepper's connections.
func openRaceSession(ctx context.Context, t *testing.T, st *stepper, addr string) raceTarget {
	t.Helper()
	c, err := Open(ctx, Options{
		Servers:        []string{addr, addr},
		SessionTimeout: 4 * time.Second,
		ACL:            func(string) []zk.ACL { return zk.WorldACL(zk.PermAll) },
		Dialer:         st.dial,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) },
		Hooks:          Hooks{Lost: func(*Hold, error) {}, Released: func(*Hold) {}, State: func(State, int64, string) {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raceTarget{
		zk:      c.Raw(),
		drop:    c.wire.drop,
		request: func() error { _, err := c.Conn().Exists("/"); return err },
		close:   func() { _ = c.Close() },
	}
}

// openBare connects a bare go-zookeeper Conn through the stepper (its own
// DNSHostProvider, the stepper's connections under it, no wire), and waits
// for its session: the race as go-zookeeper v1.0.4 has it.
func openBare(t *testing.T, st *stepper, addr string) raceTarget {
	t.Helper()
	c, _, err := zk.Connect([]string{addr, addr}, 4*time.Second,
		zk.WithDialer(st.dial),
		zk.WithLogger(zkLogger{slog.New(slog.NewTextHandler(io.Discard, nil))}),
		zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if !poll(20*time.Second, func() bool { return c.State() == zk.StateHasSession }) {
		c.Close()
		t.Fatalf("a bare zk.Conn to %s has no session after 20s", addr)
	}
	return raceTarget{
		zk:      c,
		drop:    st.dropCurrent,
		request: func() error { _, _, err := c.Exists("/"); return err },
		close:   c.Close,
	}
}

// dropCurrent closes the connection dialed last, the one go-zookeeper
// uses: it dials the next only once that one's loop has ended
// (Conn.loop).
func (s *stepper) dropCurrent() {
	s.mu.Lock()
	var sc *stepConn
	if n := len(s.conns); n > 0 {
		sc = s.conns[n-1]
	}
	s.mu.Unlock()
	if sc != nil {
		_ = sc.Close()
	}
}

// errCut is what the transport's Write returns for the request it cuts on
// an A.
var errCut = errors.New("race_repro_test: a request's write is cut")

// stepper is TestLastZxidRace's transport: TCP connections to the server,
// one of which (A) it cuts at its first request, and the next of which
// (B) it steps.
type stepper struct {
	mu        sync.Mutex
	failNext  bool            // the next connection dialed is an A
	afterFail bool            // the last connection dialed was an A: the next is a B
	base      map[string]bool // setWatches goroutines waiting when the cycle began
	conns     []*stepConn
	lastZxid  int64    // the zxid of the last reply read with xid >= 0 and zxid > 0, as the server sent it
	problems  []string // what went wrong on go-zookeeper's goroutines

	raw     *zk.Conn // the session's, for the requests queued ahead of A's setWatches
	node    string   // what they read
	pending sync.WaitGroup
}

func (s *stepper) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// setWatchesSeen is a setWatches request a connection wrote.
type setWatchesSeen struct {
	xid      int32
	relative int64 // its RelativeZxid
}

// stepConn is one connection of the stepper.
type stepConn struct {
	net.Conn
	s    *stepper
	role byte // 'A', 'B', or 0

	// Under s.mu.
	wrote       bool  // the connect request went out
	connectZxid int64 // its LastZxidSeen
	lastSeen    int64 // the stepper's lastZxid when it went out
	setWatches  []setWatchesSeen

	// B's first setWatches: its xid plus one (0: none), and closed once
	// recvLoop has had its reply.
	stepXid  atomic.Int64
	consumed chan struct{}
	done     chan struct{} // closed by Close
	doneOnce sync.Once

	// go-zookeeper's one reader goroutine's own.
	fr        inFrames
	delivered bool // the stepped reply has been read whole
	consume   sync.Once
}

// dial is the stepper's zk.Dialer.
func (s *stepper) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	var role byte
	switch {
	case s.failNext:
		role, s.failNext, s.afterFail = 'A', false, true
	case s.afterFail:
		role, s.afterFail = 'B', false
	}
	base, raw, node := s.base, s.raw, s.node
	s.mu.Unlock()
	switch role {
	case 'A':
		// A request queued ahead of A's setWatches, which A's sendLoop
		// takes first, and which A cuts.
		before := queued(existsCaller)
		s.pending.Add(1)
		go func() {
			defer s.pending.Done()
			_, _, _ = raw.Exists(node)
		}()
		if !queuedAnew(existsCaller, before) {
			s.problem("the request to cut on A was not queued")
		}
	case 'B':
		if !queuedAnew(setWatchesCaller, base) {
			s.problem("A left no setWatches queued")
		}
	}
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	sc := &stepConn{Conn: nc, s: s, role: role, consumed: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.conns = append(s.conns, sc)
	s.mu.Unlock()
	return sc, nil
}

// cycle drops the session's connection, has the next one (A) cut, and
// checks the B that follows.
func (s *stepper) cycle(t *testing.T, c raceTarget, i int) {
	t.Helper()
	s.mu.Lock()
	s.failNext, s.base, s.afterFail = true, queued(setWatchesCaller), false
	first := len(s.conns)
	s.mu.Unlock()
	c.drop()

	var a, b *stepConn
	if !poll(20*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		a, b = nil, nil
		for _, sc := range s.conns[first:] {
			switch sc.role {
			case 'A':
				a = sc
			case 'B':
				b = sc
			}
		}
		return a != nil && b != nil && len(b.setWatches) >= 2
	}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var sw []setWatchesSeen
		if b != nil {
			sw = b.setWatches
		}
		t.Fatalf("cycle %d: no B wrote two setWatches (A %v, B %v: %v; %d connections; %q)",
			i, a != nil, b != nil, sw, len(s.conns)-first, s.problems)
	}
	// A request on B: its reply comes after both setWatches.
	if !poll(20*time.Second, func() bool { return c.request() == nil }) {
		t.Fatalf("cycle %d: no request succeeded after the reconnect", i)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("cycle %d: %s", i, p)
	}
	s.problems = nil
	if sw := b.setWatches; sw[0].xid >= sw[1].xid {
		t.Errorf("cycle %d: B's first setWatches (xid %d) is not the stale one: its own has xid %d", i, sw[0].xid, sw[1].xid)
	}
	for _, sc := range []*stepConn{a, b} {
		if sc.connectZxid != sc.lastSeen {
			t.Errorf("cycle %d: %c's connect request has LastZxidSeen %#x; the last zxid read before it was %#x",
				i, sc.role, sc.connectZxid, sc.lastSeen)
		}
	}
	for _, sw := range b.setWatches {
		if sw.relative != b.connectZxid {
			t.Errorf("cycle %d: setWatches xid %d on B has RelativeZxid %#x; B started from %#x",
				i, sw.xid, sw.relative, b.connectZxid)
		}
	}
}

func (sc *stepConn) Write(p []byte) (int, error) {
	s := sc.s
	s.mu.Lock()
	connect := !sc.wrote
	var op, xid int32
	switch {
	case connect:
		sc.wrote = true
		if len(p) >= 16 {
			sc.connectZxid = int64(binary.BigEndian.Uint64(p[8:16]))
		}
		sc.lastSeen = s.lastZxid
	case len(p) >= 12:
		xid, op = int32(binary.BigEndian.Uint32(p[4:8])), int32(binary.BigEndian.Uint32(p[8:12]))
	}
	step := false
	if op == opSetWatches && len(p) >= 20 {
		sc.setWatches = append(sc.setWatches, setWatchesSeen{xid, int64(binary.BigEndian.Uint64(p[12:20]))})
		step = sc.role == 'B' && len(sc.setWatches) == 1
	}
	s.mu.Unlock()

	if !connect && sc.role == 'A' {
		_ = sc.Close()
		return 0, errCut
	}
	if step {
		sc.stepXid.Store(int64(xid) + 1) // before the write: the reply may be read before it returns
	}
	n, err := sc.Conn.Write(p)
	if step && err == nil {
		// Hold B's sendLoop, and so B's own setWatches behind it,
		// until recvLoop has had the stale one's reply.
		select {
		case <-sc.consumed:
		case <-sc.done:
		case <-time.After(10 * time.Second):
			s.problem("recvLoop did not take the reply to the stale setWatches")
		}
	}
	return n, err
}

func (sc *stepConn) Read(p []byte) (int, error) {
	if sc.delivered {
		// recvLoop reads again (the wire's buffer is empty): it has
		// handed on what it read, the stepped reply included.
		sc.consume.Do(func() { close(sc.consumed) })
	}
	n, err := sc.Conn.Read(p)
	sc.fr.follow(p[:n], func(xid int32, zxid int64) {
		if xid >= 0 && zxid > 0 {
			sc.s.mu.Lock()
			sc.s.lastZxid = zxid
			sc.s.mu.Unlock()
		}
		if x := sc.stepXid.Load(); x != 0 && int64(xid) == x-1 {
			sc.delivered = true
		}
	})
	return n, err
}

func (sc *stepConn) Close() error {
	sc.doneOnce.Do(func() { close(sc.done) })
	return sc.Conn.Close()
}

// inFrames follows the packets a connection reads from the server, and
// reports each reply once read whole; the first packet, the connect
// response, is not one.
type inFrames struct {
	packets int
	nlen    int
	len     [4]byte
	left    int
	nhdr    int
	hdr     [replyHdrBytes]byte // xid, zxid, error code
}

// follow follows b, as read, and reports each reply read whole.
func (f *inFrames) follow(b []byte, reply func(xid int32, zxid int64)) {
	for len(b) > 0 {
		if f.nlen < 4 {
			k := copy(f.len[f.nlen:], b)
			f.nlen += k
			b = b[k:]
			if f.nlen == 4 {
				f.left, f.nhdr = int(binary.BigEndian.Uint32(f.len[:])), 0
			}
			continue
		}
		k := min(len(b), f.left)
		f.nhdr += copy(f.hdr[f.nhdr:], b[:k])
		f.left -= k
		b = b[k:]
		if f.left > 0 {
			continue
		}
		f.nlen = 0
		if f.packets++; f.packets > 1 && f.nhdr == len(f.hdr) {
			reply(int32(binary.BigEndian.Uint32(f.hdr[0:4])), int64(binary.BigEndian.Uint64(f.hdr[4:12])))
		}
	}
}

// The callers of go-zookeeper's Conn.request that queued looks for.
const (
	setWatchesCaller = "zk.(*Conn).sendSetWatches.func1("
	existsCaller     = "zk.(*Conn).Exists("
)

// queued returns the goroutines (by id) whose request, made by caller, is
// queued and waits for its reply (Conn.request: queueRequest has
// returned), from the goroutines' stacks: go-zookeeper tells nothing of
// its queue.
func queued(caller string) map[string]bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	ids := make(map[string]bool)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, caller) {
			continue
		}
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "github.com/go-zookeeper/zk.") {
				if strings.HasPrefix(line, "github.com/go-zookeeper/zk.(*Conn).request(") {
					ids[strings.Fields(g)[1]] = true // "goroutine <id> [state]:"
				}
				break
			}
		}
	}
	return ids
}

// queuedAnew waits up to 10s for a goroutine of caller to be queued that
// is not in before, and reports whether one was.
func queuedAnew(caller string, before map[string]bool) bool {
	return poll(10*time.Second, func() bool {
		for id := range queued(caller) {
			if !before[id] {
				return true
			}
		}
		return false
	})
}

// poll reports whether cond holds within d, checking every millisecond.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}
