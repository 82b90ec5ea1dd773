package zklock_test

// The Curator and kazoo semaphore layouts on the fake: what they refuse,
// how they start again, and how a Curator SharedCount is followed.

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeCuratorLayoutRefusesAKazooSemaphore: a kazoo semaphore on a path
// shows the path and, beside it, its lock path <path>-__lock__ (with no
// holder, nothing else). A Curator-layout Semaphore on that path refuses
// it, with ErrUnknownNode, and creates nothing: each would count the
// other's leases wrong.
func TestFakeCuratorLayoutRefusesAKazooSemaphore(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	must(t, f.Create("/ck", []byte("2")))
	must(t, f.Create("/ck-__lock__", nil))
	s, err := zklock.NewSemaphore(c, "/ck", 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	must(t, err)
	_, err = s.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrUnknownNode, "a Curator-layout acquire beside a kazoo semaphore's lock")
	if kids := f.Children("/ck"); len(kids) != 0 {
		t.Fatalf("children of /ck after the refusal: %v", kids)
	}
	// The kazoo layout itself takes it.
	k, err := zklock.NewSemaphore(c, "/ck", 2, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	l, err := k.Acquire(ctxT(t))
	must(t, err, "a kazoo-layout acquire")
	release(t, l)
}

// TestFakeKazooLayoutStartsAgainWhenItsLockGoes: the kazoo layout creates
// its lease node only while its inner lock's node exists (placeClaim's
// guard); if that node is deleted just before the create, the acquire
// starts again from the lock and gets its lease, rather than fail.
func TestFakeKazooLayoutStartsAgainWhenItsLockGoes(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/kl", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	conn := connOf(t, f, c)
	var cut atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "CreateEphemeralIf" && cut.Add(1) == 1 {
			must(t, f.Delete(op.Paths[0]), "delete the inner lock's node") // the guard
		}
		return nil
	}})
	l, err := s.Acquire(ctxT(t))
	must(t, err, "acquire after the inner lock's node went")
	if n := cut.Load(); n != 2 {
		t.Fatalf("%d lease creates, want 2: one refused for its lock's node, one after the lock again", n)
	}
	mustLive(t, l)
	if kids := f.Children("/kl"); len(kids) != 1 || "/kl/"+kids[0] != l.Node() {
		t.Fatalf("children of /kl %v, lease %s", kids, l.Node())
	}
	release(t, l)
	fakeQueued(t, f, "/kl", 0)
	fakeQueued(t, f, "/kl-__lock__", 0)
}

// TestFakeKazooLayoutRefusesAnotherLayoutWhileWaiting: a kazoo-layout
// acquire waiting for a lease reads the path again on every change, and
// refuses a child another layout wrote meanwhile (Curator's "leases"),
// as it refuses one it finds at its first read.
func TestFakeKazooLayoutRefusesAnotherLayoutWhileWaiting(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	sa, err := zklock.NewSemaphore(ca, "/kw", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	sb, err := zklock.NewSemaphore(cb, "/kw", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	la, err := sa.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, cb)
	waiting := make(chan struct{})
	var once sync.Once
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "ChildrenW" && op.Paths[0] == "/kw" {
			once.Do(func() { close(waiting) })
		}
		return err
	}})
	w := async(sb.Acquire, ctxT(t))
	select {
	case <-waiting:
	case <-time.After(long):
		t.Fatal("the second acquire never read the leases")
	}
	must(t, f.Create("/kw/leases", nil))
	mustIs(t, returned(t, w).err, zklock.ErrUnknownNode, "a kazoo-layout waiter after Curator's leases appeared")
	release(t, la)
}

// countOpts is a Curator-layout semaphore whose size is the SharedCount at
// /count.
var countOpts = []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("/count")}

// countWaiter has one Client hold the semaphore /sc (count 1) and another
// wait for it; it returns, once the waiter has set its watch on the count,
// the waiter's connection and its acquire, and the holder's lease and
// Client.
func countWaiter(t *testing.T, f *zkfake.Server) (*zkfake.Conn, <-chan result, *zklock.Lease, *zklock.Client) {
	t.Helper()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	sa, err := zklock.NewSemaphore(ca, "/sc", 1, countOpts...)
	must(t, err)
	sb, err := zklock.NewSemaphore(cb, "/sc", 1, countOpts...)
	must(t, err)
	la, err := sa.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, cb)
	watching := make(chan struct{})
	var once sync.Once
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "GetDataW" && op.Paths[0] == "/count" && err == nil {
			once.Do(func() { close(watching) })
		}
		return err
	}})
	w := async(sb.Acquire, ctxT(t))
	select {
	case <-watching:
	case <-time.After(long):
		t.Fatal("the waiter never watched the count")
	}
	f.SetHooks(zkfake.Hooks{})
	return conn, w, la, ca
}

// TestFakeSharedCountMadeAgainWhileRead: the SharedCount is deleted, and
// made again with a larger count between the waiter's read that finds it
// gone and its exists check: the waiter decides again with the new count,
// and holds beside the first lease, rather than sleep on a watch of a node
// that has already changed.
func TestFakeSharedCountMadeAgainWhileRead(t *testing.T) {
	f := zkfake.New()
	conn, w, la, _ := countWaiter(t, f)
	var remade atomic.Int32
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "GetDataW" && op.Paths[0] == "/count" && errors.Is(err, zk.ErrNoNode) && remade.Add(1) == 1 {
			must(t, f.Create("/count", []byte{0, 0, 0, 2}), "make the count again, larger")
		}
		return err
	}})
	must(t, f.Delete("/count"))
	lb := await(t, w)
	if remade.Load() != 1 {
		t.Fatal("the waiter never found the count gone")
	}
	mustLive(t, la)
	release(t, la)
	release(t, lb)
}

// TestFakeSharedCountReadErrors: an error reading the SharedCount while
// waiting that may pass (a connection loss) is retried, and the waiter
// holds once the count grows; one that cannot (no auth) fails the acquire
// with it.
func TestFakeSharedCountReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		once bool
	}{
		{"transient", zk.ErrConnectionClosed, true},
		{"permanent", zk.ErrNoAuth, false},
	} {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			conn, w, la, ca := countWaiter(t, f)
			var failed atomic.Int32
			f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
				if op.Conn == conn && op.Name == "GetDataW" && op.Paths[0] == "/count" && (failed.Add(1) == 1 || !tc.once) {
					return tc.err
				}
				return nil
			}})
			// The count grows: the waiter wakes, and reads it again.
			must(t, connOf(t, f, ca).Set("/count", []byte{0, 0, 0, 2}), "grow the count")
			r := returned(t, w)
			if failed.Load() == 0 {
				t.Fatal("the waiter never read the count again")
			}
			if tc.once {
				must(t, r.err, "an acquire whose count read failed once with %v", tc.err)
				mustLive(t, la)
				release(t, r.lease)
			} else {
				mustIs(t, r.err, tc.err, "an acquire whose count read fails with %v", tc.err)
			}
			release(t, la)
		})
	}
}

// TestFakeSharedCountGoneWaiterSleeps: while the SharedCount is deleted, a
// waiter sleeps on a watch for its creation: it reads the count once,
// finds it gone, sets the watch, and reads nothing more until the count is
// made again (a waiter that read again at once would spin for as long as
// the count is gone). Made again, larger, it lets the waiter through.
func TestFakeSharedCountGoneWaiterSleeps(t *testing.T) {
	f := zkfake.New()
	conn, w, la, _ := countWaiter(t, f)
	var reads atomic.Int32
	asleep := make(chan struct{})
	var once sync.Once
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Paths[0] == "/count" {
			reads.Add(1)
			if op.Name == "ExistsW" {
				once.Do(func() { close(asleep) })
			}
		}
		return err
	}})
	must(t, f.Delete("/count"))
	select {
	case <-asleep:
	case <-time.After(long):
		t.Fatal("the waiter never watched for the count's return")
	}
	// Give a spinning waiter the time of a few acquires of another Client
	// to show itself.
	m, err := zklock.NewMutex(fakeClient(t, f), "/other")
	must(t, err)
	for i := 0; i < 20; i++ {
		l, err := m.Acquire(ctxT(t))
		must(t, err)
		release(t, l)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("the waiter made %d reads of the gone count; want 2 (the read that found it gone, the watch for its return)", n)
	}
	pending(t, w)
	must(t, f.Create("/count", []byte{0, 0, 0, 2}))
	lb := await(t, w)
	mustLive(t, la)
	release(t, la)
	release(t, lb)
}

// TestFakeKazooLayoutFailsOnAPermanentReadError: a kazoo-layout acquire
// whose read of the leases fails for good (no auth) fails with that error
// and creates no lease: it cannot know how many leases there are.
func TestFakeKazooLayoutFailsOnAPermanentReadError(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/kp", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	conn := connOf(t, f, c)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "ChildrenW" && op.Paths[0] == "/kp" {
			return zk.ErrNoAuth
		}
		return nil
	}})
	_, err = s.Acquire(ctxT(t))
	mustIs(t, err, zk.ErrNoAuth, "a kazoo-layout acquire that cannot read the leases")
	if kids := f.Children("/kp"); len(kids) != 0 {
		t.Fatalf("leases after the failed read: %v", kids)
	}
	fakeQueued(t, f, "/kp-__lock__", 0)
}
