package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// TestNoGoroutineLeaksSharedReads runs shared reads through every way a
// shared node ends (its last lease released, all its waiters cancelled,
// deleted from outside, the Client closed) and checks that no goroutine is
// left. Not parallel, so no other test's goroutines are about.
func TestNoGoroutineLeaksSharedReads(t *testing.T) {
	servers := zktest.Servers(t)
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	path := lockPath(t)
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		a, err := zklock.Connect(ctx, servers)
		require.NoError(t, err)
		defer a.Close()
		b, err := zklock.Connect(ctx, servers)
		require.NoError(t, err)
		defer b.Close()
		rw, err := zklock.NewRWMutex(a, path, zklock.WithSharedReads())
		require.NoError(t, err)

		// Released: several leases, the last deletes the node.
		var leases []*zklock.Lease
		for i := 0; i < 4; i++ {
			l, err := rw.ReadLock().Acquire(ctx)
			require.NoError(t, err)
			leases = append(leases, l)
		}
		for _, l := range leases {
			require.NoError(t, l.Release(ctx))
		}

		// Cancelled while queued behind a writer.
		wrw, err := zklock.NewRWMutex(b, path)
		require.NoError(t, err)
		w, err := wrw.WriteLock().Acquire(ctx)
		require.NoError(t, err)
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan error, 2)
		for i := 0; i < 2; i++ {
			go func() { _, err := rw.ReadLock().Acquire(wctx); done <- err }()
		}
		queued(t, a, path, 2)
		wcancel()
		for i := 0; i < 2; i++ {
			require.ErrorIs(t, <-done, context.Canceled)
		}
		require.NoError(t, w.Release(ctx))

		// Deleted from outside.
		l, err := rw.ReadLock().Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, b.Conn().Delete(l.Node(), -1))
		requireEnded(t, l)

		// Held when the Client closes.
		l, err = rw.ReadLock().Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, a.Close())
		requireEnded(t, l)
	}()
	goleak.VerifyNone(t, opts...)
}

func requireEnded(t *testing.T, l *zklock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(long):
		t.Fatalf("lease on %s did not end", l.Node())
	}
}
