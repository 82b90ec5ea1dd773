package zklock_test

// The Curator and kazoo semaphore layouts on the fake: what they refuse,
// how they start again, and how a Curator SharedCount is followed.

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
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
	// A kazoo lease (a plain node named by 32 hex digits) is refused too,
	// with no lock path beside it.
	must(t, f.Create("/kl2", nil))
	must(t, f.Create("/kl2/0123456789abcdef0123456789abcdef", nil))
	s2, err := zklock.NewSemaphore(c, "/kl2", 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	must(t, err)
	_, err = s2.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrUnknownNode, "a Curator-layout acquire beside a kazoo lease")
}

// TestFakeKazooLayoutNames: the kazoo layout's nodes are named as kazoo
// names them, so that kazoo's own Lock and Semaphore count them: its lock's
// nodes `<32 hex>__lock__<seq>` at <path>-__lock__, its leases `<32 hex>`
// at <path>.
func TestFakeKazooLayoutNames(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/kn", 2, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	conn := connOf(t, f, c)
	var mu sync.Mutex
	var lockNodes []string
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "ChildrenStatW" && op.Paths[0] == "/kn-__lock__" {
			mu.Lock()
			lockNodes = append(lockNodes, f.Children("/kn-__lock__")...)
			mu.Unlock()
		}
		return err
	}})
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	f.SetHooks(zkfake.Hooks{})
	mu.Lock()
	defer mu.Unlock()
	lockName := regexp.MustCompile(`^[0-9a-f]{32}__lock__[0-9]{10}$`)
	if len(lockNodes) == 0 {
		t.Fatal("the inner lock was never read")
	}
	for _, n := range lockNodes {
		if !lockName.MatchString(n) {
			t.Errorf("the inner lock's node %q is not named as kazoo's Lock names it", n)
		}
	}
	if !regexp.MustCompile(`^/kn/[0-9a-f]{32}$`).MatchString(l.Node()) {
		t.Errorf("the lease %q is not named as kazoo's Semaphore names it", l.Node())
	}
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

// TestFakeLayoutsIgnorePlainChildren: a child of no semaphore layout is not
// another layout's: a Curator-layout semaphore ignores it (it counts its
// own leases), a kazoo-layout one counts it as kazoo does (every child of
// the path is a lease).
func TestFakeLayoutsIgnorePlainChildren(t *testing.T) {
	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		layout := layout
		t.Run(layout.String(), func(t *testing.T) {
			f := zkfake.New()
			c := fakeClient(t, f)
			must(t, f.Create("/pc", []byte("2")))
			must(t, f.Create("/pc/config", nil))
			s, err := zklock.NewSemaphore(c, "/pc", 2, zklock.WithSemaphoreLayout(layout))
			must(t, err)
			l, err := s.Acquire(ctxT(t))
			must(t, err, "acquire beside a plain child")
			_, err = s.TryAcquire(ctxT(t))
			if layout == zklock.LayoutKazoo {
				mustIs(t, err, zklock.ErrLocked, "kazoo's layout counts the plain child")
			} else if err != nil {
				t.Fatalf("a second lease of two: %v", err)
			}
			release(t, l)
		})
	}
}

// guardedWaiter has a Client hold the only lease of the semaphore path
// (size 1, in layout) and another wait for one, holding the layout's
// inner lock meanwhile; it returns the holder's lease, the waiter's
// acquire, and the inner lock's path.
func guardedWaiter(t *testing.T, f *zkfake.Server, path string, layout zklock.SemaphoreLayout) (*zklock.Lease, <-chan result, string) {
	t.Helper()
	// The waiter's session timeout is short, so that the keeper watches its
	// inner lock's node soon (a twentieth of the timeout after the grant).
	ca, cb := fakeClient(t, f), fakeClient(t, f, zklock.WithSessionTimeout(2*time.Second))
	sa, err := zklock.NewSemaphore(ca, path, 1, zklock.WithSemaphoreLayout(layout))
	must(t, err)
	sb, err := zklock.NewSemaphore(cb, path, 1, zklock.WithSemaphoreLayout(layout))
	must(t, err)
	la, err := sa.Acquire(ctxT(t))
	must(t, err)
	inner, leases, waiting := path+"/locks", path+"/leases", 2
	if layout == zklock.LayoutKazoo {
		inner, leases, waiting = path+"-__lock__", path, 1 // a kazoo waiter watches the leases, with no node of its own
	}
	w := async(sb.Acquire, ctxT(t))
	fakeQueued(t, f, inner, 1)
	fakeQueued(t, f, leases, waiting)
	return la, w, inner
}

// TestFakeSemaphoreTryWhileTheInnerLockIsHeld: a TryAcquire of a Curator
// or kazoo layout finds the inner lock held by a waiting acquire: it fails
// with ErrLocked at once, rather than wait for the lock.
func TestFakeSemaphoreTryWhileTheInnerLockIsHeld(t *testing.T) {
	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		layout := layout
		t.Run(layout.String(), func(t *testing.T) {
			f := zkfake.New()
			la, w, inner := guardedWaiter(t, f, "/ti", layout)
			s, err := zklock.NewSemaphore(fakeClient(t, f), "/ti", 1, zklock.WithSemaphoreLayout(layout))
			must(t, err)
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			_, err = s.TryAcquire(ctx)
			mustIs(t, err, zklock.ErrLocked, "TryAcquire while another acquire holds the inner lock")
			// An Acquire waits for the inner lock instead.
			w2 := async(s.Acquire, ctxT(t))
			fakeQueued(t, f, inner, 2)
			release(t, la)
			release(t, await(t, w))
			release(t, await(t, w2))
		})
	}
}

// TestFakeSemaphoreInnerLockLostWhileWaiting: the inner lock of a waiting
// Curator or kazoo acquire is deleted from outside: the acquire starts
// again from the inner lock (as Curator's and kazoo's do after a session
// loss), rather than wait on without it, and gets its lease once one is
// free.
func TestFakeSemaphoreInnerLockLostWhileWaiting(t *testing.T) {
	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		layout := layout
		t.Run(layout.String(), func(t *testing.T) {
			f := zkfake.New()
			la, w, inner := guardedWaiter(t, f, "/il", layout)
			old := f.Children(inner)[0]
			must(t, f.Delete(inner+"/"+old))
			eventually(t, func() bool {
				kids := f.Children(inner)
				return len(kids) == 1 && kids[0] != old
			}, "the waiter took the inner lock again: %v", f.Children(inner))
			pending(t, w)
			release(t, la)
			lb := await(t, w)
			release(t, lb)
			fakeQueued(t, f, inner, 0)
		})
	}
}

// TestFakeKazooParticipantsReadError: Participants of a kazoo layout fails
// with the error that stops it reading the leases.
func TestFakeKazooParticipantsReadError(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/kr", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Children" && op.Paths[0] == "/kr" {
			return zk.ErrNoAuth
		}
		return nil
	}})
	_, err = s.Participants(ctxT(t))
	mustIs(t, err, zk.ErrNoAuth, "participants of a kazoo layout that cannot be listed")
	f.SetHooks(zkfake.Hooks{})
	release(t, l)
}

// TestFakeLockPathsPersistOnlyWhereTheLayoutSays: a kazoo-layout
// semaphore's path and its lock path are persistent, as kazoo makes them
// (they stay, with the recorded size, once empty); every other path
// zklock makes, and every parent, is a container, which the server reaps
// once empty.
func TestFakeLockPathsPersistOnlyWhereTheLayoutSays(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	k, err := zklock.NewSemaphore(c, "/pp/kazoo/sem", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	m, err := zklock.NewMutex(c, "/pp/mutex/lock")
	must(t, err)
	lk, err := k.Acquire(ctxT(t))
	must(t, err)
	lm, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, lk)
	release(t, lm)
	f.ReapContainers()
	f.ReapContainers() // the parents, emptied by the first round
	for path, want := range map[string]bool{
		"/pp/kazoo/sem": true, "/pp/kazoo/sem-__lock__": true, "/pp/kazoo": true,
		"/pp/mutex/lock": false, "/pp/mutex": false,
	} {
		if f.Exists(path) != want {
			t.Errorf("%s exists: %v, want %v", path, f.Exists(path), want)
		}
	}
}

// TestFakeSemaphoreLegacyRecordRead: a zklock semaphore with a node ahead
// whose id carries no size (a build from before sizes were carried) bounds
// that node by the size recorded in the path's data, in any form Python's
// int() reads (kazoo writes str(n); "+1" and " 1\n" are 1 too). A failed
// read of the record is retried, never taken for "no record", which would
// leave the legacy node no bound and let a second holder in beside a
// semaphore of 1. The record is read, never written.
func TestFakeSemaphoreLegacyRecordRead(t *testing.T) {
	for _, tc := range []struct {
		record string
		holds  bool
	}{{"+1", false}, {" 1\n", false}, {"1", false}, {"2", true}} {
		tc := tc
		t.Run(tc.record, func(t *testing.T) {
			f := zkfake.New()
			c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
			must(t, f.Create("/sr", []byte(tc.record)))
			must(t, f.Create("/sr/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000000", nil)) // a v4 id: no size
			conn := connOf(t, f, c)
			var reads atomic.Int32
			f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
				if op.Conn == conn && op.Name == "Get" && op.Paths[0] == "/sr" && reads.Add(1) == 1 {
					return zk.ErrConnectionClosed
				}
				return nil
			}})
			s, err := zklock.NewSemaphore(c, "/sr", 12)
			must(t, err)
			if tc.holds {
				l, err := s.Acquire(ctxT(t))
				must(t, err, "a semaphore of 12 behind a legacy node, on a path that records %q", tc.record)
				release(t, l)
			} else {
				ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
				defer cancel()
				_, err := s.Acquire(ctx)
				mustIs(t, err, context.DeadlineExceeded, "a second lease beside a legacy node, on a path that records %q", tc.record)
			}
			if n := reads.Load(); n < 2 {
				t.Fatalf("%d reads of the size record; want the failed one and another", n)
			}
			data, _, err := conn.Get("/sr")
			must(t, err)
			if string(data) != tc.record {
				t.Fatalf("the path records %q now, not %q", data, tc.record)
			}
		})
	}
}

// TestFakeSharedCountAcquireN: a Curator layout whose size is a
// SharedCount takes any n of at least 1, more than the count too (it waits
// for the count to grow), and refuses 0 and negatives with
// ErrInvalidArgument.
func TestFakeSharedCountAcquireN(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/sn", 1, countOpts...)
	must(t, err)
	for _, n := range []int{0, -1} {
		_, err := s.AcquireN(ctxT(t), n)
		mustIs(t, err, zklock.ErrInvalidArgument, "AcquireN(%d) with a SharedCount", n)
	}
	ls, err := s.AcquireN(ctxT(t), 1)
	must(t, err)
	release(t, ls[0])
	type got struct {
		leases []*zklock.Lease
		err    error
	}
	two := make(chan got, 1)
	go func() {
		ls, err := s.AcquireN(ctxT(t), 2)
		two <- got{ls, err}
	}()
	eventually(t, func() bool { return len(f.Children("/sn/leases")) == 2 }, "AcquireN(2) over a count of 1 queued")
	must(t, connOf(t, f, c).Set("/count", []byte{0, 0, 0, 2}), "grow the count")
	select {
	case r := <-two:
		must(t, r.err, "AcquireN(2) once the count is 2")
		for _, l := range r.leases {
			release(t, l)
		}
	case <-time.After(long):
		t.Fatal("AcquireN(2) did not return once the count grew to 2")
	}
}

// TestFakeLayoutCheckRetried: the check of a Curator-layout path for
// another layout's nodes reads its children; a read that fails with an
// error that may pass is read again, and the check still refuses what it
// finds, rather than pass on the children it did not get.
func TestFakeLayoutCheckRetried(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	must(t, f.Create("/lc", nil))
	must(t, f.Create("/lc/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000003", nil)) // zklock's layout
	conn := connOf(t, f, c)
	var failed atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Children" && op.Paths[0] == "/lc" && failed.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	s, err := zklock.NewSemaphore(c, "/lc", 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	must(t, err)
	_, err = s.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrUnknownNode, "a Curator-layout acquire over zklock's layout, after a failed read")
	if failed.Load() < 2 {
		t.Fatalf("%d reads of the children; want the failed one and another", failed.Load())
	}
}

// TestFakeSharedCountCreateFails: an acquire that must make the
// SharedCount, and cannot (no auth), fails with that error rather than
// try forever.
func TestFakeSharedCountCreateFails(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	conn := connOf(t, f, c)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "CreatePersistent" && op.Paths[0] == "/cf/count" {
			return zk.ErrNoAuth
		}
		return nil
	}})
	s, err := zklock.NewSemaphore(c, "/cf/sem", 1, zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("/cf/count"))
	must(t, err)
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	_, err = s.Acquire(ctx)
	mustIs(t, err, zk.ErrNoAuth, "an acquire whose SharedCount cannot be made")
}

// TestFakeSizeInNamesOnly: a semaphore carries its size in its nodes'
// names and writes it nowhere else: not in its path's data, nor in the
// parents' it makes (a write there would be the old single-size record,
// which would refuse a rolling resize). Participants reads the size back
// from the name.
func TestFakeSizeInNamesOnly(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	s, err := zklock.NewSemaphore(c, "/sz/a/sem", 3)
	must(t, err)
	conn := connOf(t, f, c)
	var writes atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && (op.Name == "Set" || op.Name == "SetIf") {
			writes.Add(1)
		}
		return nil
	}})
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	for _, path := range []string{"/sz", "/sz/a", "/sz/a/sem"} {
		data, _, err := conn.Get(path)
		must(t, err)
		if len(data) != 0 {
			t.Errorf("%s records %q, want nothing", path, data)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("%d writes of data for an acquire", n)
	}
	ps, err := zklock.Participants(ctxT(t), c, "/sz/a/sem")
	must(t, err)
	if len(ps) != 1 || ps[0].Size != 3 {
		t.Fatalf("participants %+v, want one of size 3", ps)
	}
	release(t, l)
}

// TestFakeLayoutsRefuseUnusableCalls: a Curator- or kazoo-layout
// semaphore refuses a nil context (ErrInvalidArgument), a context already
// done (its error) and a closed Client (ErrClientClosed) before any
// ZooKeeper call, as zklock's layout does.
func TestFakeLayoutsRefuseUnusableCalls(t *testing.T) {
	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		f := zkfake.New()
		c := fakeClient(t, f)
		conn := connOf(t, f, c)
		var calls atomic.Int32
		f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
			if op.Conn == conn {
				calls.Add(1)
			}
			return nil
		}})
		s, err := zklock.NewSemaphore(c, "/lu/sem", 2, zklock.WithSemaphoreLayout(layout))
		must(t, err)
		//lint:ignore SA1012 a nil context is exactly the bad input under test
		_, err = s.Acquire(nil)
		mustIs(t, err, zklock.ErrInvalidArgument, "%v layout, nil context", layout)
		done, cancel := context.WithCancel(ctxT(t))
		cancel()
		_, err = s.TryAcquire(done)
		mustIs(t, err, context.Canceled, "%v layout, a context done", layout)
		must(t, c.Close())
		_, err = s.Acquire(ctxT(t))
		mustIs(t, err, zklock.ErrClientClosed, "%v layout, a closed Client", layout)
		if n := calls.Load(); n != 0 {
			t.Fatalf("%v layout: %d ZooKeeper calls for calls refused", layout, n)
		}
	}
}
