package zklock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// refusingDialer counts the connections a Client tries to make, and makes
// none: a bad argument must fail before the first.
func refusingDialer(n *atomic.Int32) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		n.Add(1)
		return nil, errors.New("refusingDialer: no network I/O in this test")
	}
}

// Pure logic: no server needed, none is dialed.
func TestConnectBadInput(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	d := zklock.WithDialer(refusingDialer(&dials))
	servers := []string{"127.0.0.1:2181"} // never dialed
	// A Connect that wrongly went ahead would retry its dials until ctx
	// ends: bound that, so such a bug fails in seconds, not minutes.
	bound := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	// Chroots ZooKeeper's PathUtils.validatePath refuses, as the Java
	// client refuses them in its constructor.
	badChroots := []string{"/apps/", "//apps", "/apps//billing", "/apps/./b", "/apps/..", "/a\x00b", "/a\u0001", "/zookeeper"}
	calls := map[string]func() error{}
	for _, root := range badChroots {
		root := root
		calls["chroot "+root] = func() error { _, err := zklock.Connect(bound(), []string{servers[0] + root}, d); return err }
	}
	for name, call := range map[string]func() error{
		"no servers":   func() error { _, err := zklock.Connect(bound(), nil, d); return err },
		"empty server": func() error { _, err := zklock.Connect(bound(), []string{servers[0], ""}, d); return err },
		"zero timeout": func() error { _, err := zklock.Connect(bound(), servers, d, zklock.WithSessionTimeout(0)); return err },
		"negative timeout": func() error {
			_, err := zklock.Connect(bound(), servers, d, zklock.WithSessionTimeout(-time.Second))
			return err
		},
		"nil dialer": func() error { _, err := zklock.Connect(bound(), servers, zklock.WithDialer(nil)); return err },
		"nil TLS":    func() error { _, err := zklock.Connect(bound(), servers, d, zklock.WithTLS(nil)); return err },
		"empty ACL":  func() error { _, err := zklock.Connect(bound(), servers, d, zklock.WithACL(nil)); return err },
		"empty auth": func() error { _, err := zklock.Connect(bound(), servers, d, zklock.WithAuth("", nil)); return err },
		"nil retry":  func() error { _, err := zklock.Connect(bound(), servers, d, zklock.WithRetry(nil)); return err },
		"nil option": func() error { _, err := zklock.Connect(bound(), servers, d, nil); return err },
		"nil host resolver": func() error {
			_, err := zklock.Connect(bound(), servers, d, zklock.WithHostResolver(nil))
			return err
		},
		"bad port": func() error { _, err := zklock.Connect(bound(), []string{"127.0.0.1:21x"}, d); return err },
		"chroot before the last server": func() error {
			_, err := zklock.Connect(bound(), []string{"127.0.0.1:2181/apps", "127.0.0.2:2181"}, d)
			return err
		},
		//lint:ignore SA1012 a nil context is exactly the bad input under test
		"nil context": func() error { _, err := zklock.Connect(nil, servers, d); return err },
	} {
		calls[name] = call
	}
	for name, call := range calls {
		call := call
		t.Run(name, func(t *testing.T) {
			mustIs(t, call(), zklock.ErrInvalidArgument)
		})
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d dials: want no network I/O for bad arguments", n)
	}
}

func TestLockBadInput(t *testing.T) {
	t.Parallel()
	c := connect(t)
	lockBadInput(t, c, func(path string) bool {
		ok, _, err := c.Conn().Exists(path)
		must(t, err)
		return ok
	})
}

// TestFakeLockBadInput is TestLockBadInput on the fake, in the fast tier.
func TestFakeLockBadInput(t *testing.T) {
	f := zkfake.New()
	lockBadInput(t, fakeClient(t, f), f.Exists)
}

// lockBadInput checks that the constructors and calls of the recipes refuse
// bad arguments with ErrInvalidArgument, and make no node (exists says
// whether a path exists).
func lockBadInput(t *testing.T, c *zklock.Client, exists func(path string) bool) {
	root := lockPath(t)
	paths := []string{"", "lock", "a/b", "/", root + "/", root + "//x", "/a//b", "/zookeeper", "/zookeeper/quota/x",
		root + "/./x", root + "/..", "/a\x00b"}
	for _, p := range paths {
		_, err := zklock.NewMutex(c, p)
		mustIs(t, err, zklock.ErrInvalidArgument, "mutex %q", p)
		_, err = zklock.NewRWMutex(c, p)
		mustIs(t, err, zklock.ErrInvalidArgument, "rwmutex %q", p)
		_, err = zklock.NewSemaphore(c, p, 1)
		mustIs(t, err, zklock.ErrInvalidArgument, "semaphore %q", p)
		_, err = zklock.NewLock(c, p, oldestFirst{})
		mustIs(t, err, zklock.ErrInvalidArgument, "lock %q", p)
		_, err = zklock.NewElection(c, p)
		mustIs(t, err, zklock.ErrInvalidArgument, "election %q", p)
		mustIs(t, zklock.ValidatePath(p), zklock.ErrInvalidArgument, "ValidatePath(%q)", p)
		_, err = zklock.Participants(ctxT(t), c, p)
		mustIs(t, err, zklock.ErrInvalidArgument, "participants of %q", p)
	}
	must(t, zklock.ValidatePath(root), "ValidatePath(%q)", root)
	_, err := zklock.NewElection(nil, root)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	for _, id := range [][]byte{nil, {}} {
		_, err = zklock.NewElection(c, root, zklock.WithNodeData(id))
		mustIs(t, err, zklock.ErrInvalidArgument, "empty identity %q", id)
	}
	_, err = zklock.NewElection(c, root, nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil option")
	_, err = zklock.Participants(ctxT(t), nil, root)
	mustIs(t, err, zklock.ErrInvalidArgument, "participants with a nil client")
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = zklock.Participants(nil, c, root)
	mustIs(t, err, zklock.ErrInvalidArgument, "participants with a nil context")
	pm, err := zklock.NewMutex(c, root)
	must(t, err)
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = pm.Participants(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "a mutex's participants with a nil context")
	e, err := zklock.NewElection(c, root)
	must(t, err)
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = e.Leader(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "leader with a nil context")
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = e.Campaign(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "campaign with a nil context")
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	if _, open := <-e.Observe(nil); open {
		t.Fatal("Observe(nil) must return a closed channel")
	}
	_, err = zklock.NewMutex(nil, root)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	_, err = zklock.NewRWMutex(nil, root)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	_, err = zklock.NewSemaphore(nil, root, 1)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	_, err = zklock.NewLock(nil, root, oldestFirst{})
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	_, err = zklock.NewLock(c, root, nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil driver")
	for _, k := range []zklock.Kind{zklock.KindUnknown, zklock.Kind(-1), zklock.Kind(99)} {
		_, err = zklock.NewLock(c, root, kindDriver{k})
		mustIs(t, err, zklock.ErrInvalidArgument, "driver of kind %v", k)
	}
	for _, max := range []int{0, -1} {
		_, err = zklock.NewSemaphore(c, root, max)
		mustIs(t, err, zklock.ErrInvalidArgument, "maxLeases %d", max)
	}
	_, err = zklock.NewMutex(c, root, zklock.WithNodeData(make([]byte, 1<<20)))
	mustIs(t, err, zklock.ErrInvalidArgument, "oversized node data")
	_, err = zklock.NewMutex(c, root, nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil option")

	s := newSem(t, c, root, 3)
	for _, n := range []int{0, -1, 4} {
		_, err = s.AcquireN(ctxT(t), n)
		mustIs(t, err, zklock.ErrInvalidArgument, "AcquireN(%d) of 3", n)
	}
	m := newMutex(t, c, root)
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = m.Acquire(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil context")

	if exists(root) {
		t.Fatalf("bad input made a node: %s exists", root)
	}
}

// kindDriver writes nodes of kind, and would always hold.
type kindDriver struct{ kind zklock.Kind }

func (d kindDriver) Kind() zklock.Kind { return d.kind }
func (kindDriver) GetsTheLock([]zklock.Child, int, int) zklock.Decision {
	return zklock.Decision{Holds: true}
}

// An unknown sequential node under a lock path is refused with a clear
// error, never a hang; plain nodes are ignored.
func TestUnknownNodeRefused(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	_, err = c.Conn().Create(path+"/plain", nil, 0, zk.WorldACL(zk.PermAll))
	must(t, err)
	release(t, l)
	l, err = m.Acquire(ctxT(t))
	must(t, err, "a plain node is ignored")
	release(t, l)

	_, err = c.Conn().Create(path+"/foreign-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	must(t, err)
	ctx, cancel := context.WithTimeout(ctxT(t), long)
	defer cancel()
	_, err = m.Acquire(ctx)
	mustIs(t, err, zklock.ErrUnknownNode)
	if kids := children(t, c, path); len(kids) != 2 {
		t.Fatalf("our node is gone again: want the plain and the foreign node, children %v", kids)
	}
}
