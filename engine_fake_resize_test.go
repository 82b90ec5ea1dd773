package zklock_test

// Semaphores on the fake: replicas made with different sizes on one path
// (docs/semantics.md, "Resizing a semaphore"), and the hand-over between
// waiters that the sizes make subtle.

import (
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// fakeSems connects a Client per size to f, each with a Semaphore of that
// size on path.
func fakeSems(t testing.TB, f *zkfake.Server, path string, sizes ...int) ([]*zklock.Client, []*zklock.Semaphore) {
	t.Helper()
	cs, sems := make([]*zklock.Client, len(sizes)), make([]*zklock.Semaphore, len(sizes))
	for i, n := range sizes {
		cs[i] = fakeClient(t, f)
		s, err := zklock.NewSemaphore(cs[i], path, n)
		must(t, err)
		sems[i] = s
	}
	return cs, sems
}

// A waiter P whose first look is late (its server lagged) holds on it at
// once, while G, queued behind P, had decided on an earlier read that P
// waits, and so watches P for its hold. P must tell G (the hand-over's
// announce), or G sleeps until P lets go while a lease is free for it.
func TestFakeSemaphoreLateFirstLookAnnounces(t *testing.T) {
	f := zkfake.New()
	cs, sems := fakeSems(t, f, "/late", 2, 2, 2, 2)
	la, err := sems[0].Acquire(ctxT(t))
	must(t, err)
	lb, err := sems[1].Acquire(ctxT(t))
	must(t, err)

	cp, cg := connOf(t, f, cs[2]), connOf(t, f, cs[3])
	lookHeld, lookGo, gWatches := make(chan struct{}), make(chan struct{}), make(chan struct{}, 8)
	var held atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		switch {
		case op.Conn == cp && (op.Name == "ChildrenStat" || op.Name == "ChildrenStatW") && held.CompareAndSwap(false, true):
			close(lookHeld)
			<-lookGo
		case op.Conn == cg && op.Name == "GetW":
			gWatches <- struct{}{}
		}
		return nil
	}})
	rp := async(sems[2].Acquire, ctxT(t))
	<-lookHeld // P's node is there; its first look waits
	rg := async(sems[3].Acquire, ctxT(t))
	select { // G read [A B P G] and watches P for its hold
	case <-gWatches:
	case <-rg:
		t.Fatal("G returned while two leases are held and P is ahead of it")
	}
	release(t, la)
	close(lookGo) // P reads [B P G]: it holds at once
	lp := await(t, rp)
	pending(t, rg)
	release(t, lb) // [P G]: G's lease is free
	lg := await(t, rg)
	release(t, lp)
	release(t, lg)
}
