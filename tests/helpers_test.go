package zklock_test

// Helpers shared by the suites of this module: copies of the ones the
// library's own tests use (the library module cannot share test code with
// this one), with the servers from zktest.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
	return withoutRegistry(t, c.Conn(), path, kids)
}

// withoutRegistry is kids, the children of a lock path, but a zklock
// semaphore's registry (`_holders`), a container the server reaps once
// empty: no participant. With no participant left, the registry's
// children are listed instead, if any: an entry or marker left behind.
func withoutRegistry(t *testing.T, conn *zk.Conn, path string, kids []string) []string {
	t.Helper()
	i := slices.Index(kids, "_holders")
	if i < 0 {
		return kids
	}
	kids = slices.Delete(slices.Clone(kids), i, i+1)
	if len(kids) > 0 {
		return kids
	}
	left, _, err := conn.Children(path + "/_holders")
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	require.NoError(t, err)
	for i, n := range left {
		left[i] = "_holders/" + n
	}
	return left
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

// awaitServing waits until every server of e serves, one as leader, the
// others as followers, or ctx ends.
func awaitServing(ctx context.Context, e *zktest.Ensemble) error {
	for {
		modes := serverModes(ctx, e)
		leaders, followers := 0, 0
		for _, m := range modes {
			switch m {
			case "leader":
				leaders++
			case "follower":
				followers++
			}
		}
		if leaders == 1 && followers == len(modes)-1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ensemble not whole (modes %q): %w", modes, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverModes asks every server of e for its mode with srvr: "leader",
// "follower", "not serving" (electing, or cut off) or "unreachable".
func serverModes(ctx context.Context, e *zktest.Ensemble) []string {
	modes := make([]string, zktest.EnsembleSize)
	for i, c := range e.Nodes() {
		probe, cancel := context.WithTimeout(ctx, time.Second)
		out, err := c.FourLetter(probe, "srvr")
		cancel()
		_, m, ok := strings.Cut(out, "Mode: ")
		m, _, _ = strings.Cut(m, "\n")
		switch {
		case err != nil:
			m = "unreachable"
		case !ok:
			m = "not serving"
		}
		modes[i] = m
	}
	return modes
}
