package zklock_test

// WithSharedReads on internal/zkfake: the shared read layer's decisions
// (join, pause, close for a writer, leave, lose, release) with no server.
// Each step waits on the fake's state, an op the fake saw, or a lease's
// channels; faults and pauses come from the fake's hooks.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// fakeOps logs the ops the fake is asked for, and those it has answered,
// and applies rules to them.
type fakeOps struct {
	mu       sync.Mutex
	rules    []*opRule
	ops      []zkfake.Op
	answered []zkfake.Op
}

// opRule runs do before the nth op (from 1; 0: every one) that it
// matches: named name, on path (the first of the op's paths; or starting
// with path, if prefix), by conn (nil: any connection). A non-nil error
// fails the op.
type opRule struct {
	conn       *zkfake.Conn
	name, path string
	prefix     bool
	nth        int
	do         func(zkfake.Op) error

	n int // ops matched so far
}

func (r *opRule) matches(op zkfake.Op) bool {
	if op.Name != r.name || r.conn != nil && op.Conn != r.conn || len(op.Paths) == 0 {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(op.Paths[0], r.path)
	}
	return op.Paths[0] == r.path
}

// watchOps installs f's hooks: every op is logged, when asked for and when
// answered, and rules apply.
func watchOps(f *zkfake.Server, rules ...*opRule) *fakeOps {
	o := &fakeOps{rules: rules}
	f.SetHooks(zkfake.Hooks{Before: o.before, After: o.after})
	return o
}

func (o *fakeOps) after(op zkfake.Op, err error) error {
	o.mu.Lock()
	o.answered = append(o.answered, op)
	o.mu.Unlock()
	return err
}

func (o *fakeOps) before(op zkfake.Op) error {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	var do []func(zkfake.Op) error
	for _, r := range o.rules {
		if r.matches(op) {
			r.n++
			if r.nth == 0 || r.nth == r.n {
				do = append(do, r.do)
			}
		}
	}
	o.mu.Unlock()
	for _, d := range do {
		if err := d(op); err != nil {
			return err
		}
	}
	return nil
}

// count returns how many ops named name conn has asked for on path (or,
// with prefix, on a path that starts with it).
func (o *fakeOps) count(conn *zkfake.Conn, name, path string, prefix ...bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return countOps(o.ops, conn, name, path, prefix...)
}

// countAnswered is count for the ops the fake has answered (failed ones
// too, but not those a rule failed before the fake saw them). An op asked
// for is not yet done: its watch, if any, is set only as it is answered
// (under the fake's mutex, before the reply), and a change made before
// that fires nothing, the read shows it instead. So a test that needs a
// change to fire a watch makes it only after this counts the op.
func (o *fakeOps) countAnswered(conn *zkfake.Conn, name, path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return countOps(o.answered, conn, name, path)
}

func countOps(ops []zkfake.Op, conn *zkfake.Conn, name, path string, prefix ...bool) int {
	r := opRule{conn: conn, name: name, path: path, prefix: len(prefix) > 0 && prefix[0]}
	n := 0
	for _, op := range ops {
		if r.matches(op) {
			n++
		}
	}
	return n
}

// gate holds the ops it is given to until it opens; it opens by itself
// when the test ends, before the Clients close.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) hold(zkfake.Op) error { <-g.ch; return nil }
func (g *gate) open()                { g.once.Do(func() { close(g.ch) }) }

// firstOf waits until cond holds or ch gives a result, and reports which:
// true for cond. A result taken is handed back through *got.
func firstOf(t testing.TB, cond func() bool, ch <-chan result, got *result) bool {
	t.Helper()
	deadline := time.NewTimer(long)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case r := <-ch:
			*got = r
			return false
		case <-deadline.C:
			t.Fatalf("neither happened within %v", long)
		case <-tick.C:
		}
	}
}

// doneSignal is a context that tells when its Done is first asked for: a
// call that waits on it is about to.
type doneSignal struct {
	context.Context
	once   sync.Once
	called chan struct{}
}

func newDoneSignal(ctx context.Context) *doneSignal {
	return &doneSignal{Context: ctx, called: make(chan struct{})}
}

func (d *doneSignal) Done() <-chan struct{} {
	d.once.Do(func() { close(d.called) })
	return d.Context.Done()
}

// sharedOn opens a Client on f with an RWMutex made WithSharedReads on path.
func sharedOn(t testing.TB, f *zkfake.Server, path string, opts ...zklock.Option) (*zklock.Client, *zklock.RWMutex) {
	t.Helper()
	c := fakeClient(t, f, opts...)
	return c, newSharedRW(t, c, path)
}

// Goroutines reading through one RWMutex share one node: every lease is on
// it with its token, no read on a held node costs a create or a delete,
// Participants lists it once, every lease is traced, and the node goes
// with the last lease.
func TestFakeSharedReadsOneNode(t *testing.T) {
	f := zkfake.New()
	var rec recorder
	const path = "/so/lock"
	c, rw := sharedOn(t, f, path, zklock.WithTrace(rec.trace()))
	first, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err, "first read")
	ops := watchOps(f)

	const goroutines, rounds = 8, 20
	held := sharedReadRounds(t, rw, first, goroutines, rounds)
	conn := connOf(t, f, c)
	for _, name := range []string{"CreateEach", "Delete", "DeleteAll"} {
		for _, op := range ops.ops {
			if op.Conn == conn && op.Name == name {
				t.Fatalf("a read on the held shared node sent %s %v", name, op.Paths)
			}
		}
	}
	parts, err := rw.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 1 || !parts[0].Holder || !parts[0].Read || parts[0].Node != first.Node() {
		t.Fatalf("want the shared node as the one reader, got %+v", parts)
	}
	for _, l := range held {
		mustLive(t, l)
		// A lease on the shared node has the node's token, a zxid.
		if l.Token() != first.Token() || l.Token() <= 0 {
			t.Fatalf("a shared lease's token is %d; the node's lease's is %d", l.Token(), first.Token())
		}
		release(t, l)
	}
	fakeQueued(t, f, path, 1)
	release(t, first)
	fakeQueued(t, f, path, 0)
	s := rec.snapshot()
	if want := 1 + goroutines*rounds; len(s.acquired) != want || len(s.released) != want || len(s.lost) != 0 || len(s.failed) != 0 {
		t.Fatalf("trace: %d acquired, %d released, %d lost, %d failed; want %d, %d, 0, 0",
			len(s.acquired), len(s.released), len(s.lost), len(s.failed), want, want)
	}
	for _, i := range s.acquired {
		if i.Node != first.Node() || i.Kind != zklock.KindRead || i.Token != first.Token() {
			t.Fatalf("trace of a shared lease: %+v", i)
		}
	}
}

// The node stays while any lease is on it and goes with the last; a
// released lease is ended (Done, ErrReleased, a second Release says so)
// and its deadline is no later than its end.
func TestFakeSharedReadsNodeStaysUntilLastRelease(t *testing.T) {
	f := zkfake.New()
	const path = "/ns/lock"
	_, rw := sharedOn(t, f, path)
	leases := acquireN(t, rw.ReadLock().Acquire, 3)
	node := leases[0].Node()
	for i, l := range leases[:2] {
		release(t, l)
		released := time.Now()
		if !closed(l.Done()) {
			t.Fatalf("lease %d released, Done open", i)
		}
		mustIs(t, l.Err(), zklock.ErrReleased, "a released lease")
		mustIs(t, l.Release(ctxT(t)), zklock.ErrReleased, "a second release")
		if until := l.ValidUntil(); until.After(released) {
			t.Fatalf("lease %d released by %v, valid until %v", i, released, until)
		}
		if kids := f.Children(path); len(kids) != 1 || path+"/"+kids[0] != node {
			t.Fatalf("after %d of 3 releases want %s alone, got %v", i+1, node, kids)
		}
	}
	last := leases[2]
	mustLive(t, last)
	if closed(last.Done()) {
		t.Fatal("the last lease ended with the others")
	}
	if !last.ValidUntil().After(time.Now()) {
		t.Fatalf("a live lease valid until %v", last.ValidUntil())
	}
	release(t, last)
	fakeQueued(t, f, path, 0)
	l, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if l.Node() == node {
		t.Fatalf("a read after the last release got the deleted node %s", node)
	}
	release(t, l)
}

// A node deleted from outside ends every lease on it (traced as lost); a
// revocation reaches each; the next read makes a node of its own.
func TestFakeSharedReadsDeletedNodeEndsAll(t *testing.T) {
	f := zkfake.New()
	var rec recorder
	const path = "/sd/lock"
	_, rw := sharedOn(t, f, path, zklock.WithTrace(rec.trace()))
	leases := acquireN(t, rw.ReadLock().Acquire, 4)
	node := leases[0].Node()
	must(t, zklock.Revoke(ctxT(t), fakeClient(t, f), node), "revoke")
	for i, l := range leases {
		select {
		case <-l.Revoked():
		case <-time.After(long):
			t.Fatalf("lease %d was not told of the revocation", i)
		}
	}
	must(t, f.Delete(node), "delete the shared node")
	for i, l := range leases {
		mustIs(t, doneWithin(t, l), zklock.ErrNodeDeleted, "lease %d", i)
		mustIs(t, l.Release(ctxT(t)), zklock.ErrNodeDeleted, "release of lost lease %d", i)
		err := l.Release(ctxT(t))
		if !errors.Is(err, zklock.ErrReleased) || errors.Is(err, zklock.ErrNodeDeleted) {
			t.Fatalf("second release of lost lease %d: %v, want ErrReleased alone", i, err)
		}
	}
	// A lease's Done closes before its Lost hook is called: wait for the
	// fourth.
	eventually(t, func() bool { return len(rec.snapshot().lost) >= 4 }, "four leases traced as lost")
	s := rec.snapshot()
	if len(s.lost) != 4 || len(s.released) != 0 {
		t.Fatalf("traced %d lost and %d released, want 4 lost", len(s.lost), len(s.released))
	}
	for _, i := range s.lost {
		if i.Node != node || !errors.Is(i.Err, zklock.ErrNodeDeleted) {
			t.Fatalf("trace of a lost shared lease: %+v", i)
		}
	}
	l, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err, "a read after the node was lost")
	if l.Node() == node {
		t.Fatalf("a read after the loss got the deleted node %s", node)
	}
	release(t, l)
}

// A writer queued behind the shared node closes it to new reads: from the
// notification of the writer's node until the read that follows it
// returns, a new read waits (a TryAcquire does not), and once the read
// shows the writer, new reads queue behind it on a node of their own.
func TestFakeSharedReadsWriterClosesTheNode(t *testing.T) {
	f := zkfake.New()
	const path = "/wc/lock"
	c, rw := sharedOn(t, f, path)
	writer := newRW(t, fakeClient(t, f), path)
	conn := connOf(t, f, c)
	g := newGate(t)
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenW", path: path, nth: 2, do: g.hold})
	r1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	eventually(t, func() bool { return ops.countAnswered(conn, "ChildrenW", path) == 1 }, "the shared node watches the lock")

	w := async(writer.WriteLock().Acquire, ctxT(t))
	fakeQueued(t, f, path, 2)
	// The notification came, and the read that follows it is held: the
	// node is paused.
	eventually(t, func() bool { return ops.count(conn, "ChildrenW", path) == 2 }, "the read after the notification")
	try, err := rw.ReadLock().TryAcquire(ctxT(t))
	must(t, err, "a TryAcquire does not wait for the read")
	if try.Node() != r1.Node() {
		t.Fatalf("a TryAcquire while paused got %s, want the shared node %s", try.Node(), r1.Node())
	}
	// A read waits for the read that follows the notification (held here):
	// until its ctx ends.
	ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	l, err := rw.ReadLock().Acquire(ctx)
	if err == nil {
		t.Fatalf("a read that came while the node was paused joined it (%s) with a writer queued behind", l.Node())
	}
	mustIs(t, err, context.DeadlineExceeded, "a read while the node is paused")
	// One that waits when the read returns goes on then: behind the
	// writer, on a node of its own.
	waiting := newDoneSignal(ctxT(t))
	r2 := async(rw.ReadLock().Acquire, waiting)
	select {
	case <-waiting.called:
	case <-time.After(long):
		t.Fatal("the read did not wait")
	}
	g.open()
	fakeQueued(t, f, path, 3)
	if _, _, open := zklock.SharedStateForTest(rw); !open {
		t.Fatal("the new read's node is not open to reads")
	}
	pending(t, w)
	pending(t, r2)
	release(t, r1)
	pending(t, w)
	release(t, try)
	lw := await(t, w)
	pending(t, r2)
	release(t, lw)
	l2 := await(t, r2)
	if l2.Node() == r1.Node() {
		t.Fatalf("the read behind the writer got the old node %s", l2.Node())
	}
	release(t, l2)
	fakeQueued(t, f, path, 0)
}

// Reads waiting for a queued shared node that give up leave nothing
// behind; a TryAcquire meanwhile fails at once; of two waiting, the one
// that stays keeps the node and is granted with it.
func TestFakeSharedReadsCancelLeavesNothing(t *testing.T) {
	f := zkfake.New()
	const path = "/cl/lock"
	w, err := newRW(t, fakeClient(t, f), path).WriteLock().Acquire(ctxT(t))
	must(t, err)
	var rec recorder
	_, rw := sharedOn(t, f, path, zklock.WithTrace(rec.trace()))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var gone []<-chan result
	for i := 0; i < 3; i++ {
		gone = append(gone, async(rw.ReadLock().Acquire, ctx))
	}
	fakeQueued(t, f, path, 2)
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 3 }, "three reads wait for the node")
	_, err = rw.ReadLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a TryAcquire while the shared node is queued")
	cancel()
	for _, ch := range gone {
		mustIs(t, returned(t, ch).err, context.Canceled, "a cancelled shared read")
	}
	fakeQueued(t, f, path, 1)
	if n := len(rec.snapshot().failed); n != 4 {
		t.Fatalf("traced %d failed reads, want 4", n)
	}

	ctx2, cancel2 := context.WithCancel(ctxT(t))
	leaving := async(rw.ReadLock().Acquire, ctx2)
	staying := async(rw.ReadLock().Acquire, ctxT(t))
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 2 }, "two reads wait for the node")
	fakeQueued(t, f, path, 2)
	kids := f.Children(path)
	cancel2()
	mustIs(t, returned(t, leaving).err, context.Canceled)
	pending(t, staying)
	if now := f.Children(path); len(now) != 2 || now[0] != kids[0] || now[1] != kids[1] {
		t.Fatalf("a waiter left and took the node with it: %v, was %v", now, kids)
	}
	release(t, w)
	l := await(t, staying)
	if kids := f.Children(path); len(kids) != 1 || path+"/"+kids[0] != l.Node() {
		t.Fatalf("want the shared node alone, got %v (lease on %s)", kids, l.Node())
	}
	release(t, l)
	fakeQueued(t, f, path, 0)
}

// sharedTryHeldBack sets up a shared read TryAcquire that cannot hold: a
// write lease held on path by another Client, and the shared RWMutex's
// TryAcquire started with its create held at g, its node on its way.
func sharedTryHeldBack(t *testing.T, path string) (*zkfake.Server, *zklock.Lease, *zklock.RWMutex, *gate, <-chan result) {
	t.Helper()
	f := zkfake.New()
	w, err := newRW(t, fakeClient(t, f), path).WriteLock().Acquire(ctxT(t))
	must(t, err)
	c, rw := sharedOn(t, f, path)
	g := newGate(t)
	watchOps(f, &opRule{conn: connOf(t, f, c), name: "CreateEach", path: path + "/", prefix: true, nth: 1, do: g.hold})
	try := async(rw.ReadLock().TryAcquire, ctxT(t))
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 1 }, "the TryAcquire's node on its way")
	return f, w, rw, g, try
}

// A read that joined a TryAcquire's node, which could not hold, queues
// again (on a node of its own) instead of failing with ErrLocked; a
// TryAcquire that joined it fails with it.
func TestFakeSharedReadsJoinerOfAFailedTryQueues(t *testing.T) {
	const path = "/tj/lock"
	f, w, rw, g, try := sharedTryHeldBack(t, path)
	tryToo := async(rw.ReadLock().TryAcquire, ctxT(t))
	read := async(rw.ReadLock().Acquire, ctxT(t))
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 3 }, "a TryAcquire and a read join it")
	g.open()
	mustIs(t, returned(t, try).err, zklock.ErrLocked, "the TryAcquire")
	mustIs(t, returned(t, tryToo).err, zklock.ErrLocked, "the TryAcquire that joined it")
	var got result
	if !firstOf(t, func() bool { return len(f.Children(path)) == 2 }, read, &got) {
		t.Fatalf("the read that joined the TryAcquire's node returned (%v, %v), want it queued", got.lease, got.err)
	}
	pending(t, read)
	release(t, w)
	release(t, await(t, read))
	fakeQueued(t, f, path, 0)
}

// A TryAcquire that joined another's node, which could not hold, fails
// with it: it does not try again and again while the lock is held.
func TestFakeSharedReadsTryJoinerOfAFailedTryFails(t *testing.T) {
	const path = "/tt/lock"
	f, w, rw, g, try := sharedTryHeldBack(t, path)
	tryToo := async(rw.ReadLock().TryAcquire, ctxT(t))
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 2 }, "a TryAcquire joins it")
	g.open()
	mustIs(t, returned(t, try).err, zklock.ErrLocked, "the TryAcquire")
	mustIs(t, returned(t, tryToo).err, zklock.ErrLocked, "the TryAcquire that joined it")
	fakeQueued(t, f, path, 1)
	release(t, w)
}

// Once every read waiting for a queued node has left, the node is closed
// to new reads at once, though its acquire is still ending (its delete held
// here): a new read queues on a node of its own rather than fail with the
// ctx error of the reads that left.
func TestFakeSharedReadsLeftNodeClosedToNewReads(t *testing.T) {
	f := zkfake.New()
	const path = "/lc/lock"
	w, err := newRW(t, fakeClient(t, f), path).WriteLock().Acquire(ctxT(t))
	must(t, err)
	c, rw := sharedOn(t, f, path)
	conn := connOf(t, f, c)
	g := newGate(t)
	ops := watchOps(f, &opRule{conn: conn, name: "Delete", path: path + "/", prefix: true, nth: 1, do: g.hold})
	ctx, cancel := context.WithCancel(ctxT(t))
	r1 := async(rw.ReadLock().Acquire, ctx)
	fakeQueued(t, f, path, 2)
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 1 }, "the read waits for its node")
	var old string
	for _, k := range f.Children(path) {
		if path+"/"+k != w.Node() {
			old = path + "/" + k
		}
	}
	cancel()
	mustIs(t, returned(t, r1).err, context.Canceled, "the read that left")
	eventually(t, func() bool { return ops.count(conn, "Delete", old) == 1 }, "the node's delete, held")
	r2 := async(rw.ReadLock().Acquire, ctxT(t))
	// It waits for a node: a new one, or (were the old one still open) that.
	eventually(t, func() bool { n, _, _ := zklock.SharedStateForTest(rw); return n == 1 }, "the new read waits for a node")
	g.open()
	var got result
	fresh := func() bool {
		kids := f.Children(path)
		return len(kids) == 2 && path+"/"+kids[0] != old && path+"/"+kids[1] != old
	}
	if !firstOf(t, fresh, r2, &got) {
		t.Fatalf("a read after the others left returned %v, %v; want it queued on a node of its own", got.lease, got.err)
	}
	pending(t, r2)
	release(t, w)
	release(t, await(t, r2))
	fakeQueued(t, f, path, 0)
}

// A node granted after every read waiting for it left is released, not
// kept with no lease on it (it would keep writers out until the session
// ends).
func TestFakeSharedReadsUnwantedNodeReleased(t *testing.T) {
	f := zkfake.New()
	const path = "/un/lock"
	// The path exists: the first create makes the node (a create that
	// finds no parent leaves a read of its own, which would be held here).
	must(t, f.Create("/un", nil))
	must(t, f.Create(path, nil))
	c, rw := sharedOn(t, f, path)
	conn := connOf(t, f, c)
	g := newGate(t)
	// The first look (read right behind the create), whichever read it is.
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenStatW", path: path, nth: 1, do: g.hold},
		&opRule{conn: conn, name: "ChildrenStat", path: path, nth: 1, do: g.hold})
	ctx, cancel := context.WithCancel(ctxT(t))
	r := async(rw.ReadLock().Acquire, ctx)
	eventually(t, func() bool {
		return ops.count(conn, "ChildrenStatW", path)+ops.count(conn, "ChildrenStat", path) == 1 && len(f.Children(path)) == 1
	}, "the node made, its first look held")
	node := path + "/" + f.Children(path)[0]
	cancel()
	mustIs(t, returned(t, r).err, context.Canceled, "the read whose ctx ended")
	g.open() // the look finds the node holding: the engine grants it
	deleted := func() bool { return ops.count(conn, "Delete", node) > 0 }
	watched := func() bool { return ops.count(conn, "ChildrenW", path) > 0 }
	eventually(t, func() bool { return deleted() || watched() }, "the node released, or watched as a held node")
	if !deleted() {
		t.Fatal("a node granted with nobody waiting for it is kept")
	}
	fakeQueued(t, f, path, 0)
}

// A shared node whose lease is past its deadline serves no more reads,
// even before anything ended it (here, the keeper is stuck setting a
// watch): a read checks the lease itself, and queues on a node of its own.
// The lost leases report the deadline as their end.
func TestFakeSharedReadsLostNodeStopsServing(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	const path = "/ls/lock"
	c, rw := sharedOn(t, f, path, zklock.WithSessionTimeout(600*time.Millisecond))
	conn := connOf(t, f, c)
	g := newGate(t)
	l1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	node := l1.Node()
	ops := watchOps(f, &opRule{conn: conn, name: "GetW", path: node, nth: 1, do: g.hold})
	// Another reader's node behind ours spends the children watch that
	// covered it: the keeper sets a data watch on it, and is held there.
	other, err := newRW(t, fakeClient(t, f), path).ReadLock().Acquire(ctxT(t))
	must(t, err)
	defer release(t, other)
	eventually(t, func() bool { return ops.count(conn, "GetW", node) == 1 }, "the keeper stuck on the held node's watch")
	deadline := l1.ValidUntil()
	eventually(t, func() bool { return time.Now().After(deadline.Add(time.Millisecond)) }, "the deadline passed")
	if closed(l1.Done()) {
		t.Fatal("the lease ended with the keeper stuck: the test shows nothing")
	}

	creates := ops.count(conn, "CreateEach", path+"/", true)
	r := async(rw.ReadLock().Acquire, ctxT(t))
	var got result
	var l2 *zklock.Lease
	if firstOf(t, func() bool { return ops.count(conn, "CreateEach", path+"/", true) > creates }, r, &got) {
		g.open() // the new node's grant may wait for the keeper
		l2 = await(t, r)
	} else {
		must(t, got.err, "a read past the node's deadline")
		l2 = got.lease
	}
	if l2.Node() == node {
		t.Fatalf("a read got the lost node %s", node)
	}
	mustLive(t, l2)
	mustIs(t, l1.Err(), zklock.ErrLeaseExpired, "the lease on the lost node")
	if until := l1.ValidUntil(); until.After(deadline) {
		t.Fatalf("the lost lease valid until %v, past its deadline %v", until, deadline)
	}
	l3, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if l3.Node() != l2.Node() {
		t.Fatalf("a read got %s, want the node open to reads %s", l3.Node(), l2.Node())
	}
	release(t, l3)
	release(t, l2)
}

// While the connection is down, a read joins the held node without waiting
// for the read that follows a notification (that read waits for the
// connection): one waiting for it when the connection drops joins then. A
// reader's node behind does not close the node.
func TestFakeSharedReadsJoinWhileDisconnected(t *testing.T) {
	f := zkfake.New()
	const path = "/jd/lock"
	c, rw := sharedOn(t, f, path)
	conn := connOf(t, f, c)
	g := newGate(t)
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenW", path: path, nth: 2, do: g.hold})
	l1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	eventually(t, func() bool { return ops.countAnswered(conn, "ChildrenW", path) == 1 }, "the shared node watches the lock")
	other, err := newRW(t, fakeClient(t, f), path).ReadLock().Acquire(ctxT(t))
	must(t, err)
	defer release(t, other)
	eventually(t, func() bool { return ops.count(conn, "ChildrenW", path) == 2 }, "the read after the notification, held")
	ctx := newDoneSignal(ctxT(t))
	r := async(rw.ReadLock().Acquire, ctx) // waits for that read, or the connection's drop
	select {
	case <-ctx.called: // it waits
	case <-time.After(long):
		t.Fatal("the read did not wait")
	}
	conn.Disconnect()
	l2 := await(t, r)
	if l2.Node() != l1.Node() {
		t.Fatalf("a read while disconnected got %s, want the held node %s", l2.Node(), l1.Node())
	}
	l3 := await(t, async(rw.ReadLock().Acquire, ctxT(t)))
	if l3.Node() != l1.Node() {
		t.Fatalf("a read while disconnected got %s, want the held node %s", l3.Node(), l1.Node())
	}
	conn.Reconnect()
	g.open()
	l4, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if l4.Node() != l1.Node() {
		t.Fatalf("a reader's node behind closed the shared node: a read got %s, want %s", l4.Node(), l1.Node())
	}
	for _, l := range []*zklock.Lease{l1, l2, l3, l4} {
		release(t, l)
	}
}

// A children read that fails with a connection loss does not end the
// shared node's watch for writers: it reads again once the connection is
// back, and closes the node to new reads when it finds a writer behind.
func TestFakeSharedReadsWatchSurvivesAConnectionLoss(t *testing.T) {
	f := zkfake.New()
	const path = "/wl/lock"
	c, rw := sharedOn(t, f, path)
	conn := connOf(t, f, c)
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenW", path: path, nth: 2, do: func(zkfake.Op) error {
		conn.Disconnect()
		return zk.ErrConnectionClosed
	}})
	l1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	eventually(t, func() bool { return ops.countAnswered(conn, "ChildrenW", path) == 1 }, "the shared node watches the lock")
	other, err := newRW(t, fakeClient(t, f), path).ReadLock().Acquire(ctxT(t))
	must(t, err)
	eventually(t, func() bool { return ops.count(conn, "ChildrenW", path) == 3 }, "the read after the failed one, waiting for the connection")
	w := async(newRW(t, fakeClient(t, f), path).WriteLock().Acquire, ctxT(t))
	fakeQueued(t, f, path, 3)
	conn.Reconnect()
	eventually(t, func() bool { _, _, open := zklock.SharedStateForTest(rw); return !open }, "the node closed to new reads: a writer is behind")
	release(t, other)
	release(t, l1)
	release(t, await(t, w))
}

// The last Release waits, while its ctx allows, for the shared node's
// goroutine, which ends once a read it has in flight returns: a read that
// hangs holds Release until ctx ends, and no longer.
func TestFakeSharedReadsLastReleaseWaitsWhileCtxAllows(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	const path = "/lr/lock"
	c, rw := sharedOn(t, f, path)
	conn := connOf(t, f, c)
	g := newGate(t)
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenW", path: path, nth: 2, do: g.hold})
	l, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	eventually(t, func() bool { return ops.countAnswered(conn, "ChildrenW", path) == 1 }, "the shared node watches the lock")
	other, err := newRW(t, fakeClient(t, f), path).ReadLock().Acquire(ctxT(t))
	must(t, err)
	defer release(t, other)
	eventually(t, func() bool { return ops.count(conn, "ChildrenW", path) == 2 }, "the read after the notification, held")
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	select {
	case err := <-done:
		must(t, err, "release")
		if ctx.Err() == nil {
			t.Fatal("the last Release returned while the node's goroutine was still in a read, with its ctx live")
		}
	case <-time.After(long):
		t.Fatal("the last Release did not return when its ctx ended")
	}
	if f.Exists(l.Node()) {
		t.Fatal("the node outlived its last release")
	}
}

// A read on a closed Client fails with ErrClientClosed, traced, as an
// *OpError.
func TestFakeSharedReadsClosedClient(t *testing.T) {
	f := zkfake.New()
	var rec recorder
	c, rw := sharedOn(t, f, "/cc/lock", zklock.WithTrace(rec.trace()))
	must(t, c.Close())
	_, err := rw.ReadLock().Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrClientClosed, "a read on a closed Client")
	var oe *zklock.OpError
	if !errors.As(err, &oe) || oe.Path != "/cc/lock" {
		t.Fatalf("error %v is not an *OpError on the path", err)
	}
	if n := len(rec.snapshot().failed); n != 1 {
		t.Fatalf("traced %d failed reads, want 1", n)
	}
}

// A shared node deleted from outside serves no more reads, even while its
// goroutine cannot yet end the leases on it (here, held in a read of the
// lock's children): a lease on it reports the loss, and a new read queues
// on a node of its own.
func TestFakeSharedReadsDeletedNodeServesNoMore(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	const path = "/dn/lock"
	// A short session timeout: the keeper sets a watch on a node whose
	// children watch was spent after a twentieth of it.
	c, rw := sharedOn(t, f, path, zklock.WithSessionTimeout(2*time.Second))
	conn := connOf(t, f, c)
	g := newGate(t)
	ops := watchOps(f, &opRule{conn: conn, name: "ChildrenW", path: path, nth: 2, do: g.hold})
	l1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	node := l1.Node()
	eventually(t, func() bool { return ops.countAnswered(conn, "ChildrenW", path) == 1 }, "the shared node watches the lock")
	must(t, f.Delete(node), "delete the shared node")
	// The deletion spends the children watches: the node's goroutine is
	// held in the read that follows; the keeper finds the node gone, ends
	// its lease and hands it to the janitor, whose delete says it is done.
	eventually(t, func() bool { return ops.count(conn, "ChildrenW", path) == 2 }, "the read after the deletion, held")
	eventually(t, func() bool { return ops.count(conn, "Delete", node) > 0 }, "the node's lease ended")
	ended := time.Now() // the node's lease ended before this
	mustIs(t, l1.Err(), zklock.ErrNodeDeleted, "a lease on the deleted node")
	if until := l1.ValidUntil(); until.After(ended) {
		t.Fatalf("a lease on a node whose lease ended by %v is valid until %v, later", ended, until)
	}
	l2, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err, "a read after the node was deleted")
	if l2.Node() == node {
		t.Fatalf("a read got the deleted node %s", node)
	}
	g.open()
	release(t, l2)
}

// A read with a nil ctx fails with ErrInvalidArgument, before anything is
// asked of ZooKeeper.
func TestFakeSharedReadsNilContext(t *testing.T) {
	f := zkfake.New()
	_, rw := sharedOn(t, f, "/nc/lock")
	for _, acquire := range []func(context.Context) (*zklock.Lease, error){rw.ReadLock().Acquire, rw.ReadLock().TryAcquire} {
		_, err := acquire(nil) // a nil context is exactly the bad input under test
		mustIs(t, err, zklock.ErrInvalidArgument, "a read with a nil context")
	}
	if f.Exists("/nc/lock") {
		t.Fatal("a read with a nil context made its path")
	}
}

// The leases on a shared read node share one revocation watch: asking
// each for Revoked sets one getData watch on the node (read again when it
// fires), and a revocation closes every lease's channel.
func TestFakeSharedReadsOneRevocationWatch(t *testing.T) {
	f := zkfake.New()
	const path = "/rv/lock"
	c, rw := sharedOn(t, f, path)
	ops := watchOps(f)
	a, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	b, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	ra, rb := a.Revoked(), b.Revoked()
	conn := connOf(t, f, c)
	eventually(t, func() bool { return ops.count(conn, "GetDataW", a.Node()) > 0 }, "the revocation watch set")
	must(t, zklock.Revoke(ctxT(t), fakeClient(t, f), a.Node()))
	for name, ch := range map[string]<-chan struct{}{"the first lease": ra, "the second lease": rb} {
		select {
		case <-ch:
		case <-time.After(long):
			t.Fatalf("%s was not told of the revocation", name)
		}
	}
	// One watcher: its watch, and its read again when the revocation
	// fired it. A watcher per lease would make four.
	if n := ops.count(conn, "GetDataW", a.Node()); n != 2 {
		t.Fatalf("%d getData watches on the shared node for two leases' Revoked, want 2 (one watcher)", n)
	}
	release(t, a)
	release(t, b)
}

// sharedReadRounds has goroutines goroutines each take rounds read leases
// of rw, by Acquire and TryAcquire in turn, releasing all but the last;
// every lease must be on first's shared node, with its token. It returns
// the last lease of each goroutine, held.
func sharedReadRounds(t *testing.T, rw *zklock.RWMutex, first *zklock.Lease, goroutines, rounds int) []*zklock.Lease {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	held := make([]*zklock.Lease, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				acquire := rw.ReadLock().Acquire
				if i%2 == 1 {
					acquire = rw.ReadLock().TryAcquire
				}
				l, err := acquire(ctxT(t))
				if err != nil {
					errs <- err
					return
				}
				if l.Node() != first.Node() || l.Token() != first.Token() {
					errs <- errors.New("a lease on " + l.Node() + ", not on the shared node " + first.Node())
					return
				}
				if i == rounds-1 {
					held[g] = l // keep the last one
					return
				}
				if err := l.Release(ctxT(t)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	waitGroup(t, &wg, "readers")
	close(errs)
	for err := range errs {
		must(t, err, "a shared read")
	}
	return held
}
