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

// A handoff by grant (handoff.go) costs a waiter what its one-delay
// handoff needs and nothing that grows with the queue: create, getChildren
// (its first look, sent right behind the create), then three watches set
// together (its predecessor's node, its predecessor's grant, its own node,
// which its lease keeps as its cover), and nothing when the grant fires:
// no getChildren after the wake. Its token comes with the grant on
// ZooKeeper 3.9; before 3.9 the lease reads it when first asked for (the
// lock path's stat, then its own node): the even cycles ask, the odd ones
// do not. Its release is one multi (its own grant fired with its delete).
// Three notifications: the grant, its predecessor's deletion, and its own
// node's deletion at its release.
func TestHandoffRequests(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	holder := newMutex(t, connect(t), path)
	var rc reqCounter
	waiter := newMutex(t, connect(t, zklock.WithDialer(rc.dial), zklock.WithSessionTimeout(time.Minute)), path)
	watcher := connect(t)
	ctx := ctxT(t)

	const (
		opCreate       = 1
		opDelete       = 2
		opGetChildren2 = 12
		opMulti        = 14 // its release, and the keeper's confirmation if one falls due
	)
	want := map[int32]int64{opCreate: 1, opGetChildren2: 1, opGetData: 3, opExists: 1}
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
		// A read on the holder's session, so that it has heard of the
		// waiter's create (ZooKeeper sends a session's notifications
		// before its later replies): a holder that has not releases
		// with a plain delete (it thinks nobody queued behind it), and
		// the waiter takes the slow path.
		_, err = holder.Participants(ctx)
		must(t, err)
		release(t, held)
		l := await(t, ch)
		if l.Token() <= prev || l.Token() <= held.Token() {
			t.Fatalf("cycle %d: token %d, not above the one before, %d, and its predecessor's, %d", i, l.Token(), prev, held.Token())
		}
		prev = l.Token()
		if n := rc.watches(l.Node()); n != 1 {
			t.Fatalf("cycle %d: the waiter read its own node with a watch %d times; want once", i, n)
		}
		release(t, l)
		if n := rc.events.Load() - events; i > 0 && n != 3 {
			t.Fatalf("cycle %d: the waiter got %d watch notifications; want 3 (the grant, its predecessor's deletion, its own)", i, n)
		}
		got := rc.snapshot().minus(before)
		switch {
		case rc.zxidEvents.Load():
			want[opGetData] = 2 // the token came with the grant
		case i == 0:
			want[opGetData] = 4 // read when asked
		default:
			want[opGetData] = 3 // read before the grant, once the lock's tokens were asked for
		}
		bad := got[opMulti] < 1 || got[opDelete] != 0
		for op, n := range got {
			bad = bad || op != opMulti && op != opDelete && n != want[op]
		}
		for op, n := range want {
			bad = bad || got[op] != n
		}
		if bad {
			t.Fatalf("cycle %d: a waiter's acquire and release made %s; want create, getChildren2 once, getData %d times, exists once, its release a multi",
				i, got.per(1), want[opGetData])
		}
	}
}
