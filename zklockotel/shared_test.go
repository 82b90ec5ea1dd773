package zklockotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/zkrecipes/zklock"
)

// An RWMutex with WithSharedReads: zklock.leases.held counts the leases on
// the shared node, not the node; each is counted when released, and each
// as lost when the node is deleted.
func TestSharedReadsCountLeases(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	ctx := ctxT(t)
	rw, err := zklock.NewRWMutex(c, lockPath(t), zklock.WithSharedReads())
	require.NoError(t, err)
	var leases []*zklock.Lease
	for i := 0; i < 3; i++ {
		l, err := rw.ReadLock().Acquire(ctx)
		require.NoError(t, err)
		leases = append(leases, l)
	}
	require.Equal(t, leases[0].Node(), leases[2].Node(), "one shared node")
	require.Equal(t, int64(3), o.sum(t, "zklock.leases.held", kindRead))
	require.NoError(t, leases[0].Release(ctx))
	require.Equal(t, int64(2), o.sum(t, "zklock.leases.held", kindRead))
	n, _ := o.hist(t, "zklock.lease.duration", kindRead, released)
	require.Equal(t, uint64(1), n)

	require.NoError(t, connect(t).Conn().Delete(leases[1].Node(), -1))
	for _, l := range leases[1:] {
		select {
		case <-l.Done():
		case <-time.After(long):
			t.Fatal("a lease on the deleted node did not end")
		}
	}
	cause := attribute.String("zklock.cause", "node_deleted")
	eventually(t, func() bool { return o.sum(t, "zklock.lease.lost", kindRead, cause) == 2 }, "two leases lost with the node")
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindRead))
}
