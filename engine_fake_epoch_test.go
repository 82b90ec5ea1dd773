package zklock_test

// Decisions and reconnects: a path decided before a reconnect is decided
// again after it, because the watches that kept the decision true may not
// have survived (go-zookeeper only logs a failed setWatches). The fake's
// Conn.LoseWatches makes such a reconnect.

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeMultiLockDecidesAgainAfterAReconnect: a MultiLock holds on its
// first path and waits on its second; its connection drops, its node on
// the first path is deleted meanwhile, and it reconnects without its
// watches. Counting the first path as held from before the reconnect would
// grant a lease on a node that is gone (the deletion's notice was lost
// with the watch); deciding it again finds the node gone and queues again.
func TestFakeMultiLockDecidesAgainAfterAReconnect(t *testing.T) {
	f := zkfake.New()
	cm, ch := fakeClient(t, f), fakeClient(t, f)
	hb, err := zklock.NewMutex(ch, "/mr/b")
	must(t, err)
	lh, err := hb.Acquire(ctxT(t))
	must(t, err)
	ml, err := zklock.NewMultiLock(cm, []string{"/mr/a", "/mr/b"})
	must(t, err)
	conn := connOf(t, f, cm)
	watching := make(chan struct{})
	var once sync.Once
	onOp(f, conn, "/mr/b/", func(op zkfake.Op) error {
		if op.Name == "GetW" && op.Paths[0] == lh.Node() {
			once.Do(func() { close(watching) })
		}
		return nil
	})
	w := async(ml.Acquire, ctxT(t))
	select {
	case <-watching: // it holds on /mr/a and waits behind the holder of /mr/b
	case r := <-w:
		t.Fatalf("the MultiLock returned %v, %v while /mr/b was held", r.lease, r.err)
	case <-ctxT(t).Done():
		t.Fatal("the MultiLock never waited on /mr/b")
	}
	f.SetHooks(zkfake.Hooks{})
	onA := f.Children("/mr/a")
	if len(onA) != 1 {
		t.Fatalf("children of /mr/a: %v", onA)
	}
	conn.Disconnect()
	must(t, f.Delete("/mr/a/"+onA[0]), "delete the MultiLock's node on /mr/a")
	conn.LoseWatches()
	conn.Reconnect()
	release(t, lh)
	l := await(t, w)
	if !f.Exists(l.Node()) {
		t.Fatalf("granted a lease on %s, deleted before the grant", l.Node())
	}
	if kids := f.Children("/mr/a"); len(kids) != 1 || "/mr/a/"+kids[0] != l.Node() {
		t.Fatalf("children of /mr/a %v, lease on %s", kids, l.Node())
	}
	release(t, l)
}

// TestFakeMultiLockWatchesItsNodeAgainAfterAReconnect: as above, but the
// MultiLock's node on its first path is deleted after it decided that
// path again in the new connection: the watch it set on its node then,
// not the one lost with the old connection, tells it, and it queues again
// rather than be granted a lease on a node that is gone.
func TestFakeMultiLockWatchesItsNodeAgainAfterAReconnect(t *testing.T) {
	f := zkfake.New()
	cm, ch := fakeClient(t, f), fakeClient(t, f)
	hb, err := zklock.NewMutex(ch, "/mw/b")
	must(t, err)
	lh, err := hb.Acquire(ctxT(t))
	must(t, err)
	ml, err := zklock.NewMultiLock(cm, []string{"/mw/a", "/mw/b"})
	must(t, err)
	conn := connOf(t, f, cm)
	watching := make(chan struct{}, 8) // each time it waits behind the holder of /mw/b
	onOp(f, conn, "/mw/b/", func(op zkfake.Op) error {
		if op.Name == "GetW" && op.Paths[0] == lh.Node() {
			select {
			case watching <- struct{}{}:
			default:
			}
		}
		return nil
	})
	w := async(ml.Acquire, ctxT(t))
	select {
	case <-watching:
	case <-time.After(long):
		t.Fatal("the MultiLock never waited on /mw/b")
	}
	onA := f.Children("/mw/a")
	if len(onA) != 1 {
		t.Fatalf("children of /mw/a: %v", onA)
	}
	conn.Disconnect()
	conn.LoseWatches()
	conn.Reconnect()
	select {
	case <-watching: // it decided /mw/a again, and waits on /mw/b again
	case <-time.After(long):
		t.Fatal("the MultiLock never waited on /mw/b after the reconnect")
	}
	f.SetHooks(zkfake.Hooks{})
	must(t, f.Delete("/mw/a/"+onA[0]), "delete the MultiLock's node on /mw/a")
	release(t, lh)
	l := await(t, w)
	if !f.Exists(l.Node()) {
		t.Fatalf("granted a lease on %s, deleted before the grant", l.Node())
	}
	release(t, l)
}

// TestFakeMultiLockReadErrorKeepsItsPlace: after a reconnect, a MultiLock
// decides its first path again with a read of the queue and of its own
// node (its watch set again); when either fails with an error that may
// pass, it backs off and reads again, and keeps its place: its nodes are
// the ones it queued with, and it makes no new one.
func TestFakeMultiLockReadErrorKeepsItsPlace(t *testing.T) {
	for _, failing := range []string{"GetW", "ChildrenStat"} {
		failing := failing
		t.Run(failing, func(t *testing.T) {
			f := zkfake.New()
			cm := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
			ch := fakeClient(t, f)
			for _, p := range []string{"/mk", "/mk/a", "/mk/b"} {
				must(t, f.Create(p, nil)) // so that the one create makes the nodes
			}
			hb, err := zklock.NewMutex(ch, "/mk/b")
			must(t, err)
			lh, err := hb.Acquire(ctxT(t))
			must(t, err)
			ml, err := zklock.NewMultiLock(cm, []string{"/mk/a", "/mk/b"})
			must(t, err)
			conn := connOf(t, f, cm)
			watching := make(chan struct{}, 8)
			var failed, creates atomic.Int32
			var reconnected atomic.Bool
			f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
				switch {
				case op.Conn != conn:
				case op.Name == "CreateEach":
					creates.Add(1)
				case op.Name == "GetW" && op.Paths[0] == lh.Node():
					select {
					case watching <- struct{}{}:
					default:
					}
				case reconnected.Load() && op.Name == failing && strings.HasPrefix(op.Paths[0], "/mk/a") && failed.Add(1) == 1:
					return zk.ErrConnectionClosed
				}
				return nil
			}})
			w := async(ml.Acquire, ctxT(t))
			select {
			case <-watching:
			case <-time.After(long):
				t.Fatal("the MultiLock never waited on /mk/b")
			}
			onA := f.Children("/mk/a")
			reconnected.Store(true)
			conn.Disconnect()
			conn.Reconnect()
			select {
			case <-watching:
			case <-time.After(long):
				t.Fatal("the MultiLock never waited on /mk/b after the reconnect")
			}
			if failed.Load() == 0 {
				t.Fatalf("no %s of /mk/a after the reconnect", failing)
			}
			release(t, lh)
			l := await(t, w)
			if n := creates.Load(); n != 1 {
				t.Fatalf("%d creates; want 1: a read that may pass must not cost the MultiLock its place", n)
			}
			if len(onA) != 1 || l.Node() != "/mk/a/"+onA[0] {
				t.Fatalf("lease on %s, not on the node it queued with (%v)", l.Node(), onA)
			}
			release(t, l)
		})
	}
}
