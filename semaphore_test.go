package zklock_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

// Every lease gets used: max clients hold at once, and the next is refused
// until one lets go. And never more than max hold, at any acquisition, as
// the holders count themselves and as ZooKeeper's children say. No check
// depends on how the holders' timing happens to overlap.
func TestSemaphoreBound(t *testing.T) {
	t.Parallel()
	const max, clients, cycles = 2, 6, 10
	path := lockPath(t)
	c := connect(t)

	// max acquires from max sessions, at once: each returns while the
	// others still hold (nobody releases until all have returned), so all
	// max leases are held together.
	var all []*zklock.Lease
	var chs []<-chan result
	for i := 0; i < max; i++ {
		chs = append(chs, async(newSem(t, connect(t), path, max).Acquire, ctxT(t)))
	}
	for _, ch := range chs {
		all = append(all, await(t, ch))
	}
	parts, err := newSem(t, c, path, max).Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, true}) {
		t.Fatalf("want %d holders at once: holder %v", max, held)
	}
	extra := newSem(t, connect(t), path, max)
	_, err = extra.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "lease %d of %d", max+1, max)
	next := async(extra.Acquire, ctxT(t))
	queued(t, c, path, max+1)
	pending(t, next)
	release(t, all[0])
	all[0] = await(t, next)
	for _, l := range all {
		release(t, l)
	}

	// The bound, at every acquisition of clients contending for cycles each.
	var inside, over, unseen atomic.Int32
	hammer(t, clients, cycles, func() contender {
		s := newSem(t, connect(t), path, max)
		return contender{acquire: one(s.Acquire), held: func(ctx context.Context, ls []*zklock.Lease) error {
			if inside.Add(1) > max {
				over.Add(1)
			}
			defer inside.Add(-1)
			parts, err := s.Participants(ctx)
			if err != nil {
				return err
			}
			return checkHolders(parts, ls, max, &over, &unseen)
		}}
	})
	if n := over.Load(); n != 0 {
		t.Fatalf("more than maxLeases holders, %d times", n)
	}
	if n := unseen.Load(); n != 0 {
		t.Fatalf("a lease whose node ZooKeeper's children do not show holding, %d times", n)
	}
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// checkHolders counts, in over, a snapshot of parts with more than max
// holders and, in unseen, one where ours (held leases) are not all holders.
func checkHolders(parts []zklock.Participant, ours []*zklock.Lease, max int, over, unseen *atomic.Int32) error {
	n := 0
	holding := make(map[string]bool)
	for _, p := range parts {
		if p.Holder {
			n++
			holding[p.Node] = true
		}
	}
	if n > max {
		over.Add(1)
	}
	for _, l := range ours {
		if !holding[l.Node()] {
			unseen.Add(1)
			return fmt.Errorf("held lease %s is not a holder in %+v", l.Node(), parts)
		}
	}
	return nil
}

// Curator's deprecated InterProcessSemaphore leaves C asleep here: with 2
// leases and queue [A B C D], B's release must wake C at once.
func TestSemaphoreOutOfOrderRelease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	sem := func() *zklock.Semaphore { return newSem(t, connect(t), path, 2) }
	a, err := sem().Acquire(ctxT(t))
	must(t, err)
	b, err := sem().Acquire(ctxT(t))
	must(t, err)
	cc := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 3)
	d := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 4)
	pending(t, cc)

	release(t, b)
	cl := await(t, cc)
	pending(t, d)
	if closed(a.Done()) {
		t.Fatalf("A's lease ended: %v", a.Err())
	}

	release(t, a)
	dl := await(t, d)
	release(t, cl)
	release(t, dl)
}

// Three clients each asking for 2 of 3 leases must all finish: none may hold
// part of its request while it waits for the rest.
func TestSemaphoreAcquireN(t *testing.T) {
	t.Parallel()
	const max, n, clients, cycles = 3, 2, 3, 5
	path := lockPath(t)
	var inside, over, wrong, unseen atomic.Int32
	hammer(t, clients, cycles, func() contender {
		s := newSem(t, connect(t), path, max)
		return contender{
			acquire: func(ctx context.Context) ([]*zklock.Lease, error) { return s.AcquireN(ctx, n) },
			held: func(ctx context.Context, ls []*zklock.Lease) error {
				if len(ls) != n {
					wrong.Add(1)
				}
				if inside.Add(int32(len(ls))) > max {
					over.Add(1)
				}
				defer inside.Add(-int32(len(ls)))
				parts, err := s.Participants(ctx)
				if err != nil {
					return err
				}
				return checkHolders(parts, ls, max, &over, &unseen)
			},
		}
	})
	if k := wrong.Load(); k != 0 {
		t.Fatalf("AcquireN returned a part of its request, %d times", k)
	}
	if k := over.Load(); k != 0 {
		t.Fatalf("more than maxLeases held, %d times", k)
	}
	if k := unseen.Load(); k != 0 {
		t.Fatalf("a lease whose node ZooKeeper's children do not show holding, %d times", k)
	}
	if kids := children(t, connect(t), path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestSemaphoreAcquireNWaitsWhole(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newSem(t, c, path, 3)
	one, err := s.Acquire(ctxT(t))
	must(t, err)
	two, err := s.Acquire(ctxT(t))
	must(t, err)

	s2 := newSem(t, connect(t), path, 3)
	ctx := ctxT(t)
	ch := make(chan []*zklock.Lease, 1)
	go func() {
		ls, err := s2.AcquireN(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		ch <- ls
	}()
	queued(t, c, path, 4)
	parts, err := s.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, true, false, false}) {
		t.Fatalf("a free lease is not taken by part of a request: holder %v", held)
	}
	release(t, one)
	var ls []*zklock.Lease
	select {
	case ls = <-ch:
	case <-time.After(long):
		t.Fatal("AcquireN did not finish")
	}
	if len(ls) != 2 {
		t.Fatalf("AcquireN(2) returned %d leases", len(ls))
	}
	if ls[0].Token() != ls[1].Token() {
		t.Fatalf("the leases of one AcquireN share a token: %d, %d", ls[0].Token(), ls[1].Token())
	}
	release(t, two)
	for _, l := range ls {
		release(t, l)
	}
}

func newSem(t testing.TB, c *zklock.Client, path string, max int) *zklock.Semaphore {
	t.Helper()
	s, err := zklock.NewSemaphore(c, path, max)
	must(t, err, "new semaphore %s", path)
	return s
}

// TryAcquireN takes n leases only if they are all free now, and leaves no
// node behind when they are not.
func TestSemaphoreTryAcquireN(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newSem(t, c, path, 3)
	held, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	_, err = newSem(t, connect(t), path, 3).TryAcquireN(ctxT(t), 2)
	mustIs(t, err, zklock.ErrLocked, "two leases of three with two held")
	if kids := children(t, c, path); len(kids) != 2 {
		t.Fatalf("children %v: want only the holder's two", kids)
	}
	for _, l := range held {
		release(t, l)
	}
	got, err := newSem(t, connect(t), path, 3).TryAcquireN(ctxT(t), 3)
	must(t, err, "all three leases, free")
	if len(got) != 3 {
		t.Fatalf("%d leases, want 3", len(got))
	}
	for _, l := range got {
		release(t, l)
	}
	_, err = s.TryAcquireN(ctxT(t), 4)
	mustIs(t, err, zklock.ErrInvalidArgument, "n above maxLeases")
}

// Another library's semaphore on the path (Curator's InterProcessSemaphoreV2
// keeps "locks" and "leases" children; kazoo's Semaphore plain 32-hex
// nodes) makes Semaphore.Acquire refuse: it cannot count their holders.
func TestSemaphoreRefusesForeignLayout(t *testing.T) {
	t.Parallel()
	c := connect(t)
	for _, foreign := range []string{"leases", "0123456789abcdef0123456789abcdef"} {
		path := lockPath(t)
		s := newSem(t, c, path, 2)
		l, err := s.Acquire(ctxT(t)) // creates the path
		must(t, err)
		release(t, l)
		_, err = c.Conn().Create(path+"/"+foreign, nil, 0, zk.WorldACL(zk.PermAll))
		must(t, err)
		_, err = s.Acquire(ctxT(t))
		mustIs(t, err, zklock.ErrUnknownNode, foreign)
		if kids := children(t, c, path); !slices.Equal(kids, []string{foreign}) {
			t.Fatalf("%s: want no node of ours left, children %v", foreign, kids)
		}
		_, err = s.Participants(ctxT(t))
		mustIs(t, err, zklock.ErrUnknownNode, "participants beside %s", foreign)
	}
}
