package zklock_test

// Rolling resizes of a zklock-layout semaphore, on a real ZooKeeper:
// replicas made with different sizes on one path (docs/semantics.md,
// "Resizing a semaphore"), and kazoo's layout, which keeps one size.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

// holdCount counts the leases held by replicas of a mixed fleet: the low
// 32 bits all of them, the high 32 bits those of size-2 replicas, in one
// word, so that one atomic Add returns both counts of one moment.
type holdCount struct{ v atomic.Int64 }

const twoBit = 1 << 32

// grant counts a lease just granted, and returns the counts with it.
func (h *holdCount) grant(size int) (all, twos int64) {
	d := int64(1)
	if size == 2 {
		d += twoBit
	}
	v := h.v.Add(d)
	return v & (twoBit - 1), v >> 32
}

// end uncounts a lease about to be released.
func (h *holdCount) end(size int) {
	d := int64(1)
	if size == 2 {
		d += twoBit
	}
	h.v.Add(-d)
}

// A rolling resize from 2 to 3: replicas of both sizes, each on its own
// Client, acquire and release in loops on one path. None fails for its
// size; at every grant, no more than 2 leases are held while a size-2
// replica holds one (and never more than 3); and once the 2s' participants
// are gone, 3 leases are held at once, and no fourth.
//
// The counts are taken inside each lease's life (after Acquire returns,
// before Release is called), so at any moment the leases counted are
// among those ZooKeeper's queue lets hold: a count over the bound is a
// grant the rule forbids, whatever the timing.
func TestSemaphoreRollingResize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	const cycles = 12
	sizes := []int{2, 3, 2, 3, 3}
	var (
		held     holdCount
		over     atomic.Int32
		overDesc atomic.Value
		mixed    atomic.Int32 // grants while both sizes had participants holding
	)
	var wg sync.WaitGroup
	ctx := ctxT(t)
	for _, size := range sizes {
		s := newSem(t, connect(t), path, size)
		wg.Add(1)
		go func(size int) {
			defer wg.Done()
			for i := 0; i < cycles; i++ {
				l, err := s.Acquire(ctx)
				if err != nil {
					t.Errorf("a replica of size %d: %v", size, err)
					return
				}
				all, twos := held.grant(size)
				if all > 3 || twos > 0 && all > 2 {
					over.Add(1)
					overDesc.Store(fmt.Sprintf("%d leases held, %d of them by 2s", all, twos))
				}
				if twos > 0 && all > twos {
					mixed.Add(1)
				}
				// Hold across a request: ZooKeeper's view of the queue
				// shows our node holding, with its size.
				ps, err := s.Participants(ctx)
				if err == nil {
					err = shownHolding(ps, l, size)
				}
				if err != nil {
					t.Error(err)
				}
				held.end(size)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}(size)
	}
	waitGroup(t, &wg, "the replicas did not finish their cycles")
	if n := over.Load(); n != 0 {
		t.Fatalf("over the bound %d times, the last: %v", n, overDesc.Load())
	}
	t.Logf("%d grants while replicas of both sizes held", mixed.Load())

	// The 2s are still running, with no participant on the path: 3 is
	// in force.
	var ls []*zklock.Lease
	for i := 0; i < 3; i++ {
		l, err := newSem(t, connect(t), path, 3).TryAcquire(ctxT(t))
		must(t, err, "lease %d of 3, once the 2s are gone", i+1)
		ls = append(ls, l)
	}
	_, err := newSem(t, connect(t), path, 3).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a fourth lease of 3")
	ps, err := newSem(t, connect(t), path, 3).Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 3 || len(ps) != 3 {
		t.Fatalf("size in force %d over %d participants, want 3 over 3", n, len(ps))
	}
	for _, l := range ls {
		release(t, l)
	}
}

// shownHolding checks that ps shows l's node holding, with size.
func shownHolding(ps []zklock.Participant, l *zklock.Lease, size int) error {
	for _, p := range ps {
		if p.Node == l.Node() {
			if !p.Holder || p.Size != size {
				return fmt.Errorf("lease %s: shown holder %v, size %d; want holding, size %d", l.Node(), p.Holder, p.Size, size)
			}
			return nil
		}
	}
	return fmt.Errorf("lease %s is not among the participants", l.Node())
}

// TryAcquire under mixed sizes: a lease is free to a participant of any
// size when fewer are held than the smallest size among the holders and
// its own, and it is never held back by a size queued behind it.
func TestSemaphoreResizeTryAcquire(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s2, s3 := newSem(t, connect(t), path, 2), newSem(t, connect(t), path, 3)
	a2, err := s2.TryAcquire(ctxT(t))
	must(t, err)
	b2, err := s2.TryAcquire(ctxT(t))
	must(t, err)
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind two 2s")
	release(t, a2)
	c3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a 3 beside one 2")
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a second 3 while a 2 holds")
	release(t, b2)
	d3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a second 3 once the 2s are gone")
	e3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a third 3")
	_, err = s2.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 2 behind three holders")
	queued(t, c, path, 3) // the refused tries left nothing

	// A 2 queues behind the three: 2 is in force for whoever comes next.
	w2 := async(s2.Acquire, ctxT(t))
	queued(t, c, path, 4)
	ps, err := s3.Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 2 {
		t.Fatalf("size in force %d with a 2 queued, want 2", n)
	}
	release(t, c3) // [D3 E3 W2]: the 2 is third
	pending(t, w2)
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind a queued 2")
	release(t, d3) // [E3 W2]
	w := await(t, w2)
	release(t, e3)
	release(t, w)
}

// An emptied path takes the next size at once: after every participant
// of size 2 has left, 3 leases are held together at once, on the path
// ZooKeeper has not reaped yet (its container manager runs every minute
// by default), with no wait for it. Whatever the path's data says is
// left as it is and refuses nobody.
func TestSemaphoreEmptiedPathTakesANewSize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s2 := newSem(t, connect(t), path, 2)
	for _, l := range acquireN(t, s2.TryAcquire, 2) {
		release(t, l)
	}
	queued(t, c, path, 0)
	s3 := newSem(t, connect(t), path, 3)
	ls := acquireN(t, s3.TryAcquire, 3)
	_, err := s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a fourth lease of 3")
	for _, l := range ls {
		release(t, l)
	}

	// A path made with data that reads as a size (by an older build, or
	// someone else): zklock's layout neither refuses nor rewrites it.
	for _, data := range []string{"2", "5", "-1", "a$", ""} {
		path := lockPath(t)
		mkParents(t, c, path)
		_, err := c.Conn().Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll))
		must(t, err)
		ls := acquireN(t, newSem(t, connect(t), path, 3).TryAcquire, 3)
		if got, _, err := c.Conn().Get(path); err != nil || string(got) != data {
			t.Fatalf("data %q became %q (%v)", data, got, err)
		}
		for _, l := range ls {
			release(t, l)
		}
	}
}

// kazoo's layout keeps kazoo's rule: one size, recorded in the path's
// data; a Semaphore of another size fails with ErrSizeMismatch, naming
// both sizes, and creates nothing.
func TestSemaphoreKazooLayoutRefusesAnotherSize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	kazoo := zklock.WithSemaphoreLayout(zklock.LayoutKazoo)
	l, err := newLayoutSem(t, connect(t), path, 3, kazoo).Acquire(ctxT(t))
	must(t, err)
	s2 := newLayoutSem(t, connect(t), path, 2, kazoo)
	for _, acquire := range []func(context.Context) (*zklock.Lease, error){s2.Acquire, s2.TryAcquire} {
		_, err = acquire(ctxT(t))
		mustIs(t, err, zklock.ErrSizeMismatch, "a kazoo-layout semaphore of 2 on a path of 3")
		if msg := err.Error(); !strings.Contains(msg, `"3"`) || !strings.Contains(msg, "not 2") {
			t.Fatalf("the error does not name both sizes: %v", err)
		}
	}
	queued(t, c, path, 1)
	queued(t, c, path+"-__lock__", 0)
	release(t, l)
}

// A smaller size that queues keeps the queue's order: a 3 waiting ahead
// of a newly queued 2 takes the lease that frees (three are then held,
// all granted to 3s queued before the 2), and the 2 waits until fewer
// than 2 are ahead of it.
func TestSemaphoreSmallerNewcomerKeepsTheQueue(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s3 := newSem(t, connect(t), path, 3)
	held := acquireN(t, s3.Acquire, 3)
	w3 := async(s3.Acquire, ctxT(t))
	queued(t, c, path, 4)
	w2 := async(newSem(t, connect(t), path, 2).Acquire, ctxT(t))
	queued(t, c, path, 5)
	release(t, held[0]) // [3 3 W3 W2]: W3 is third, below every size up to it
	l3 := await(t, w3)
	pending(t, w2)
	release(t, held[1]) // [3 W3 W2]: the 2 is third
	pending(t, w2)
	release(t, held[2]) // [W3 W2]
	l2 := await(t, w2)
	release(t, l3)
	release(t, l2)
}
