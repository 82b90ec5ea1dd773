package zklock_test

// Held leases across a reconnect that lost its watches: go-zookeeper only
// logs a setWatches that failed, and the watches that covered the held
// nodes are gone with it (the fake's Conn.LoseWatches). The keeper checks
// every held node after a reconnect (internal/session/sweep.go).

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A held node deleted during the disconnect ends its lease with
// ErrNodeDeleted, found by the sweep after the reconnect; and one deleted
// after that sweep, whose notice was lost too, by the sweep after the next
// reconnect (sweep.go's proof: a lost notice comes of a connection that
// dropped). Without the sweep the lease stayed held while another Client
// held the lock, until the keeper's confirmation happened to check the
// node (a sample of 64 a round). Here that sample is kept out: the
// session's timeout is an hour, so no confirmation is due, and a check of
// at most 64 nodes that names the deleted one fails; the sweep checks all
// 100 held nodes at once.
func TestFakeHeldNodesCheckedAfterAReconnect(t *testing.T) {
	const n = 100
	for _, during := range []bool{true, false} {
		f := zkfake.New()
		c, other := fakeClient(t, f, zklock.WithSessionTimeout(time.Hour)), fakeClient(t, f)
		leases := make([]*zklock.Lease, n)
		for i := range leases {
			m, err := zklock.NewMutex(c, fmt.Sprintf("/sw/%03d", i))
			must(t, err)
			leases[i], err = m.Acquire(ctxT(t))
			must(t, err)
		}
		deleted := leases[7].Node()
		swept := make(chan struct{}, 16)
		f.SetHooks(zkfake.Hooks{
			Before: func(op zkfake.Op) error {
				if op.Name == "Check" && len(op.Paths) <= 64 && slices.Contains(op.Paths, deleted) {
					return zk.ErrConnectionClosed
				}
				return nil
			},
			After: func(op zkfake.Op, err error) error {
				if op.Name == "Check" && len(op.Paths) > 64 && err == nil {
					swept <- struct{}{}
				}
				return err
			},
		})
		conn := connOf(t, f, c)
		lose := func() {
			conn.Disconnect()
			conn.LoseWatches()
		}
		lose()
		if during {
			must(t, f.Delete(deleted))
		}
		conn.Reconnect()
		if !during {
			select {
			case <-swept: // every node was there
			case <-time.After(long):
				t.Fatal("no sweep after the reconnect")
			}
			must(t, f.Delete(deleted)) // its notice is lost: no watch came back
			lose()
			conn.Reconnect()
		}
		mustIs(t, doneWithin(t, leases[7]), zklock.ErrNodeDeleted, "the deleted node's lease (deleted during the disconnect: %v)", during)
		m, err := zklock.NewMutex(other, "/sw/007")
		must(t, err)
		l, err := m.TryAcquire(ctxT(t))
		must(t, err, "the lock whose node was deleted")
		release(t, l)
		for i, l := range leases {
			if i != 7 {
				mustLive(t, l)
				release(t, l)
			}
		}
	}
}
