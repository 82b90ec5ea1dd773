package zklock_test

import (
	"context"
	"errors"
	"fmt"
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
// ZooKeeper 3.9. Before 3.9 the first lease reads it when asked for (the
// lock path's stat, then its own node); from then on the waiter's Client
// knows that grants come without their zxid, and this lock's tokens are
// asked for, so it takes the read path (participant.handsOff): create,
// getChildren, its predecessor's watch, one getChildren when woken, which
// gives its token, and a plain delete. Its release is otherwise one multi
// (its own grant fired with its delete). Three notifications: the grant,
// its predecessor's deletion, and its own node's deletion at its release;
// on the read path, its predecessor's deletion alone.
func TestHandoffRequests(t *testing.T) {
	t.Parallel()
	path, holder, waiter, rc, watcher := countedWaiter(t)
	ctx := ctxT(t)

	const (
		opCreate       = 1
		opDelete       = 2
		opGetChildren2 = 12
		opMulti        = 14 // its release, and the keeper's confirmation if one falls due
	)
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
		readPath := i > 0 && !rc.zxidEvents.Load()
		if n := rc.watches(l.Node()); n != 1 && !readPath {
			t.Fatalf("cycle %d: the waiter read its own node with a watch %d times; want once", i, n)
		}
		release(t, l)
		wantEvents := int64(3)
		if readPath {
			wantEvents = 1
		}
		if n := rc.events.Load() - events; i > 0 && n != wantEvents {
			t.Fatalf("cycle %d: the waiter got %d watch notifications; want %d", i, n, wantEvents)
		}
		got := rc.snapshot().minus(before)
		want := map[int32]int64{opCreate: 1, opGetChildren2: 1, opGetData: 3, opExists: 1}
		switch {
		case rc.zxidEvents.Load():
			want[opGetData] = 2 // the token came with the grant
		case i == 0:
			want[opGetData] = 4 // read when asked
		default:
			want = map[int32]int64{opCreate: 1, opGetChildren2: 2, opGetData: 1} // the read path
		}
		var releaseOp int32 = opMulti // its own grant fired with its delete
		bad := got[opMulti] < 1 || got[opDelete] != 0
		if readPath {
			releaseOp = opDelete
			bad = got[opDelete] != 1 // and a multi only if the keeper's confirmation fell due
		}
		for op, n := range got {
			bad = bad || op != opMulti && op != releaseOp && n != want[op]
		}
		for op, n := range want {
			bad = bad || got[op] != n
		}
		if bad {
			t.Fatalf("cycle %d: a waiter's acquire and release made %s; want %s, its release a %s",
				i, got.per(1), fmt.Sprint(want), opName(releaseOp))
		}
	}
}

// A waiter that gives up costs its grant watch's fire and the delete of
// its node (one multi each, or a plain delete), and no read: the cleanup by
// protected id, with its sync and listing of the path, is only for an
// acquire whose create's fate was unknown (participant.abandon).
func TestGiveUpRequests(t *testing.T) {
	t.Parallel()
	path, holder, waiter, rc, watcher := countedWaiter(t)
	held, err := holder.Acquire(ctxT(t))
	must(t, err)
	defer release(t, held)
	ctx, cancel := context.WithCancel(ctxT(t))
	ch := async(waiter.Acquire, ctx)
	eventually(t, func() bool {
		return len(children(t, watcher, path)) == 2 && rc.watches(held.Node()) > 0 && rc.outstanding() == 0
	}, "the waiter queued behind %s", held.Node())
	before := rc.snapshot()
	cancel()
	if r := <-ch; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled acquire returned %v", r.err)
	}
	eventually(t, func() bool { return len(children(t, watcher, path)) == 1 && rc.outstanding() == 0 },
		"the waiter's node is deleted")
	got := rc.snapshot().minus(before)
	const (
		opDelete       = 2
		opSync         = 9
		opGetChildren2 = 12
		opMulti        = 14
	)
	if got[opSync] != 0 || got[opGetChildren2] != 0 || got[opMulti]+got[opDelete] < 1 {
		t.Fatalf("a give-up made %s; want its fire and delete, and no sync or listing", got.per(1))
	}
}

// countedWaiter makes, on a path of the test's, a holder's Mutex, a
// waiter's whose requests rc counts, and a Client to watch the queue with.
func countedWaiter(t *testing.T) (path string, holder, waiter *zklock.Mutex, rc *reqCounter, watcher *zklock.Client) {
	path, rc = lockPath(t), new(reqCounter)
	holder = newMutex(t, connect(t), path)
	waiter = newMutex(t, connect(t, zklock.WithDialer(rc.dial), zklock.WithSessionTimeout(time.Minute)), path)
	return path, holder, waiter, rc, connect(t)
}

// TestHandoffDeepQueueTokens: a queue deeper than deepQueue, every lease
// asked for its token, drained over several Clients: on ZooKeeper 3.8 its
// handed-over leases read their tokens at the grant (handoff.go,
// participant.handsOff), on 3.9 take them from the grant. Either way each
// token is above the one before, every lease's, whether asked while held
// or after its release.
func TestHandoffDeepQueueTokens(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	ctx := ctxT(t)
	const clients, waiters = 4, zklock.DeepQueue + 8
	ms := make([]*zklock.Mutex, clients)
	for i := range ms {
		m, err := zklock.NewMutex(connect(t), path)
		must(t, err)
		ms[i] = m
		l, err := m.Acquire(ctx) // each lock is asked for its tokens once
		must(t, err)
		l.Token()
		release(t, l)
	}
	holder, err := ms[0].Acquire(ctx)
	must(t, err)
	watcher := connect(t)
	var rs []<-chan result
	for i := 0; i < waiters; i++ {
		rs = append(rs, async(ms[i%clients].Acquire, ctx))
		queued(t, watcher, path, i+2)
	}
	prev := holder.Token()
	release(t, holder)
	for i, r := range rs {
		l := await(t, r)
		var tok int64
		if i%2 == 0 {
			tok = l.Token() // while held
			release(t, l)
		} else {
			release(t, l)
			tok = l.Token() // after its release
		}
		if tok <= prev {
			t.Fatalf("lease %d of the drain: token %d, not above the one before, %d", i, tok, prev)
		}
		prev = tok
	}
	queued(t, watcher, path, 0)
}
