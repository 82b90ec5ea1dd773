package zklock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// long bounds every wait in these tests: far above what any step needs, so
// a hang fails instead of blocking the run.
const long = 30 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*long)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a Client of its own session, closed when the test ends.
func connect(t *testing.T, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	c, err := zklock.Connect(ctxT(t), zktest.Servers(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// faulty opens a Client whose transport the test can break.
func faulty(t *testing.T, session time.Duration) (*zklock.Client, *zktest.Faults) {
	t.Helper()
	f := zktest.NewFaults(nil)
	c := connect(t, zklock.WithDialer(f.Dialer()), zklock.WithSessionTimeout(session))
	t.Cleanup(f.Close) // runs before the Client's Close: cleanups are LIFO
	return c, f
}

// lockPath returns a path of the test's own.
func lockPath(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/zklock-test/" + name + "-" + hex.EncodeToString(b[:]) + "/lock"
}

// children returns the lock path's children (none if it does not exist).
func children(t *testing.T, c *zklock.Client, path string) []string {
	t.Helper()
	kids, _, err := c.Conn().Children(path)
	if err == zk.ErrNoNode {
		return nil
	}
	require.NoError(t, err)
	return kids
}

type result struct {
	lease *zklock.Lease
	err   error
}

// async runs an acquire in the background.
func async(acquire func(context.Context) (*zklock.Lease, error), ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- result{l, err}
	}()
	return ch
}

// await waits for an acquire started with async.
func await(t *testing.T, ch <-chan result) *zklock.Lease {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.lease
	case <-time.After(long):
		t.Fatal("acquire did not return")
		return nil
	}
}

// pending asserts that an acquire started with async has not returned.
func pending(t *testing.T, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("acquire returned early: %v %v", r.lease, r.err)
	default:
	}
}

// queued waits until the lock path has n participants.
func queued(t *testing.T, c *zklock.Client, path string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(children(t, c, path)) == n }, long, 5*time.Millisecond,
		"want %d participants on %s", n, path)
}

// holder reports whether node holds according to parts.
func holder(parts []zklock.Participant, node string) bool {
	for _, p := range parts {
		if p.Node == node {
			return p.Holder
		}
	}
	return false
}

func release(t *testing.T, l *zklock.Lease) {
	t.Helper()
	require.NoError(t, l.Release(ctxT(t)))
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
