package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

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
			if !errors.Is(err, zk.ErrNodeExists) {
				must(t, err, "create %s", path[:i])
			}
		}
	}
	_, err := alice.Conn().Create(path, nil, 0, zk.DigestACL(zk.PermAll, "alice", "secret"))
	must(t, err, "create %s", path)

	m := newMutex(t, connect(t), path)
	_, err = m.Acquire(ctxT(t))
	mustIs(t, err, zk.ErrNoAuth)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("retried until the deadline: %v", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("the error does not say where: %v", err)
	}

	// With the credentials, the same path works.
	l, err := newMutex(t, alice, path).Acquire(ctxT(t))
	must(t, err, "acquire with the credentials")
	release(t, l)
}
