package zklock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

func newSharedRW(t testing.TB, c *zklock.Client, path string) *zklock.RWMutex {
	t.Helper()
	rw, err := zklock.NewRWMutex(c, path, zklock.WithSharedReads())
	must(t, err, "new rwmutex %s with shared reads", path)
	return rw
}

// 16 goroutines read through one RWMutex: one node, one reader in
// Participants, every lease on that node with its token; while a lease
// holds, the others cost no create, delete or multi; Trace sees every lease.
func TestSharedReadsOneNode(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var rc reqCounter
	var rec recorder
	c := connect(t, zklock.WithDialer(rc.dial), zklock.WithTrace(rec.trace()))
	rw := newSharedRW(t, c, path)
	first, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err, "first read")

	const goroutines, rounds = 16, 50
	before := rc.snapshot()
	held := sharedReadRounds(t, rw, first, goroutines, rounds)
	d := rc.snapshot().minus(before)
	if n := d[1] + d[2] + d[14] + d[15] + d[19]; n != 0 { // create, delete, multi, create2, createContainer
		t.Fatalf("reads on a held shared node sent %d creates, deletes or multis: %s", n, d.per(1))
	}

	parts, err := rw.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 1 || !parts[0].Holder || !parts[0].Read || parts[0].Node != first.Node() {
		t.Fatalf("want the shared node as the one reader, got %+v", parts)
	}
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("want one node, got %v", kids)
	}
	for _, l := range held {
		must(t, l.Err(), "a held lease")
		release(t, l)
	}
	release(t, first)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("the node outlived its last lease: %v", kids)
	}
	s := rec.snapshot()
	if want := 1 + goroutines*rounds; len(s.acquired) != want || len(s.released) != want || len(s.lost) != 0 || len(s.queued) != 0 {
		t.Fatalf("trace: %d acquired, %d released, %d lost, %d queued; want %d, %d, 0, 0",
			len(s.acquired), len(s.released), len(s.lost), len(s.queued), want, want)
	}
	for _, i := range s.acquired {
		if i.Node != first.Node() || i.Kind != zklock.KindRead || i.Token != first.Token() {
			t.Fatalf("trace of a shared lease: %+v", i)
		}
	}
}

// The node stays while any lease is on it, and goes with the last.
func TestSharedReadsNodeStaysUntilLastRelease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newSharedRW(t, c, path)
	leases := acquireN(t, rw.ReadLock().Acquire, 3)
	node := leases[0].Node()
	for i, l := range leases[:2] {
		release(t, l)
		if !closed(l.Done()) {
			t.Fatalf("lease %d released, Done open", i)
		}
		mustIs(t, l.Err(), zklock.ErrReleased, "a released lease")
		mustIs(t, l.Release(ctxT(t)), zklock.ErrReleased, "a second release")
		if kids := children(t, c, path); len(kids) != 1 || path+"/"+kids[0] != node {
			t.Fatalf("after %d of 3 releases want %s alone, got %v", i+1, node, kids)
		}
	}
	last := leases[2]
	must(t, last.Err(), "the last lease, while others were released")
	if closed(last.Done()) {
		t.Fatal("the last lease ended with the others")
	}
	release(t, last)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("the node outlived its last lease: %v", kids)
	}
	// The next read makes a node of its own.
	l, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if l.Node() == node {
		t.Fatalf("a read after the last release got the deleted node %s", node)
	}
	release(t, l)
}

// A node deleted from outside ends every lease on it, and each is traced
// as lost; a revocation reaches every lease on the node.
func TestSharedReadsDeletedNodeEndsAll(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var rec recorder
	c := connect(t, zklock.WithTrace(rec.trace()))
	rw := newSharedRW(t, c, path)
	leases := acquireN(t, rw.ReadLock().Acquire, 5)
	node := leases[0].Node()

	other := connect(t)
	must(t, zklock.Revoke(ctxT(t), other, node), "revoke")
	for i, l := range leases {
		select {
		case <-l.Revoked():
		case <-time.After(long):
			t.Fatalf("lease %d was not told of the revocation", i)
		}
	}
	must(t, other.Conn().Delete(node, -1), "delete the shared node")
	for i, l := range leases {
		select {
		case <-l.Done():
		case <-time.After(long):
			t.Fatalf("lease %d outlived its deleted node", i)
		}
		mustIs(t, l.Err(), zklock.ErrNodeDeleted, "lease %d", i)
		if err := l.Release(ctxT(t)); !errors.Is(err, zklock.ErrNodeDeleted) {
			t.Fatalf("release of a lost lease: %v, want ErrNodeDeleted", err)
		}
	}
	eventually(t, func() bool { return len(rec.snapshot().lost) == 5 }, "five leases traced as lost")
	for _, i := range rec.snapshot().lost {
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

// A writer on another Client gets in, round after round, while 8
// goroutines read through a shared node in a loop, each read holding for a
// millisecond of work, so that the node always has a lease on it; no
// reader lease is held while the writer holds. Without the children watch
// that stops reads joining the node, the writer waits for ever.
func TestSharedReadsWriterNotStarved(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	rw := newSharedRW(t, connect(t), path)
	writer := newRW(t, connect(t), path)

	var writing atomic.Bool
	var overlaps, reads atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := rw.ReadLock().Acquire(ctxT(t))
				if err != nil {
					errs <- err
					return
				}
				if writing.Load() {
					overlaps.Add(1)
				}
				reads.Add(1)
				time.Sleep(time.Millisecond) // the read's work, not a synchronisation
				if err := l.Release(ctxT(t)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	eventually(t, func() bool { return reads.Load() > 100 }, "readers under way")
	for round := 0; round < 5; round++ {
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		start := time.Now()
		w, err := writer.WriteLock().Acquire(ctx)
		cancel()
		must(t, err, "round %d: the writer, behind 8 looping readers", round)
		writing.Store(true)
		t.Logf("round %d: writer waited %v", round, time.Since(start))
		n := reads.Load()
		writing.Store(false)
		release(t, w)
		eventually(t, func() bool { return reads.Load() > n+50 }, "readers again after round %d", round)
	}
	close(stop)
	waitGroup(t, &wg, "readers")
	close(errs)
	for err := range errs {
		must(t, err, "a read")
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d reader leases held while the writer held", n)
	}
}

// Waiters of a queued shared node that give up leave nothing behind; one
// that stays keeps the node, and is granted with it.
func TestSharedReadsCancelLeavesNothing(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	wc := connect(t)
	w, err := newRW(t, wc, path).WriteLock().Acquire(ctxT(t))
	must(t, err)

	c := connect(t)
	rw := newSharedRW(t, c, path)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var gone []<-chan result
	for i := 0; i < 3; i++ {
		gone = append(gone, async(rw.ReadLock().Acquire, ctx))
	}
	queued(t, c, path, 2)
	_, err = rw.ReadLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a TryAcquire while the shared node is queued")
	cancel()
	for _, ch := range gone {
		mustIs(t, returned(t, ch).err, context.Canceled, "a cancelled shared read")
	}
	queued(t, c, path, 1) // the writer alone: the queued node was deleted

	// Two wait, one leaves: the node stays, and the other gets it.
	ctx2, cancel2 := context.WithCancel(ctxT(t))
	leaving := async(rw.ReadLock().Acquire, ctx2)
	staying := async(rw.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	kids := children(t, c, path)
	cancel2()
	mustIs(t, returned(t, leaving).err, context.Canceled)
	pending(t, staying)
	if now := children(t, c, path); len(now) != 2 || now[0] != kids[0] && now[0] != kids[1] {
		t.Fatalf("a waiter left and took the node with it: %v, was %v", now, kids)
	}
	release(t, w)
	l := await(t, staying)
	if kids := children(t, c, path); len(kids) != 1 || path+"/"+kids[0] != l.Node() {
		t.Fatalf("want the shared node alone, got %v (lease on %s)", kids, l.Node())
	}
	release(t, l)
	queued(t, c, path, 0)
}

// Downgrade still works on an RWMutex with shared reads: its read lease
// is on a node of its own, and holds beside the shared node's leases.
func TestSharedReadsDowngrade(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newSharedRW(t, c, path)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	r := async(rw.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	d, err := rw.Downgrade(ctxT(t), w)
	must(t, err, "downgrade")
	shared := await(t, r)
	if shared.Node() == d.Node() || !strings.Contains(d.Node(), "__READ__") {
		t.Fatalf("downgraded lease %s, shared lease %s", d.Node(), shared.Node())
	}
	_, err = rw.Downgrade(ctxT(t), shared)
	mustIs(t, err, zklock.ErrInvalidArgument, "a shared read lease cannot be upgraded")
	release(t, d)
	release(t, shared)
	queued(t, c, path, 0)
}

func TestSharedReadsOnlyOnRWMutex(t *testing.T) {
	t.Parallel()
	c := connect(t)
	path := lockPath(t)
	opt := zklock.WithSharedReads()
	_, err := zklock.NewMutex(c, path, opt)
	mustIs(t, err, zklock.ErrInvalidArgument, "mutex")
	_, err = zklock.NewSemaphore(c, path, 2, opt)
	mustIs(t, err, zklock.ErrInvalidArgument, "semaphore")
	_, err = zklock.NewLock(c, path, kindDriver{zklock.KindRead}, opt)
	mustIs(t, err, zklock.ErrInvalidArgument, "lock with a read driver")
	_, err = zklock.NewMultiLock(c, []string{path, path + "2"}, opt)
	mustIs(t, err, zklock.ErrInvalidArgument, "multilock")
	_, err = zklock.NewElection(c, path, opt)
	mustIs(t, err, zklock.ErrInvalidArgument, "election")
	_, err = zklock.NewRWMutex(c, path, opt)
	must(t, err, "rwmutex")
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("constructors made nodes: %v", kids)
	}
}

// Reads that arrive while the shared node is queued wait with it, on that
// one node, and are granted with it.
func TestSharedReadsQueuedTogether(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	w, err := newRW(t, connect(t), path).WriteLock().Acquire(ctxT(t))
	must(t, err)
	c := connect(t)
	rw := newSharedRW(t, c, path)
	var waiting []<-chan result
	for i := 0; i < 4; i++ {
		waiting = append(waiting, async(rw.ReadLock().Acquire, ctxT(t)))
	}
	queued(t, c, path, 2)
	for _, ch := range waiting {
		pending(t, ch)
	}
	release(t, w)
	var node string
	for i, ch := range waiting {
		l := await(t, ch)
		if i == 0 {
			node = l.Node()
		}
		if l.Node() != node {
			t.Fatalf("waiters granted on %s and %s", node, l.Node())
		}
		defer release(t, l)
	}
	if kids := children(t, c, path); len(kids) != 1 || path+"/"+kids[0] != node {
		t.Fatalf("want the shared node alone, got %v", kids)
	}
}
