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

// TestNoGoroutineLeaks runs every recipe, a cancelled acquire, Do, a lease
// lost at its deadline and one lost at a disconnect, closes the clients, and
// checks that nothing is left running. It is not parallel, so no other
// test's goroutines are about.
func TestNoGoroutineLeaks(t *testing.T) {
	servers := zktest.Servers(t) // start the shared server before the snapshot
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	path := lockPath(t)
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		a, err := zklock.Connect(ctx, servers)
		require.NoError(t, err)
		defer a.Close()
		f := zktest.NewFaults(nil)
		defer f.Close()
		b, err := zklock.Connect(ctx, servers, zklock.WithDialer(f.Dialer()), zklock.WithSessionTimeout(2*time.Second))
		require.NoError(t, err)
		defer b.Close()

		m, err := zklock.NewMutex(a, path)
		require.NoError(t, err)
		held, err := m.Acquire(ctx)
		require.NoError(t, err)
		bm, err := zklock.NewMutex(b, path)
		require.NoError(t, err)
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = bm.Acquire(short)
		cancelShort()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, held.Release(ctx))

		rw, err := zklock.NewRWMutex(b, path+"rw")
		require.NoError(t, err)
		require.NoError(t, zklock.Do(ctx, rw.ReadLock(), func(context.Context) error { return nil }))
		require.NoError(t, zklock.Do(ctx, rw.WriteLock(), func(context.Context) error { return nil }))
		s, err := zklock.NewSemaphore(a, path+"sem", 2)
		require.NoError(t, err)
		ls, err := s.AcquireN(ctx, 2)
		require.NoError(t, err)
		for _, l := range ls {
			require.NoError(t, l.Release(ctx))
		}

		// A lease lost at its deadline (the Client's keeper ends it) while
		// the client is cut off, and one lost at a disconnect.
		lost, err := bm.Acquire(ctx)
		require.NoError(t, err)
		f.Partition()
		awaitDone(t, ctx, lost)
		require.ErrorIs(t, lost.Err(), zklock.ErrLeaseExpired)
		f.Heal()
		require.Error(t, lost.Release(ctx))

		g := zktest.NewFaults(nil)
		defer g.Close()
		d, err := zklock.Connect(ctx, servers, zklock.WithDialer(g.Dialer()), zklock.WithLossOnDisconnect())
		require.NoError(t, err)
		defer d.Close()
		dm, err := zklock.NewMutex(d, path)
		require.NoError(t, err)
		suspended, err := dm.Acquire(ctx)
		require.NoError(t, err)
		g.Drop()
		awaitDone(t, ctx, suspended)
		require.ErrorIs(t, suspended.Err(), zklock.ErrConnectionSuspended)
		require.Error(t, suspended.Release(ctx))
	}()
	goleak.VerifyNone(t, opts...)
}

// awaitDone waits until l has ended, or fails the test when ctx ends first.
func awaitDone(t *testing.T, ctx context.Context, l *zklock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatalf("lease %s still live: %v", l.Node(), ctx.Err())
	}
}
