package zklock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
)

// A permanent ZooKeeper error is returned at once, wrapped, with
// ZooKeeper's sentinel reachable; it is not retried until ctx ends.
func TestPermanentErrorReturnsAtOnce(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	alice := connect(t, zklock.WithAuth("digest", []byte("alice:secret")))
	open := zk.WorldACL(zk.PermAll)
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			_, err := alice.Conn().Create(path[:i], nil, 0, open)
			if err != zk.ErrNodeExists {
				require.NoError(t, err)
			}
		}
	}
	_, err := alice.Conn().Create(path, nil, 0, zk.DigestACL(zk.PermAll, "alice", "secret"))
	require.NoError(t, err)

	m, err := zklock.NewMutex(connect(t), path)
	require.NoError(t, err)
	_, err = m.Acquire(ctxT(t))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "not retried until the deadline")
	require.True(t, strings.Contains(err.Error(), path), "the error says where: %v", err)

	// With the credentials, the same path works.
	am, err := zklock.NewMutex(alice, path)
	require.NoError(t, err)
	l, err := am.Acquire(ctxT(t))
	require.NoError(t, err)
	release(t, l)
}
