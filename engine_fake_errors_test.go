package zklock_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeReadErrorsReachTheCaller: a call that cannot read what it
// reports (no auth, which retrying cannot help) fails with that error,
// rather than report a partial or empty answer, or success.
func TestFakeReadErrorsReachTheCaller(t *testing.T) {
	f := zkfake.New()
	c, other := fakeClient(t, f), fakeClient(t, f)
	m, err := zklock.NewMutex(other, "/re/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	mc, err := zklock.NewMutex(c, "/re/lock")
	must(t, err)
	// A semaphore lease node whose id carries no size: Participants needs
	// the size its path records.
	must(t, f.Create("/re/sem", []byte("1")))
	must(t, f.Create("/re/sem/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000000", nil))
	for _, tc := range []struct {
		name, op, path string
		call           func(context.Context) error
	}{
		{"Lock.Participants, a node's data", "Get", l.Node(), func(ctx context.Context) error {
			_, err := mc.Participants(ctx)
			return err
		}},
		{"Participants, the path's data, for a legacy semaphore node", "Get", "/re/sem", func(ctx context.Context) error {
			_, err := zklock.Participants(ctx, c, "/re/sem")
			return err
		}},
		{"Participants, a node's data", "Get", l.Node(), func(ctx context.Context) error {
			_, err := zklock.Participants(ctx, c, "/re/lock")
			return err
		}},
		{"Lock.Participants, the children", "Children", "/re/lock", func(ctx context.Context) error {
			_, err := mc.Participants(ctx)
			return err
		}},
		{"Participants, the children", "Children", "/re/lock", func(ctx context.Context) error {
			_, err := zklock.Participants(ctx, c, "/re/lock")
			return err
		}},
		{"Revoke", "Set", l.Node(), func(ctx context.Context) error { return zklock.Revoke(ctx, c, l.Node()) }},
		{"Election.Leader, the sync", "Sync", "/re/lock", func(ctx context.Context) error {
			e, err := zklock.NewElection(c, "/re/lock")
			must(t, err)
			_, err = e.Leader(ctx)
			return err
		}},
	} {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
				if op.Conn == conn && op.Name == tc.op && op.Paths[0] == tc.path {
					return zk.ErrNoAuth
				}
				return nil
			}})
			defer f.SetHooks(zkfake.Hooks{})
			mustIs(t, tc.call(ctxT(t)), zk.ErrNoAuth, tc.name)
		})
	}
	mustLive(t, l)
	release(t, l)
}

// TestFakeRevokeBadInput: Revoke refuses a malformed node path, a nil
// Client or a nil context with ErrInvalidArgument, before any ZooKeeper
// call.
func TestFakeRevokeBadInput(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	var calls atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Set" {
			calls.Add(1)
		}
		return nil
	}})
	for _, node := range []string{"", "not/a/path", "/a//b", "/a/", "/zookeeper/x"} {
		mustIs(t, zklock.Revoke(ctxT(t), c, node), zklock.ErrInvalidArgument, "revoke %q", node)
	}
	mustIs(t, zklock.Revoke(ctxT(t), nil, "/a"), zklock.ErrInvalidArgument, "nil client")
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	mustIs(t, zklock.Revoke(nil, c, "/a"), zklock.ErrInvalidArgument, "nil context")
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d writes for bad arguments", n)
	}
}

// TestFakeTransientReadErrorIsRetried: a waiter's read fails with an
// error that may pass (a connection loss), with no change of the session's
// state to wake it: it backs off and reads again, and holds, in its place
// (its node made once), rather than go on with the read it does not have
// or queue again at the back. Its predecessor goes with no grant (deleted
// by someone else), so that it reads the queue (a grant needs no read:
// handoff.go).
func TestFakeTransientReadErrorIsRetried(t *testing.T) {
	f := zkfake.New()
	ca := fakeClient(t, f)
	cb := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	ma, err := zklock.NewMutex(ca, "/tr/lock")
	must(t, err)
	mb, err := zklock.NewMutex(cb, "/tr/lock")
	must(t, err)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	w := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/tr/lock", 2)
	asleep(t, 1) // its first look made: the read counted below is on waking
	conn := connOf(t, f, cb)
	queuedAt := f.Children("/tr/lock")
	var failed, creates atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		switch {
		case op.Conn != conn:
		case op.Name == "CreateEach":
			creates.Add(1)
		case op.Name == "ChildrenStat" && failed.Add(1) == 1:
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	must(t, f.Delete(la.Node()))
	lb := await(t, w)
	if failed.Load() < 2 {
		t.Fatalf("%d reads after the wake; want the failed one and another", failed.Load())
	}
	if n := creates.Load(); n != 0 {
		t.Fatalf("the waiter queued again (%d creates) after a read that may pass", n)
	}
	found := false
	for _, k := range queuedAt {
		found = found || "/tr/lock/"+k == lb.Node()
	}
	if !found {
		t.Fatalf("lease on %s, not on the node it queued with (%v)", lb.Node(), queuedAt)
	}
	release(t, lb)
}

// TestFakeParticipantsOfAMissingLock: a lock path nobody has made yet has
// no participants, and that is no error.
func TestFakeParticipantsOfAMissingLock(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/none/lock")
	must(t, err)
	parts, err := m.Participants(ctxT(t))
	if err != nil || len(parts) != 0 {
		t.Fatalf("participants of a lock path never made: %v, %v", parts, err)
	}
	if f.Exists("/none") {
		t.Fatal("listing the participants made the path")
	}
}

// TestFakeConstructorBounds: a MultiLock needs at least one path, none
// twice and none inside another; a semaphore's size is from 1 to the
// largest int32, both ends included.
func TestFakeConstructorBounds(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	for _, paths := range [][]string{nil, {}, {"/cb/a", "/cb/a"}, {"/cb/a", "/cb/a/b"}, {"/cb/a/b", "/cb/a"}} {
		_, err := zklock.NewMultiLock(c, paths)
		mustIs(t, err, zklock.ErrInvalidArgument, "a MultiLock on %q", paths)
	}
	_, err := zklock.NewMultiLock(c, []string{"/cb/a", "/cb/ab"})
	must(t, err, "a MultiLock on two sibling paths")
	for _, n := range []int{1, math.MaxInt32} {
		_, err := zklock.NewSemaphore(c, "/cb/s", n)
		must(t, err, "a semaphore of %d", n)
	}
	for _, n := range []int{0, -1, math.MaxInt32 + 1} {
		_, err := zklock.NewSemaphore(c, "/cb/s", n)
		mustIs(t, err, zklock.ErrInvalidArgument, "a semaphore of %d", n)
	}
}

// TestFakeRWMutexOptionsAndDowngradeInput: WithSharedReads makes a
// Client's reads share one node; without it each read has its own. A
// Downgrade of a lease that is not a write lease of this RWMutex is
// refused with ErrInvalidArgument, and leaves that lease alone.
func TestFakeRWMutexOptionsAndDowngradeInput(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	for path, shared := range map[string]bool{"/ro/plain": false, "/ro/shared": true} {
		var opts []zklock.LockOption
		if shared {
			opts = append(opts, zklock.WithSharedReads())
		}
		rw, err := zklock.NewRWMutex(c, path, opts...)
		must(t, err)
		r1, err := rw.ReadLock().Acquire(ctxT(t))
		must(t, err)
		r2, err := rw.ReadLock().Acquire(ctxT(t))
		must(t, err)
		want := 2
		if shared {
			want = 1
		}
		if kids := f.Children(path); len(kids) != want {
			t.Fatalf("%s: two reads of one Client on %d nodes %v, want %d", path, len(kids), kids, want)
		}
		release(t, r1)
		release(t, r2)
	}
	rw, err := zklock.NewRWMutex(c, "/ro/rw")
	must(t, err)
	m, err := zklock.NewMutex(c, "/ro/m")
	must(t, err)
	other, err := m.Acquire(ctxT(t))
	must(t, err)
	elsewhere, err := zklock.NewRWMutex(c, "/ro/elsewhere")
	must(t, err)
	w, err := elsewhere.WriteLock().Acquire(ctxT(t))
	must(t, err)
	theirs, err := zklock.NewRWMutex(fakeClient(t, f), "/ro/rw") // the same lock, another Client's
	must(t, err)
	wt, err := theirs.WriteLock().Acquire(ctxT(t))
	must(t, err)
	for name, l := range map[string]*zklock.Lease{
		"a mutex's lease": other, "another RWMutex's write lease": w, "another Client's write lease": wt,
	} {
		_, err := rw.Downgrade(ctxT(t), l)
		mustIs(t, err, zklock.ErrInvalidArgument, "Downgrade of %s", name)
		mustLive(t, l)
	}
	if kids := f.Children("/ro/rw"); len(kids) != 1 {
		t.Fatalf("children of /ro/rw after the refusals: %v", kids)
	}
	release(t, other)
	release(t, w)
	release(t, wt)
}
