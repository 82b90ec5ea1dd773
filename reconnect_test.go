package zklock_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// A connection that comes back in the same session with thousands of
// watches set, while replies keep coming: go-zookeeper v1.0.4's
// sendSetWatches reads Conn.lastZxid while the new connection's recvLoop
// writes it (go-zookeeper/zk PR #35). The Session's wire keeps lastZxid
// itself, so go-zookeeper's reader never writes it
// (internal/session/zxid.go); under -race this test fails if it does, when
// the reconnect happens to overlap a reply (rarely: it is a smoke test;
// TestLastZxidRace in internal/session provokes the race at every
// reconnect). After the reconnects the held nodes' watches still end their
// leases.
func TestReconnectWithWatchesUnderRace(t *testing.T) {
	const n, drops, readers = 1500, 6, 8
	c, f := faulty(t, 4*time.Second)
	other := connect(t)
	ctx := ctxT(t)
	root := lockPath(t)
	leases := holdMany(t, ctx, c, root, n)

	// Replies with a zxid, all the time, on the same connection.
	stop := make(chan struct{})
	var reads atomic.Int64
	var busy sync.WaitGroup
	for g := 0; g < readers; g++ {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, _ = c.Conn().Exists(root)
				reads.Add(1)
			}
		}()
	}
	for d := 0; d < drops; d++ {
		before := reads.Load()
		f.Drop() // the same session comes back on a new connection
		eventually(t, func() bool { return reads.Load() > before+50 && leases[0].Err() == nil }, "reconnect %d", d)
	}
	close(stop)
	busy.Wait()

	for _, i := range []int{1, n / 2, n - 1} {
		deleteNode(t, other, leases[i].Node())
		mustIs(t, ended(t, leases[i], "lease %d", i), zklock.ErrNodeDeleted)
	}
	for i, l := range leases {
		if i != 1 && i != n/2 && i != n-1 {
			must(t, l.Err(), "lease %d, whose node nobody deleted", i)
		}
	}
}
