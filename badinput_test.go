package zklock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// countingDialer counts the connections a Client makes: a bad argument
// must fail before the first.
func countingDialer(n *atomic.Int32) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		n.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
}

func TestConnectBadInput(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	d := zklock.WithDialer(countingDialer(&dials))
	servers := zktest.Servers(t)
	for name, call := range map[string]func() error{
		"no servers":   func() error { _, err := zklock.Connect(ctxT(t), nil, d); return err },
		"empty server": func() error { _, err := zklock.Connect(ctxT(t), []string{servers[0], ""}, d); return err },
		"zero timeout": func() error { _, err := zklock.Connect(ctxT(t), servers, d, zklock.WithSessionTimeout(0)); return err },
		"negative timeout": func() error {
			_, err := zklock.Connect(ctxT(t), servers, d, zklock.WithSessionTimeout(-time.Second))
			return err
		},
		"nil dialer": func() error { _, err := zklock.Connect(ctxT(t), servers, zklock.WithDialer(nil)); return err },
		"empty ACL":  func() error { _, err := zklock.Connect(ctxT(t), servers, d, zklock.WithACL(nil)); return err },
		"empty auth": func() error { _, err := zklock.Connect(ctxT(t), servers, d, zklock.WithAuth("", nil)); return err },
		"nil retry":  func() error { _, err := zklock.Connect(ctxT(t), servers, d, zklock.WithRetry(nil)); return err },
		"nil option": func() error { _, err := zklock.Connect(ctxT(t), servers, d, nil); return err },
		//nolint:staticcheck // a nil context is exactly the bad input under test
		"nil context": func() error { _, err := zklock.Connect(nil, servers, d); return err },
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(), zklock.ErrInvalidArgument)
		})
	}
	require.Zero(t, dials.Load(), "no network I/O for bad arguments")
}

func TestLockBadInput(t *testing.T) {
	t.Parallel()
	c := connect(t)
	root := lockPath(t)
	paths := []string{"", "lock", "a/b", "/", root + "/", root + "//x", "/a//b", "/zookeeper", "/zookeeper/quota/x",
		root + "/./x", root + "/..", "/a\x00b"}
	for _, p := range paths {
		_, err := zklock.NewMutex(c, p)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "mutex %q", p)
		_, err = zklock.NewRWMutex(c, p)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "rwmutex %q", p)
		_, err = zklock.NewSemaphore(c, p, 1)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "semaphore %q", p)
	}
	_, err := zklock.NewMutex(nil, root)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = zklock.NewRWMutex(nil, root)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = zklock.NewSemaphore(nil, root, 1)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = zklock.NewLock(nil, root, nil)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)
	_, err = zklock.NewLock(c, root, nil)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "nil driver")
	_, err = zklock.NewLock(c, root, badNameDriver{})
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "unknown lock name")
	for _, max := range []int{0, -1} {
		_, err = zklock.NewSemaphore(c, root, max)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "maxLeases %d", max)
	}
	_, err = zklock.NewMutex(c, root, zklock.WithNodeData(make([]byte, 1<<20)))
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "oversized node data")
	_, err = zklock.NewMutex(c, root, nil)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument, "nil option")

	s, err := zklock.NewSemaphore(c, root, 3)
	require.NoError(t, err)
	for _, n := range []int{0, -1, 4} {
		_, err = s.AcquireN(ctxT(t), n)
		require.ErrorIs(t, err, zklock.ErrInvalidArgument, "n %d", n)
	}
	m, err := zklock.NewMutex(c, root)
	require.NoError(t, err)
	//nolint:staticcheck // a nil context is exactly the bad input under test
	_, err = m.Acquire(nil)
	require.ErrorIs(t, err, zklock.ErrInvalidArgument)

	ok, _, err := c.Conn().Exists(root)
	require.NoError(t, err)
	require.False(t, ok, "bad input made no node")
}

type badNameDriver struct{}

func (badNameDriver) LockName() string { return "mine-" }
func (badNameDriver) GetsTheLock([]zklock.Child, int, int) zklock.Decision {
	return zklock.Decision{Holds: true}
}

// An unknown sequential node under a lock path is refused with a clear
// error, never a hang; plain nodes are ignored.
func TestUnknownNodeRefused(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m, err := zklock.NewMutex(c, path)
	require.NoError(t, err)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	_, err = c.Conn().Create(path+"/plain", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	release(t, l)
	l, err = m.Acquire(ctxT(t))
	require.NoError(t, err, "a plain node is ignored")
	release(t, l)

	_, err = c.Conn().Create(path+"/foreign-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctxT(t), long)
	defer cancel()
	_, err = m.Acquire(ctx)
	require.ErrorIs(t, err, zklock.ErrUnknownNode)
	require.Len(t, children(t, c, path), 2, "our node is gone again")
}

// Another library's semaphore on the path (Curator's InterProcessSemaphoreV2
// keeps "locks" and "leases" children; kazoo's Semaphore plain 32-hex
// nodes) makes Semaphore.Acquire refuse: it cannot count their holders.
func TestSemaphoreRefusesForeignLayout(t *testing.T) {
	t.Parallel()
	c := connect(t)
	for _, foreign := range []string{"leases", "0123456789abcdef0123456789abcdef"} {
		path := lockPath(t)
		s, err := zklock.NewSemaphore(c, path, 2)
		require.NoError(t, err)
		l, err := s.Acquire(ctxT(t)) // creates the path
		require.NoError(t, err)
		release(t, l)
		_, err = c.Conn().Create(path+"/"+foreign, nil, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		_, err = s.Acquire(ctxT(t))
		require.ErrorIs(t, err, zklock.ErrUnknownNode, foreign)
		require.Equal(t, []string{foreign}, children(t, c, path), "no node of ours left")
		_, err = s.Participants(ctxT(t))
		require.ErrorIs(t, err, zklock.ErrUnknownNode)
	}
}
