package zklock_test

import (
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// deleteNode deletes node through another session, as an operator would.
func deleteNode(t testing.TB, other *zklock.Client, node string) {
	t.Helper()
	must(t, other.Conn().Delete(node, -1), "delete %s", node)
}

// ended waits for l to end, and returns its error.
func ended(t testing.TB, l *zklock.Lease, what ...any) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(long):
		t.Fatalf("%sthe lease did not end", msg(what))
		return nil
	}
}

// A held node that someone deletes ends its lease, with ErrNodeDeleted,
// however the lease came to hold: at once on its first look (covered by
// that look's children watch), after waiting (on a read that leaves no
// watch), at once on a lock that looked contended (a first look with no
// watch), as one of a semaphore's AcquireN, and as a MultiLock.
//
// Each ends through a watch on its node: its own, or one the keeper sets
// when the watch that covered the node is spent or there was none (a
// getData with a watch, which rc sees). The keeper's periodic check of held
// nodes would end the lease too, but only a third of the session timeout
// after the Client's latest write, and the keeper sets a due watch before
// it checks (keeper.turn): a node that no watch covers and that is not
// handed to the keeper fails the test.
func TestDeletedHeldNodeEndsLease(t *testing.T) {
	var rc reqCounter
	c, other := connect(t, zklock.WithDialer(rc.dial)), connect(t)
	ctx := ctxT(t)
	check := func(l *zklock.Lease, node string, what string) {
		t.Helper()
		deleteNode(t, other, node)
		err := ended(t, l, what)
		mustIs(t, err, zklock.ErrNodeDeleted, what)
		mustIs(t, err, zklock.ErrLeaseExpired, what)
		if rc.watches(node) == 0 {
			t.Fatalf("%s: the lease ended with no watch ever set on its node: the keeper's periodic check found it", what)
		}
	}

	// Held on its first look.
	m, err := zklock.NewMutex(c, lockPath(t))
	must(t, err)
	l, err := m.Acquire(ctx)
	must(t, err)
	check(l, l.Node(), "held at once")

	// Held after a wait.
	path := lockPath(t)
	m, err = zklock.NewMutex(c, path)
	must(t, err)
	first, err := m.Acquire(ctx)
	must(t, err)
	ch := async(m.Acquire, ctx)
	queued(t, other, path, 2)
	release(t, first)
	l = await(t, ch)
	check(l, l.Node(), "held after a wait")

	// Held at once on a lock whose previous acquire had to wait: that
	// first look is sent with no children watch (the lock looked
	// contended), so nothing covers the node at the grant but the keeper's
	// own watch.
	path = lockPath(t)
	m, err = zklock.NewMutex(c, path)
	must(t, err)
	blocker, err := newMutex(t, other, path).Acquire(ctx)
	must(t, err)
	ch = async(m.Acquire, ctx)
	queued(t, other, path, 2)
	release(t, blocker)
	release(t, await(t, ch)) // m's last first look found it queued
	l, err = m.Acquire(ctx)
	must(t, err)
	check(l, l.Node(), "held at once after the lock was contended")

	// Held at once, then a waiter queues behind it (the children watch
	// of its look is spent): its node is still watched.
	path = lockPath(t)
	m, err = zklock.NewMutex(c, path)
	must(t, err)
	l, err = m.Acquire(ctx)
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	waiter := async(m.Acquire, wctx)
	queued(t, other, path, 2)
	check(l, l.Node(), "held at once, then a waiter came")
	await(t, waiter).Release(ctx)
	cancel()

	// AcquireN: every lease's node, not only the last.
	s, err := zklock.NewSemaphore(c, lockPath(t), 3)
	must(t, err)
	leases, err := s.AcquireN(ctx, 3)
	must(t, err)
	check(leases[0], leases[0].Node(), "the first of AcquireN")
	if err := leases[1].Err(); err != nil {
		t.Fatalf("the second lease of AcquireN ended with the first: %v", err)
	}

	// A MultiLock: any of its nodes.
	ml, err := zklock.NewMultiLock(c, []string{lockPath(t), lockPath(t)})
	must(t, err)
	l, err = ml.Acquire(ctx)
	must(t, err)
	nodes := children(t, other, ml.Paths()[1])
	check(l, ml.Paths()[1]+"/"+nodes[0], "a MultiLock's second node")
}

// Thousands of leases on one Client: every deleted held node ends its
// lease, also after a reconnect, when go-zookeeper sets every watch again
// (in packets of at most 128 KiB), and the others stay held. No goroutine
// per lease.
func TestDeletedHeldNodesAmongThousands(t *testing.T) {
	const n = 3000
	c, f := faulty(t, 4*time.Second)
	other := connect(t)
	ctx := ctxT(t)
	root := lockPath(t)
	leases := holdMany(t, ctx, c, root, n)

	f.Drop() // the same session comes back on a new connection
	eventually(t, func() bool { return c.SessionID() != 0 && leases[0].Err() == nil }, "reconnect")

	rnd := rand.New(rand.NewSource(1))
	picked := map[int]bool{}
	for len(picked) < 20 {
		picked[rnd.Intn(n)] = true
	}
	for i := range picked {
		deleteNode(t, other, leases[i].Node())
	}
	for i := range picked {
		mustIs(t, ended(t, leases[i], "lease %d", i), zklock.ErrNodeDeleted)
	}
	for i, l := range leases {
		if !picked[i] {
			must(t, l.Err(), "lease %d, whose node nobody deleted", i)
		}
	}
}

// Many leases of one Client released at once: the deletes that come while
// one is in flight go out together (one multi-operation); whichever way
// each went, every Release returns nil, every lease ends with ErrReleased
// and every node is gone.
func TestConcurrentReleasesOnOneClient(t *testing.T) {
	t.Parallel()
	const n = 200
	c, other := connect(t), connect(t)
	ctx := ctxT(t)
	leases := holdMany(t, ctx, c, lockPath(t), n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Add(1)
		go func(l *zklock.Lease) {
			defer wg.Done()
			errs <- l.Release(ctx)
		}(l)
	}
	waitGroup(t, &wg, "the releases did not return")
	close(errs)
	for err := range errs {
		must(t, err, "release")
	}
	for i, l := range leases {
		mustIs(t, l.Err(), zklock.ErrReleased, "lease %d", i)
		if ok, _, err := other.Conn().Exists(l.Node()); err != nil || ok {
			t.Fatalf("lease %d: its node %s is still there (err %v)", i, l.Node(), err)
		}
	}
}

// Releases whose context ends while they wait behind another's delete
// leave the queue without stalling it: every Release returns, and every
// node is deleted, by a batch or by the janitor.
func TestCancelledReleasesDoNotStallTheQueue(t *testing.T) {
	t.Parallel()
	const n = 200
	c, other := connect(t), connect(t)
	ctx := ctxT(t)
	leases := holdMany(t, ctx, c, lockPath(t), n)
	done, cancel := context.WithCancel(ctx)
	cancel()
	var wg sync.WaitGroup
	for i, l := range leases {
		rctx := ctx
		if i%2 == 1 {
			rctx = done // already over: a queued Release leaves at once
		}
		wg.Add(1)
		go func(l *zklock.Lease) {
			defer wg.Done()
			_ = l.Release(rctx) // nil, or the context's error; the node goes either way
		}(l)
	}
	waitGroup(t, &wg, "the releases did not return: the queue stalled")
	for i, l := range leases {
		node := l.Node()
		eventually(t, func() bool { ok, _, err := other.Conn().Exists(node); return err == nil && !ok },
			"lease %d's node %s deleted", i, node)
	}
}
