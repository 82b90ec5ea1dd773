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

// TestNoGoroutineLeaks runs every recipe, a cancelled acquire, a lost lease
// and Do, closes the clients, and checks that nothing is left running. It
// is not parallel, so no other test's goroutines are about.
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
		b, err := zklock.Connect(ctx, servers, zklock.WithDialer(f.Dialer()))
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

		lost, err := bm.Acquire(ctx)
		require.NoError(t, err)
		f.Drop()
		<-lost.Done()
		require.Error(t, lost.Release(ctx))
	}()
	goleak.VerifyNone(t, opts...)
}
