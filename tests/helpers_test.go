package zklock_test

// Helpers shared by the suites of this module: copies of the ones the
// library's own tests use (the library module cannot share test code with
// this one), with the servers from zktest.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	require.NoError(t, err)
	return kids
}

// queued waits until the lock path has n participants.
func queued(t *testing.T, c *zklock.Client, path string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(children(t, c, path)) == n }, long, 5*time.Millisecond,
		"want %d participants on %s", n, path)
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
