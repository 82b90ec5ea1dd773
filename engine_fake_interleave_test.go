package zklock_test

// The interleavings that matter, produced on demand with the fake's hooks:
// a predecessor gone between the read and the watch, the session expired
// or replaced mid-acquire, a reply lost after the create applied, ctx
// ending at each step, a held node deleted from outside, the session
// ending while held, the connection dropping.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// onOp sets f's hooks to call fn before every op of conn under prefix.
func onOp(f *zkfake.Server, conn *zkfake.Conn, prefix string, fn func(op zkfake.Op) error) {
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != conn || len(op.Paths) == 0 || !strings.HasPrefix(op.Paths[0], prefix) {
			return nil
		}
		return fn(op)
	}})
}

func TestFakePredecessorGoneBetweenReadAndWatch(t *testing.T) {
	f := zkfake.New()
	_, cb, ma, mb := fakeMutexes(t, f, "/pg/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	var hit atomic.Int32
	onOp(f, connOf(t, f, cb), "/pg/lock/", func(op zkfake.Op) error {
		if op.Name == "GetW" && op.Paths[0] == la.Node() && hit.Add(1) == 1 {
			// B read A's node ahead of it, and is about to watch it.
			must(t, f.Delete(la.Node()), "delete the predecessor")
		}
		return nil
	})
	lb, err := mb.Acquire(ctxT(t))
	must(t, err, "acquire past a predecessor gone before the watch")
	if hit.Load() == 0 {
		t.Fatal("B never watched A's node")
	}
	mustIs(t, doneWithin(t, la), zklock.ErrNodeDeleted, "A's lease")
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after %d", lb.Token(), la.Token())
	}
	release(t, lb)
}

func TestFakeSessionExpiredMidAcquire(t *testing.T) {
	for _, step := range []string{"CreateEach", "ChildrenStatW", "GetW"} {
		step := step // go.mod's go 1.21: one variable for every iteration, which the hooks read
		t.Run(step, func(t *testing.T) {
			f := zkfake.New()
			_, cb, ma, mb := fakeMutexes(t, f, "/se/lock")
			la, err := ma.Acquire(ctxT(t))
			must(t, err)
			old := cb.SessionID()
			var hit atomic.Int32
			f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
				if op.Session == old && op.Name == step && strings.HasPrefix(op.Paths[0], "/se/lock") && hit.Add(1) == 1 {
					f.Expire(old)
				}
				return err
			}})
			w := async(mb.Acquire, ctxT(t))
			eventually(t, func() bool { return cb.SessionID() != old && cb.SessionID() != 0 }, "a new session")
			f.SetHooks(zkfake.Hooks{})
			fakeQueued(t, f, "/se/lock", 2)
			release(t, la)
			lb := await(t, w)
			if got := f.Owner(lb.Node()); got != cb.SessionID() {
				t.Fatalf("lease node owned by %#x, want the new session %#x", got, cb.SessionID())
			}
			fakeQueued(t, f, "/se/lock", 1)
			release(t, lb)
		})
	}
}

// TestFakeCreateReplyLost: the create applies and its reply is lost; the
// engine finds its node by its id and goes on with exactly one.
func TestFakeCreateReplyLost(t *testing.T) {
	for _, recipe := range []string{"mutex", "multilock", "semaphore-n"} {
		recipe := recipe
		t.Run(recipe, func(t *testing.T) {
			f := zkfake.New()
			c := fakeClient(t, f)
			var lost atomic.Int32
			f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
				if op.Name == "CreateEach" && err == nil && lost.Add(1) == 1 {
					return zk.ErrConnectionClosed
				}
				return err
			}})
			var leases []*zklock.Lease
			switch recipe {
			case "mutex":
				m, err := zklock.NewMutex(c, "/rl/a")
				must(t, err)
				l, err := m.Acquire(ctxT(t))
				must(t, err)
				leases = append(leases, l)
			case "multilock":
				m, err := zklock.NewMultiLock(c, []string{"/rl/a", "/rl/b"})
				must(t, err)
				l, err := m.Acquire(ctxT(t))
				must(t, err)
				leases = append(leases, l)
			case "semaphore-n":
				s, err := zklock.NewSemaphore(c, "/rl/a", 3)
				must(t, err)
				ls, err := s.AcquireN(ctxT(t), 2)
				must(t, err)
				leases = ls
			}
			if lost.Load() == 0 {
				t.Fatal("no create's reply was lost")
			}
			n := 1
			if recipe == "semaphore-n" {
				n = 2
			}
			if got := len(f.Children("/rl/a")); got != n {
				t.Fatalf("%d nodes on /rl/a, want %d: %v", got, n, f.Children("/rl/a"))
			}
			for _, l := range leases {
				release(t, l)
			}
			fakeQueued(t, f, "/rl/a", 0)
		})
	}
}

// TestFakeCtxEndsAtEachStep cancels a waiting acquire's ctx before each of
// its operations in turn, and then while it waits: each returns ctx's
// error and leaves no node behind.
func TestFakeCtxEndsAtEachStep(t *testing.T) {
	f := zkfake.New()
	ca := fakeClient(t, f)
	ma, err := zklock.NewMutex(ca, "/cx/lock")
	must(t, err)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	for k := 0; ; k++ {
		cb := fakeClient(t, f)
		mb, err := zklock.NewMutex(cb, "/cx/lock")
		must(t, err)
		ctx, cancel := context.WithCancel(ctxT(t))
		var n atomic.Int32
		waiting := make(chan struct{})
		var once sync.Once
		conn := connOf(t, f, cb)
		f.SetHooks(zkfake.Hooks{
			Before: func(op zkfake.Op) error {
				if op.Conn == conn && len(op.Paths) > 0 && strings.HasPrefix(op.Paths[0], "/cx/") && int(n.Add(1)) == k+1 {
					cancel()
				}
				return nil
			},
			After: func(op zkfake.Op, err error) error {
				if op.Conn == conn && op.Name == "GetW" && op.Paths[0] == la.Node() {
					once.Do(func() { close(waiting) })
				}
				return err
			},
		})
		res := async(mb.Acquire, ctx)
		var r result
		inWait := false
		select {
		case r = <-res:
		case <-waiting:
			if ctx.Err() == nil {
				inWait = true
				cancel()
			}
			r = returned(t, res)
		}
		cancel()
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled before op %d: got %v %v, want context.Canceled", k+1, r.lease, r.err)
		}
		f.SetHooks(zkfake.Hooks{})
		fakeQueued(t, f, "/cx/lock", 1)
		_ = cb.Close()
		if inWait {
			t.Logf("cancelled at each of %d operations, and in the wait", k)
			break
		}
		if k > 20 {
			t.Fatal("the acquire never waited")
		}
	}
	mustLive(t, la)
	release(t, la)
}

func TestFakeHeldNodeDeleted(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/hd/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	must(t, f.Delete(l.Node()))
	mustIs(t, doneWithin(t, l), zklock.ErrNodeDeleted, "a lease whose node was deleted")
	if !l.ValidUntil().Before(time.Now().Add(time.Second)) {
		t.Fatalf("ValidUntil %v of an ended lease", l.ValidUntil())
	}
	release2 := l.Release(ctxT(t))
	if release2 == nil {
		t.Fatal("releasing a lost lease succeeded")
	}
	// A MultiLock's lease ends when any of its nodes goes.
	ml, err := zklock.NewMultiLock(c, []string{"/hd/x", "/hd/y"})
	must(t, err)
	lm, err := ml.Acquire(ctxT(t))
	must(t, err)
	kids := f.Children("/hd/y")
	if len(kids) != 1 {
		t.Fatalf("children of /hd/y: %v", kids)
	}
	must(t, f.Delete("/hd/y/"+kids[0]))
	mustIs(t, doneWithin(t, lm), zklock.ErrNodeDeleted, "a MultiLock lease with a node deleted")
	fakeQueued(t, f, "/hd/x", 0) // the janitor deletes the rest
}

func TestFakeSessionExpiresWhileHeld(t *testing.T) {
	f := zkfake.New()
	ca, _, ma, mb := fakeMutexes(t, f, "/ex/lock")
	rw, err := zklock.NewRWMutex(ca, "/ex/rw")
	must(t, err)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	lr, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	w := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/ex/lock", 2)
	old := ca.SessionID()
	if !f.Expire(old) {
		t.Fatal("no such session")
	}
	mustIs(t, doneWithin(t, la), zklock.ErrSessionExpired)
	mustIs(t, doneWithin(t, lr), zklock.ErrSessionExpired)
	lb := await(t, w)
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after %d", lb.Token(), la.Token())
	}
	eventually(t, func() bool { return ca.SessionID() != 0 && ca.SessionID() != old }, "a new session")
	// The Client goes on in its new session.
	w2 := async(ma.Acquire, ctxT(t))
	release(t, lb)
	release(t, await(t, w2))
}

func TestFakeWaiterRidesOutADisconnect(t *testing.T) {
	f := zkfake.New()
	_, cb, ma, mb := fakeMutexes(t, f, "/dc/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	w := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/dc/lock", 2)
	conn := connOf(t, f, cb)
	conn.Disconnect()
	release(t, la) // its event waits for B's reconnect
	pending(t, w)
	conn.Reconnect()
	release(t, await(t, w))
}

func TestFakeLossOnDisconnect(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithLossOnDisconnect())
	m, err := zklock.NewMutex(c, "/lod/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	conn.Disconnect()
	mustIs(t, doneWithin(t, l), zklock.ErrConnectionSuspended)
	conn.Reconnect()
	fakeQueued(t, f, "/lod/lock", 0) // the janitor deletes the node
}

// TestFakeLeaseEndsAtItsDeadline: cut off, a holder's lease ends at its
// deadline, before the server could expire its session; the server does
// so only a timeout after it last heard from it.
func TestFakeLeaseEndsAtItsDeadline(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithSessionTimeout(400*time.Millisecond))
	m, err := zklock.NewMutex(c, "/dl/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	conn.Disconnect()
	cut := time.Now()
	until := l.ValidUntil()
	mustIs(t, doneWithin(t, l), zklock.ErrLeaseExpired)
	if !until.Before(cut.Add(400 * time.Millisecond)) {
		t.Fatalf("deadline %v is not before the server's expiry at %v", until, cut.Add(400*time.Millisecond))
	}
	// The server, which last heard from the session no earlier than the
	// cut, expires it a timeout after: after the lease ended.
	if ids := f.ExpireIdle(cut.Add(400 * time.Millisecond)); len(ids) != 1 || ids[0] != c.SessionID() {
		t.Fatalf("expired %v, want the holder's %#x", ids, c.SessionID())
	}
	conn.Reconnect()
	fakeQueued(t, f, "/dl/lock", 0)
}

// TestFakeSessionReplacedMidAcquire: no server takes the session for twice
// its timeout, so the Client opens a new connection, and the waiting
// acquire queues again there.
func TestFakeSessionReplacedMidAcquire(t *testing.T) {
	f := zkfake.New()
	ca := fakeClient(t, f)
	cb := fakeClient(t, f, zklock.WithSessionTimeout(300*time.Millisecond))
	ma, err := zklock.NewMutex(ca, "/rp/lock")
	must(t, err)
	mb, err := zklock.NewMutex(cb, "/rp/lock")
	must(t, err)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	w := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/rp/lock", 2)
	old := connOf(t, f, cb)
	before := len(f.Conns())
	old.Disconnect()
	eventually(t, func() bool { return len(f.Conns()) > before }, "a new connection")
	f.ExpireIdle(time.Now().Add(time.Hour)) // the old session ends on the server too
	release(t, la)
	lb := await(t, w)
	if f.Owner(lb.Node()) == 0 || f.Owner(lb.Node()) != cb.SessionID() {
		t.Fatalf("lease node owner %#x, session %#x", f.Owner(lb.Node()), cb.SessionID())
	}
	release(t, lb)
}

func TestFakeCloseDuringAcquire(t *testing.T) {
	f := zkfake.New()
	_, cb, ma, mb := fakeMutexes(t, f, "/cl/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	lb2, err := func() (*zklock.Lease, error) {
		m, err := zklock.NewMutex(cb, "/cl/other")
		must(t, err)
		return m.Acquire(ctxT(t))
	}()
	must(t, err)
	w := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/cl/lock", 2)
	must(t, cb.Close())
	mustIs(t, returned(t, w).err, zklock.ErrClientClosed, "an acquire under way at Close")
	mustIs(t, doneWithin(t, lb2), zklock.ErrClientClosed, "a lease at Close")
	_, err = mb.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrClientClosed, "an acquire after Close")
	fakeQueued(t, f, "/cl/lock", 1)
	release(t, la)
}

func TestFakeElectionLeaderGone(t *testing.T) {
	f := zkfake.New()
	ca, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	ea, err := zklock.NewElection(ca, "/eg")
	must(t, err)
	eb, err := zklock.NewElection(cb, "/eg")
	must(t, err)
	ec, err := zklock.NewElection(cc, "/eg")
	must(t, err)
	la, err := ea.Campaign(ctxT(t))
	must(t, err)
	wb := async(eb.Campaign, ctxT(t))
	fakeQueued(t, f, "/eg", 2)
	octx, stop := context.WithCancel(ctxT(t))
	defer stop()
	obs := ec.Observe(octx)
	seen := func(want func(p zklock.Participant) bool) {
		t.Helper()
		for {
			select {
			case p := <-obs:
				if want(p) {
					return
				}
			case <-time.After(long):
				t.Fatal("not observed")
			}
		}
	}
	seen(func(p zklock.Participant) bool { return p.Node == la.Node() })
	f.Expire(ca.SessionID())
	mustIs(t, doneWithin(t, la), zklock.ErrSessionExpired)
	lb := await(t, wb)
	seen(func(p zklock.Participant) bool { return p.Node == lb.Node() })
	must(t, f.Delete(lb.Node()))
	mustIs(t, doneWithin(t, lb), zklock.ErrNodeDeleted)
	seen(func(p zklock.Participant) bool { return p.Node == "" })
}

// TestFakeReleaseWhileDisconnected: a release whose delete cannot go out
// still ends the lease, and the node goes once the connection is back.
func TestFakeReleaseWhileDisconnected(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/rd/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	conn.Disconnect()
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	select {
	case <-l.Done():
	case <-time.After(long):
		t.Fatal("release did not end the lease")
	}
	mustIs(t, l.Err(), zklock.ErrReleased)
	cancel()
	// The delete waits in the connection's queue (as go-zookeeper's
	// does), and goes out once it is back.
	conn.Reconnect()
	select {
	case err := <-done:
		t.Logf("release while disconnected: %v", err)
	case <-time.After(long):
		t.Fatal("release did not return")
	}
	fakeQueued(t, f, "/rd/lock", 0)
}

// TestFakeUnknownNodes: a path holding nodes of no known kind is refused,
// and nothing is left there.
func TestFakeUnknownNodes(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	must(t, f.Create("/un", nil))
	must(t, f.Create("/un/stranger-0000000001", nil))
	m, err := zklock.NewMutex(c, "/un")
	must(t, err)
	_, err = m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrUnknownNode, fmt.Sprint("mutex over ", f.Children("/un")))
	if kids := f.Children("/un"); len(kids) != 1 {
		t.Fatalf("children after the refusal: %v", kids)
	}
}

// lateCreate makes conn's first create under a prefix one whose reply is
// lost and which the servers the client reaches apply late, as a real
// ensemble may: the reply never came, so the connect request's
// LastZxidSeen cannot make ZooKeeper refuse a server that has not applied
// it yet (a follower that lags, or one just synced with a new leader,
// which serves before it commits the sync's proposals). What it models:
//
//   - the connection drops under the first two syncs of the session (the
//     keeper moves it when the quorum is slow to confirm, as right after a
//     new leader), and a read after a failed sync is of a server that has
//     not applied the create; that server applies it just after the second
//     such read;
//   - a sync that succeeds applies it first (the server catches up with
//     the leader, which had it), and so does any later write of the
//     session (the leader orders it after the create, sent before).
type lateCreate struct {
	conn     *zkfake.Conn
	prefix   string
	onCreate func() // when the create is sent

	mu                      sync.Mutex
	pending                 []string // the create's prefixes, until applied
	sent, applied, unsynced bool
	failedSyncs, staleReads int
}

func (lc *lateCreate) hooks() zkfake.Hooks {
	return zkfake.Hooks{Before: lc.before, After: lc.after}
}

func (lc *lateCreate) before(op zkfake.Op) error {
	if op.Conn != lc.conn {
		return nil
	}
	lc.mu.Lock()
	switch {
	case op.Name == "CreateEach" && !lc.sent && strings.HasPrefix(op.Paths[0], lc.prefix):
		lc.sent, lc.pending = true, op.Paths
		lc.mu.Unlock()
		lc.onCreate()
		return zk.ErrConnectionClosed // sent, and its connection dropped
	case lc.pending == nil || lateReads[op.Name]:
		lc.mu.Unlock()
		return nil
	case op.Name == "Sync" && lc.failedSyncs < 2:
		lc.failedSyncs++
		lc.unsynced = true
		lc.mu.Unlock()
		lc.conn.Disconnect()
		lc.conn.Reconnect()
		return zk.ErrConnectionClosed
	}
	lc.unsynced = false
	lc.mu.Unlock()
	lc.apply() // a sync or a write: the create comes first
	return nil
}

func (lc *lateCreate) after(op zkfake.Op, err error) error {
	if op.Conn != lc.conn || !strings.HasPrefix(op.Name, "Children") {
		return err
	}
	lc.mu.Lock()
	late := lc.pending != nil && lc.unsynced
	if late {
		lc.staleReads++
		late = lc.staleReads == 2
	}
	lc.mu.Unlock()
	if late {
		lc.apply() // the lagging server catches up, just after the read
	}
	return err
}

// apply makes the pending create, in the connection's session.
func (lc *lateCreate) apply() {
	lc.mu.Lock()
	pending := lc.pending
	lc.pending = nil
	lc.mu.Unlock()
	if pending == nil {
		return
	}
	if _, err := lc.conn.CreateEach(pending, nil, func(string) []zk.ACL { return zk.WorldACL(zk.PermAll) }); err == nil {
		lc.mu.Lock()
		lc.applied = true
		lc.mu.Unlock()
	}
}

func (lc *lateCreate) wasApplied() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.applied
}

// lateReads are the fake's reads: a server that lags answers them.
var lateReads = map[string]bool{"Children": true, "ChildrenStat": true, "ChildrenStatW": true, "ChildrenW": true,
	"Get": true, "GetW": true, "GetDataW": true, "Exists": true, "ExistsW": true}

// TestFakeLostCreateAppliedLate: a create whose reply was lost is applied
// after the reads that looked for it (lateCreate). An acquire that goes
// on drops the late node as a stray of its own; one whose ctx ended
// meanwhile hands the node to the janitor by its id, which must not take
// a read after a failed sync for proof that there is none: the node
// would stay, in a live session, at the head of the queue, and nobody
// could take the lock until that session ended.
func TestFakeLostCreateAppliedLate(t *testing.T) {
	t.Run("abandoned", func(t *testing.T) {
		f := zkfake.New()
		must(t, f.Create("/la", nil))
		must(t, f.Create("/la/lock", nil)) // the create is refused otherwise
		c := fakeClient(t, f)
		m, err := zklock.NewMutex(c, "/la/lock")
		must(t, err)
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		lc := &lateCreate{conn: connOf(t, f, c), prefix: "/la/lock/", onCreate: cancel}
		f.SetHooks(lc.hooks())
		_, err = m.Acquire(ctx)
		mustIs(t, err, context.Canceled, "an acquire whose ctx ended while its create's fate was unknown")
		eventually(t, func() bool { return lc.wasApplied() && len(f.Children("/la/lock")) == 0 },
			"the late node must go: applied %v, children %v", lc.wasApplied(), f.Children("/la/lock"))
	})
	t.Run("queued again", func(t *testing.T) {
		f := zkfake.New()
		must(t, f.Create("/la", nil))
		must(t, f.Create("/la/lock", nil)) // the create is refused otherwise
		c := fakeClient(t, f)
		m, err := zklock.NewMutex(c, "/la/lock")
		must(t, err)
		lc := &lateCreate{conn: connOf(t, f, c), prefix: "/la/lock/", onCreate: func() {}}
		f.SetHooks(lc.hooks())
		l, err := m.Acquire(ctxT(t))
		must(t, err, "acquire past a node of its own that came late")
		if !lc.wasApplied() {
			t.Fatal("the lost create was never applied")
		}
		eventually(t, func() bool { return len(f.Children("/la/lock")) == 1 },
			"the late node must go, the lease's stay: %v", f.Children("/la/lock"))
		if kids := f.Children("/la/lock"); "/la/lock/"+kids[0] != l.Node() {
			t.Fatalf("left %v, want the lease's node %s", kids, l.Node())
		}
		release(t, l)
		fakeQueued(t, f, "/la/lock", 0)
	})
}

// TestFakeDowngradeLosesItsWriteLease: the write lease is lost to a
// disconnect while Downgrade runs, and the janitor deletes its node before
// the read node's create: Downgrade fails with the write lease's loss (as
// it does for a lease lost before the call), not with the guard's absence.
func TestFakeDowngradeLosesItsWriteLease(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithLossOnDisconnect())
	rw, err := zklock.NewRWMutex(c, "/dg/lock")
	must(t, err)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	var hit atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != conn || op.Name != "CreateEphemeralIf" || hit.Add(1) != 1 {
			return nil
		}
		// On the test's goroutine: Downgrade runs there.
		conn.Disconnect()
		mustIs(t, doneWithin(t, w), zklock.ErrConnectionSuspended, "the write lease")
		conn.Reconnect()
		eventually(t, func() bool { return !f.Exists(w.Node()) }, "the janitor deletes the lost lease's node")
		return nil
	}})
	_, err = rw.Downgrade(ctxT(t), w)
	if hit.Load() == 0 {
		t.Fatal("the read node was never created")
	}
	mustIs(t, err, zklock.ErrConnectionSuspended, "a downgrade whose write lease was lost meanwhile")
	fakeQueued(t, f, "/dg/lock", 0)
}
