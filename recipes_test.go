// The recipe-level scenarios: what every recipe must survive (a cancelled
// or refused acquire, a session that expires, a connection that drops while
// a create is on its way) and leave behind (nothing). Each recipe's own
// behaviour is tested beside it: mutex_test.go, rwlock_test.go,
// semaphore_test.go, multilock_test.go, election_test.go, lease_test.go,
// revoke_test.go, driver_test.go.
package zklock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/faults"
)

func TestAcquireOnDoneContextReturnsAtOnce(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Acquire(ctx)
	mustIs(t, err, context.Canceled)
	ok, _, err := c.Conn().Exists(path)
	must(t, err)
	if ok {
		t.Fatal("a ZooKeeper call was made: the lock path exists")
	}
}

func TestCancelledAcquireLeavesNoNode(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	w := newMutex(t, connect(t), path)

	// Deadline. The lock stays held throughout, so the acquire can only
	// end with its deadline, whenever that comes.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = w.Acquire(ctx)
	mustIs(t, err, context.DeadlineExceeded)
	mustIs(t, err, ctx.Err())
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("the timed-out waiter's node is gone: children %v", kids)
	}

	// Cancel while queued.
	ctx, cancel = context.WithCancel(context.Background())
	ch := async(w.Acquire, ctx)
	queued(t, c, path, 2)
	cancel()
	mustIs(t, returned(t, ch).err, context.Canceled)
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("the cancelled waiter's node is gone: children %v", kids)
	}

	release(t, held)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// Parents are container nodes, recreated if they vanish.
func TestParentsAreContainersAndComeBack(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
	must(t, c.Conn().Delete(path, -1)) // as the server's container reaper would
	l, err = m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
}

// A holder that loses its connection hears it (Done, Err) before anyone
// else can acquire; after the session expires, another client acquires.
// The lost lease keeps saying why it ended first: its deadline passed, or,
// with WithLossOnDisconnect, the connection was lost (or the deadline
// passed first: which of the two the holder notices first is a race on a
// loaded machine, and either is a true "may have lost").
//
// The one real-time property of these tests, kept on purpose because it is
// the guarantee itself: the cut-off holder's deadline is at most 19/20 of
// the session timeout after a packet the server saw, and the server expires
// the session no sooner than a full timeout after it, so the holder must be
// done before the other client's Acquire returns.
func TestHolderSessionExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []zklock.Option
		want []error // the causes Err may give, any one of them
	}{
		{"deadline", nil, []error{zklock.ErrLeaseExpired}},
		{"loss on disconnect", []zklock.Option{zklock.WithLossOnDisconnect()}, []error{zklock.ErrConnectionSuspended, zklock.ErrLeaseExpired}},
	} {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			a, fa := faulty(t, time.Second, tc.opts...)
			m := newMutex(t, a, path)
			held, err := m.Acquire(ctxT(t))
			must(t, err)
			sid := a.SessionID()

			bm := newMutex(t, connect(t), path)
			b := async(bm.Acquire, ctxT(t))
			queued(t, a, path, 2)

			fa.Partition()
			bl := await(t, b)
			if !closed(held.Done()) {
				t.Fatal("another client acquired before the cut-off holder heard that it may have lost the lock")
			}
			cause := held.Err()
			i := slices.IndexFunc(tc.want, func(w error) bool { return errors.Is(cause, w) })
			if i < 0 {
				t.Fatalf("Err = %v, want one of %v", cause, tc.want)
			}
			want := tc.want[i]
			if bl.Token() <= held.Token() {
				t.Fatalf("tokens must increase: %d after %d", bl.Token(), held.Token())
			}
			if !held.ValidUntil().Before(time.Now()) {
				t.Fatalf("ValidUntil %v is not in the past", held.ValidUntil())
			}

			fa.Heal()
			eventually(t, func() bool { id := a.SessionID(); return id != sid && id != 0 },
				"the client learns that its session expired and gets a new one")
			// The client works again in its new session.
			ch := async(m.Acquire, ctxT(t))
			release(t, bl)
			release(t, await(t, ch))

			// By now the client has surely handled the expiry: the lease
			// still says what ended it.
			if held.Err() != cause {
				t.Fatalf("Err after the session expired = %v, want it unchanged: %v", held.Err(), cause)
			}
			if errors.Is(held.Err(), zklock.ErrSessionExpired) {
				t.Fatalf("Err changed after Done closed: %v", held.Err())
			}
			mustIs(t, held.Release(ctxT(t)), want, "releasing the lost lease")
		})
	}
}

// A waiter whose session expires queues again in its new session.
func TestWaiterRequeuesAfterExpiry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	a, fa := faulty(t, time.Second)
	am := newMutex(t, a, path)
	sid := a.SessionID()
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	queued(t, c, path, 1) // the server expired the waiter's session
	fa.Heal()
	eventually(t, func() bool { id := a.SessionID(); return id != sid && id != 0 }, "a new session")
	queued(t, c, path, 2) // queued again
	release(t, held)
	l := await(t, ch)
	_, stat, err := c.Conn().Get(l.Node())
	must(t, err)
	if stat.EphemeralOwner != a.SessionID() {
		t.Fatalf("node owned by session %#x, want the new session %#x", stat.EphemeralOwner, a.SessionID())
	}
	release(t, l)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// A waiter re-reads the children after a reconnect: a release it missed
// while disconnected still wakes it.
func TestWaiterRereadsAfterReconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	a, fa := faulty(t, 10*time.Second)
	am := newMutex(t, a, path)
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	eventually(t, func() bool { return a.Conn().State() != zk.StateHasSession }, "the waiter notices the partition")
	release(t, held)
	fa.Heal()
	release(t, await(t, ch))
}

// A connection drop between a create and its reply leaves no orphan: the
// node is found again by its protected id.
func TestDropDuringCreateLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a, fa := faulty(t, 10*time.Second)

	m := newMutex(t, a, path)
	warm, err := m.Acquire(ctxT(t)) // parents exist, so the next request is the create
	must(t, err)
	release(t, warm)

	fa.DropAfter(faults.OpCreate)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if kids := children(t, c, path); !slices.Equal(kids, []string{l.Node()[len(path)+1:]}) {
		t.Fatalf("want exactly our node %s, children %v", l.Node(), kids)
	}
	release(t, l)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}

	s := newSem(t, a, path+"sem", 3)
	warmN, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	for _, l := range warmN {
		release(t, l)
	}
	fa.DropAfter(faults.OpMulti)
	ls, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	if kids := children(t, c, path+"sem"); len(kids) != 2 {
		t.Fatalf("want exactly our 2 nodes, children %v", kids)
	}
	for _, l := range ls {
		release(t, l)
	}
	if kids := children(t, c, path+"sem"); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}

	// And a waiter cancelled after its create was cut off. The mutex stays
	// held, so the acquire can only end with its deadline.
	h := newMutex(t, c, path)
	hl, err := h.Acquire(ctxT(t))
	must(t, err)
	fa.DropAfter(faults.OpCreate)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = m.Acquire(ctx)
	mustIs(t, err, context.DeadlineExceeded)
	eventually(t, func() bool { return len(children(t, c, path)) == 1 }, "only the holder's node is left")
	release(t, hl)
}

// An acquire that gives up (its ctx ends) while the fate of its create is
// unknown, because the reply was cut off, must still delete the node the
// create may have made: only its protected id names it. Left behind, it
// would hold the mutex for everyone until the client closed.
func TestGiveUpAfterLostCreateReplyLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMutex(t, a, path)
	warm, err := m.Acquire(ctxT(t)) // parents exist, so the next request is the create
	must(t, err)
	release(t, warm)

	h := newMutex(t, c, path)
	held, err := h.Acquire(ctxT(t))
	must(t, err)
	fa.DropAfter(faults.OpCreate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := async(m.Acquire, ctx)
	// The create reached the server and its connection dropped before the
	// reply. Keep the client from reconnecting (go-zookeeper pauses a second
	// before it redials a lone server, so the partition comes first), and
	// give up while it cannot know what became of the create.
	eventually(t, func() bool { return a.Conn().State() != zk.StateHasSession }, "the client notices the drop")
	fa.Partition()
	cancel()
	mustIs(t, returned(t, ch).err, context.Canceled)
	release(t, held)
	fa.Heal()
	eventually(t, func() bool { return len(children(t, c, path)) == 0 },
		"the cut-off create's node is deleted once the client reconnects")
	l, err := h.Acquire(ctxT(t))
	must(t, err, "the mutex is free")
	release(t, l)
}
