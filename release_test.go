package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// noDelete takes DELETE away on path, for everyone: ZooKeeper checks a
// delete against the parent's ACL (PrepRequestProcessor, OpCode.delete),
// so no node under path can be deleted any more. The test's cleanup puts
// it back, so the path's nodes can go.
func noDelete(t *testing.T, admin *zklock.Client, path string) {
	t.Helper()
	_, err := admin.Conn().SetACL(path, zk.WorldACL(zk.PermAll&^zk.PermDelete), -1)
	must(t, err, "take DELETE away on %s", path)
	t.Cleanup(func() { _, _ = admin.Conn().SetACL(path, zk.WorldACL(zk.PermAll), -1) })
}

// freeWithin checks that another Client takes path's mutex within seconds:
// nothing of ours is left in its queue.
func freeWithin(t *testing.T, other *zklock.Client, path string) {
	t.Helper()
	m, err := zklock.NewMutex(other, path)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx)
	must(t, err, "acquire %s after the release", path)
	release(t, l)
}

// A MultiLock whose delete fails for good on one path still frees every
// other path, whatever the order of its paths, and its Release names the
// node that stays (Curator's testSomeReleasesFail).
func TestReleaseFreesEveryPathItCan(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"failing first", "failing last"} {
		order := order
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			c, other, admin := connect(t), connect(t), connect(t)
			base := lockPath(t)
			stuck, free := base+"/stuck", base+"/free"
			paths := []string{stuck, free}
			if order == "failing last" {
				paths = []string{free, stuck}
			}
			m, err := zklock.NewMultiLock(c, paths)
			must(t, err)
			l, err := m.Acquire(ctxT(t))
			must(t, err, "acquire")
			noDelete(t, admin, stuck)

			err = l.Release(ctxT(t))
			mustIs(t, err, zk.ErrNoAuth, "release")
			if !strings.Contains(err.Error(), stuck+"/") {
				t.Fatalf("release error %q does not name the node under %s", err, stuck)
			}
			mustIs(t, l.Err(), zklock.ErrReleased, "the lease's error after Release")
			if got := children(t, admin, free); len(got) != 0 {
				t.Fatalf("%s still has %v after the release", free, got)
			}
			freeWithin(t, other, free)
			if got := children(t, admin, stuck); len(got) != 1 {
				t.Fatalf("%s has %v; want our one node, which may not be deleted", stuck, got)
			}
		})
	}
}

// Two leases of one Client released at once, one on a path that lost
// DELETE: the other lease's node is deleted and its Release returns nil,
// whether or not the two deletes went out together.
func TestConcurrentReleaseOneFails(t *testing.T) {
	t.Parallel()
	c, other, admin := connect(t), connect(t), connect(t)
	base := lockPath(t)
	stuck, free := base+"/stuck", base+"/free"
	ms, err := zklock.NewMutex(c, stuck)
	must(t, err)
	mf, err := zklock.NewMutex(c, free)
	must(t, err)
	for round := 0; round < 5; round++ {
		ls, err := ms.Acquire(ctxT(t))
		must(t, err, "round %d: acquire %s", round, stuck)
		lf, err := mf.Acquire(ctxT(t))
		must(t, err, "round %d: acquire %s", round, free)
		noDelete(t, admin, stuck)

		errs := make(chan error, 2)
		go func() { errs <- ls.Release(ctxT(t)) }()
		go func() { errs <- lf.Release(ctxT(t)) }()
		var failed, ok int
		for i := 0; i < 2; i++ {
			switch err := <-errs; {
			case err == nil:
				ok++
			case errors.Is(err, zk.ErrNoAuth):
				failed++
			default:
				t.Fatalf("round %d: release: %v", round, err)
			}
		}
		if ok != 1 || failed != 1 {
			t.Fatalf("round %d: %d releases returned nil and %d zk.ErrNoAuth; want 1 and 1", round, ok, failed)
		}
		freeWithin(t, other, free)
		// Let the stuck node go, for the next round.
		_, err = admin.Conn().SetACL(stuck, zk.WorldACL(zk.PermAll), -1)
		must(t, err)
		for _, n := range children(t, admin, stuck) {
			_ = admin.Conn().Delete(stuck+"/"+n, -1)
		}
	}
}
