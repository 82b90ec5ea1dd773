package zklock_test

// Held leases across a reconnect that lost its watches: go-zookeeper only
// logs a setWatches that failed, and the watches that covered the held
// nodes are gone with it (the fake's Conn.LoseWatches). The keeper checks
// every held node after a reconnect (internal/session/sweep.go).

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// sweepRig is a Client holding n mutex leases on the fake. Only the sweep
// may find a deleted node: with more than 64 leases, a check of 64 nodes
// (a confirmation's sample) that names a node in gone fails; with
// fewer, the session's timeout is an hour, so that no confirmation is due
// (nor a retry, after a failure, for five minutes). swept tells of each
// sweep chunk that passed.
type sweepRig struct {
	f      *zkfake.Server
	c      *zklock.Client
	conn   *zkfake.Conn
	leases []*zklock.Lease
	gone   []string
	swept  chan struct{}
	fail   atomic.Int32 // sweep chunks to fail before they reach the server
}

func newSweepRig(t *testing.T, n int) *sweepRig {
	t.Helper()
	r := &sweepRig{f: zkfake.New(), swept: make(chan struct{}, 64)}
	timeout := 30 * time.Second
	if n <= 64 {
		timeout = time.Hour
	}
	r.c = fakeClient(t, r.f, zklock.WithSessionTimeout(timeout))
	for i := 0; i < n; i++ {
		m, err := zklock.NewMutex(r.c, fmt.Sprintf("/sw/%03d", i))
		must(t, err)
		l, err := m.Acquire(ctxT(t))
		must(t, err)
		r.leases = append(r.leases, l)
	}
	r.conn = connOf(t, r.f, r.c)
	return r
}

// hook installs the fake's hooks; gone are the nodes the test deletes.
func (r *sweepRig) hook(gone ...string) {
	r.gone = gone
	// A confirmation checks 64 nodes when it holds more (maxChecked); a
	// sweep chunk here checks all that are left of the 100.
	sample := func(op zkfake.Op) bool { return len(op.Paths) == 64 && len(r.leases) > 64 }
	r.f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			if op.Name != "Check" {
				return nil
			}
			if sample(op) && slices.ContainsFunc(op.Paths, func(p string) bool { return slices.Contains(r.gone, p) }) {
				return zk.ErrConnectionClosed
			}
			if !sample(op) && r.fail.Add(-1) >= 0 {
				return zk.ErrConnectionClosed
			}
			return nil
		},
		After: func(op zkfake.Op, err error) error {
			if op.Name == "Check" && !sample(op) && err == nil {
				r.swept <- struct{}{}
			}
			return err
		},
	})
}

// lose drops the connection and the session's watches with it.
func (r *sweepRig) lose() {
	r.conn.Disconnect()
	r.conn.LoseWatches()
}

// check waits for the leases of the deleted nodes to end with
// ErrNodeDeleted, and sees the others still held.
func (r *sweepRig) check(t *testing.T, deleted ...int) {
	t.Helper()
	for _, i := range deleted {
		mustIs(t, doneWithin(t, r.leases[i]), zklock.ErrNodeDeleted, "lease %d, whose node was deleted", i)
	}
	for i, l := range r.leases {
		if !slices.Contains(deleted, i) {
			mustLive(t, l)
			release(t, l)
		}
	}
}

// Held nodes deleted during the disconnect end their leases with
// ErrNodeDeleted, found by the sweep after the reconnect, two in one chunk
// too; one deleted after that sweep, whose notice was lost too, by the
// sweep after the next reconnect (sweep.go's proof: a lost notice comes
// of a connection that dropped); a sweep whose check fails is done again;
// and a lone lease is swept as well. Without the sweep these leases stayed
// held while another Client could hold the lock, until the keeper's
// confirmation happened to check the node (a sample of 64 a round), which
// these tests keep out.
func TestFakeHeldNodesCheckedAfterAReconnect(t *testing.T) {
	t.Run("deleted during the disconnect", func(t *testing.T) {
		r := newSweepRig(t, 100)
		r.hook(r.leases[7].Node(), r.leases[50].Node())
		r.lose()
		must(t, r.f.Delete(r.leases[7].Node()))
		must(t, r.f.Delete(r.leases[50].Node()))
		r.conn.Reconnect()
		r.check(t, 7, 50)
		other := fakeClient(t, r.f)
		m, err := zklock.NewMutex(other, "/sw/007")
		must(t, err)
		l, err := m.TryAcquire(ctxT(t))
		must(t, err, "the lock whose node was deleted")
		release(t, l)
	})
	t.Run("deleted after the sweep", func(t *testing.T) {
		r := newSweepRig(t, 100)
		r.hook(r.leases[7].Node())
		r.lose()
		r.conn.Reconnect()
		select {
		case <-r.swept: // every node was there
		case <-time.After(long):
			t.Fatal("no sweep after the reconnect")
		}
		must(t, r.f.Delete(r.leases[7].Node())) // its notice is lost: no watch came back
		r.lose()
		r.conn.Reconnect()
		r.check(t, 7)
	})
	t.Run("a sweep that fails is done again", func(t *testing.T) {
		r := newSweepRig(t, 100)
		r.fail.Store(1)
		r.hook(r.leases[7].Node())
		r.lose()
		must(t, r.f.Delete(r.leases[7].Node()))
		r.conn.Reconnect()
		r.check(t, 7)
	})
	t.Run("one lease", func(t *testing.T) {
		r := newSweepRig(t, 1)
		r.hook()
		r.lose()
		must(t, r.f.Delete(r.leases[0].Node()))
		r.conn.Reconnect()
		r.check(t, 0)
	})
}
