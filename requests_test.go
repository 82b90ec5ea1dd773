package zklock_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// An uncontended acquire and release costs the floor: one create, one
// getChildren (sent right behind the create, whose result it already
// shows) and one delete; the token needs no request of its own.
func TestUncontendedAcquireRequests(t *testing.T) {
	t.Parallel()
	var rc reqCounter
	c := connect(t, zklock.WithDialer(rc.dial))
	m := newMutex(t, c, lockPath(t))
	acquire := func() *zklock.Lease {
		l, err := m.Acquire(ctxT(t))
		must(t, err)
		return l
	}
	release(t, acquire()) // the path exists from here on
	before := rc.snapshot()
	const cycles = 20
	for i := 0; i < cycles; i++ {
		release(t, acquire())
	}
	got := rc.snapshot().minus(before)
	const (
		opCreate       = 1
		opDelete       = 2
		opGetChildren2 = 12
	)
	for _, op := range []int32{opCreate, opGetChildren2, opDelete} {
		if got[op] != cycles {
			t.Fatalf("%d cycles made %s: want one %s each", cycles, got.per(1), opName(op))
		}
	}
}

// A handoff costs a waiter no more than go-zookeeper's zk.Lock makes it
// send, with the fencing token and its lease's watch included: create,
// getChildren (sent right behind the create), a watch on its predecessor,
// getChildren when that goes (whose stat gives the token), delete. No
// read of its own node, and one watch notification: no read leaves a
// children watch that the next create or delete would fire.
func TestHandoffRequests(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	holder := newMutex(t, connect(t), path)
	var rc reqCounter
	// A long session timeout: its lease, granted by a read that leaves no
	// watch, gets a watch of the keeper's own (a getData) only once it is
	// a twentieth of that old, and the test releases it long before.
	waiter := newMutex(t, connect(t, zklock.WithDialer(rc.dial), zklock.WithSessionTimeout(time.Minute)), path)
	watcher := connect(t)
	ctx := ctxT(t)

	const (
		opCreate       = 1
		opDelete       = 2
		opGetChildren2 = 12
		opMulti        = 14 // the keeper's confirmation, if one falls due
	)
	want := map[int32]int64{opCreate: 1, opGetChildren2: 2, opGetData: 1, opDelete: 1}
	const cycles = 10
	var prev int64
	for i := 0; i < cycles; i++ {
		held, err := holder.Acquire(ctx)
		must(t, err)
		before, events := rc.snapshot(), rc.events.Load()
		ch := async(waiter.Acquire, ctx)
		// Queued, its predecessor watched, nothing in flight.
		eventually(t, func() bool {
			return len(children(t, watcher, path)) == 2 && rc.watches(held.Node()) > 0 && rc.outstanding() == 0
		}, "the waiter queued behind %s", held.Node())
		release(t, held)
		l := await(t, ch)
		if l.Token() <= prev {
			t.Fatalf("cycle %d: token %d, not above the one before, %d", i, l.Token(), prev)
		}
		prev = l.Token()
		if n := rc.watches(l.Node()); n != 0 {
			t.Fatalf("cycle %d: the waiter read its own node with a watch %d times", i, n)
		}
		release(t, l)
		// One notification: its predecessor's deletion. The reads leave
		// no children watch (the first look leaves one only while the
		// lock has not yet looked contended: in the first cycle).
		if n := rc.events.Load() - events; i > 0 && n != 1 {
			t.Fatalf("cycle %d: the waiter got %d watch notifications; want 1 (its predecessor's deletion)", i, n)
		}
		got := rc.snapshot().minus(before)
		for op, n := range got {
			if op != opMulti && n != want[op] {
				t.Fatalf("cycle %d: a waiter's acquire and release made %s; want create, getChildren2 twice, getData once, delete",
					i, got.per(1))
			}
		}
		for op, n := range want {
			if got[op] != n {
				t.Fatalf("cycle %d: a waiter's acquire and release made %s; want create, getChildren2 twice, getData once, delete",
					i, got.per(1))
			}
		}
	}
}
