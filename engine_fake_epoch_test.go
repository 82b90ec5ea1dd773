package zklock_test

// Decisions and reconnects: a path decided before a reconnect is decided
// again after it, because the watches that kept the decision true may not
// have survived (go-zookeeper only logs a failed setWatches). The fake's
// Conn.LoseWatches makes such a reconnect.

import (
	"sync"
	"testing"
	"time"

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
