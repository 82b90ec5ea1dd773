package zklock_test

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// foundPaths returns the found lock paths relative to root, with their
// layout, holders and waiters: "a zklock 1/1".
func foundPaths(root string, found []zklock.LockPath) []string {
	var out []string
	for _, lp := range found {
		h, w := 0, 0
		for _, p := range lp.Participants {
			if p.Holder {
				h++
			} else {
				w++
			}
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(lp.Path, root), "/")
		if rel == "" {
			rel = "."
		}
		out = append(out, fmt.Sprintf("%s %v %d/%d", rel, lp.Layout, h, w))
	}
	return out
}

// FindLocks lists the lock paths with participants below its root, sorted,
// whatever their recipe and layout, at every depth; it does not list a
// semaphore's own nodes (Curator's locks/ and leases/, kazoo's lock next
// to it), nor idle paths; its limits cut the walk and say so.
func TestFindLocks(t *testing.T) {
	t.Parallel()
	root := path.Dir(lockPath(t))
	c := connect(t)
	t.Cleanup(func() {
		_ = c.Conn().Delete(root+"/kazoo-__lock__", -1)
		_ = c.Conn().Delete(root+"/kazoo", -1)
	})
	hold := func(l *zklock.Lease, err error) *zklock.Lease {
		t.Helper()
		must(t, err)
		t.Cleanup(func() { _ = l.Release(ctxT(t)) })
		return l
	}
	m := newMutex(t, connect(t), root+"/a")
	first := hold(m.Acquire(ctxT(t)))
	waiter := async(newMutex(t, connect(t), root+"/a").Acquire, ctxT(t))
	queued(t, c, root+"/a", 2)
	rw, err := zklock.NewRWMutex(connect(t), root+"/b/c")
	must(t, err)
	hold(rw.ReadLock().Acquire(ctxT(t)))
	hold(newMutex(t, connect(t), root+"/deep/x/y/z").Acquire(ctxT(t)))
	hold(newLayoutSem(t, connect(t), root+"/curator", 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator)).Acquire(ctxT(t)))
	kazoo := zklock.WithSemaphoreLayout(zklock.LayoutKazoo)
	kazooHeld := hold(newLayoutSem(t, connect(t), root+"/kazoo", 1, kazoo).Acquire(ctxT(t)))
	kazooWaiter := async(newLayoutSem(t, connect(t), root+"/kazoo", 1, kazoo).Acquire, ctxT(t))
	queued(t, c, root+"/kazoo-__lock__", 1)
	// A mutex whose path ends in "locks", as Curator's inner mutex does:
	// its parent is no Curator semaphore.
	hold(newMutex(t, connect(t), root+"/app/locks").Acquire(ctxT(t)))
	hold(newLayoutSem(t, connect(t), root+"/zsem", 2).Acquire(ctxT(t)))
	// An idle Curator semaphore: its leases/ and locks/ containers stay
	// until the server reaps them, with nobody in them.
	idle := newLayoutSem(t, connect(t), root+"/idle", 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	release(t, hold(idle.Acquire(ctxT(t))))
	mkAll(t, c, root+"/empty/idle")

	found, complete, err := zklock.FindLocks(ctxT(t), c, root, zklock.FindLimit{})
	must(t, err)
	want := []string{"a zklock 1/1", "app/locks zklock 1/0", "b/c zklock 1/0", "curator curator 1/0", "deep/x/y/z zklock 1/0",
		"kazoo kazoo 1/1", "zsem zklock 1/0"}
	if got := foundPaths(root, found); !complete || strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("FindLocks(%s) = %q, complete %v; want %q, complete", root, got, complete, want)
	}
	if ps := found[0].Participants; ps[0].Node == "" || ps[1].Holder || string(ps[0].Data) == "" {
		t.Errorf("participants of %s: %s", found[0].Path, describeParts(ps))
	}

	// Depth 1 reads root's children: b/c and deep/x/y/z lie deeper.
	found, complete, err = zklock.FindLocks(ctxT(t), c, root, zklock.FindLimit{Depth: 1})
	must(t, err)
	want = []string{"a zklock 1/1", "curator curator 1/0", "kazoo kazoo 1/1", "zsem zklock 1/0"}
	if got := foundPaths(root, found); complete || strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("FindLocks(%s, depth 1) = %q, complete %v; want %q, incomplete", root, got, complete, want)
	}
	// Depth 4 reaches deep/x/y/z: complete.
	_, complete, err = zklock.FindLocks(ctxT(t), c, root, zklock.FindLimit{Depth: 4})
	must(t, err)
	if !complete {
		t.Errorf("FindLocks(%s, depth 4): incomplete, want complete", root)
	}
	// Two nodes: root and its first child, a.
	found, complete, err = zklock.FindLocks(ctxT(t), c, root, zklock.FindLimit{Nodes: 2})
	must(t, err)
	if got := foundPaths(root, found); complete || strings.Join(got, ", ") != "a zklock 1/1" {
		t.Errorf("FindLocks(%s, 2 nodes) = %q, complete %v; want [a zklock 1/1], incomplete", root, got, complete)
	}

	// A lock path as root: itself, first.
	found, complete, err = zklock.FindLocks(ctxT(t), c, root+"/curator", zklock.FindLimit{})
	must(t, err)
	if got := foundPaths(root+"/curator", found); !complete || strings.Join(got, ", ") != ". curator 1/0" {
		t.Errorf("FindLocks of a Curator semaphore = %q, complete %v; want itself alone", got, complete)
	}
	// An idle path: nothing, complete.
	found, complete, err = zklock.FindLocks(ctxT(t), c, root+"/empty", zklock.FindLimit{})
	must(t, err)
	if len(found) != 0 || !complete {
		t.Errorf("FindLocks of an idle tree = %q, complete %v; want nothing, complete", foundPaths(root, found), complete)
	}
	release(t, first)
	release(t, await(t, waiter))
	release(t, kazooHeld)
	release(t, await(t, kazooWaiter))
}

// FindLocks of a path that does not exist fails with zk.ErrNoNode; bad
// arguments fail with ErrInvalidArgument before any call.
func TestFindLocksErrors(t *testing.T) {
	t.Parallel()
	c := connect(t)
	_, _, err := zklock.FindLocks(ctxT(t), c, lockPath(t), zklock.FindLimit{})
	mustIs(t, err, zk.ErrNoNode, "FindLocks of a missing path")
	for name, tc := range map[string]struct {
		root  string
		limit zklock.FindLimit
	}{
		"relative":       {"a/b", zklock.FindLimit{}},
		"trailing slash": {"/a/", zklock.FindLimit{}},
		"zookeeper":      {"/zookeeper", zklock.FindLimit{}},
		"negative depth": {"/a", zklock.FindLimit{Depth: -1}},
		"negative nodes": {"/a", zklock.FindLimit{Nodes: -1}},
	} {
		_, _, err := zklock.FindLocks(ctxT(t), c, tc.root, tc.limit)
		mustIs(t, err, zklock.ErrInvalidArgument, name)
		var oe *zklock.OpError
		if !errors.As(err, &oe) || oe.Op != "find locks" {
			t.Errorf("%s: %v is not an *OpError of find locks", name, err)
		}
	}
	// The root itself may be walked.
	_, _, err = zklock.FindLocks(ctxT(t), c, "/", zklock.FindLimit{Depth: 1})
	must(t, err, "FindLocks(/)")
}

// A node deleted between the read of its parent's children and its own
// read is passed over: FindLocks goes on with the rest.
func TestFakeFindLocksNodeGone(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	for _, p := range []string{"/r", "/r/a", "/r/a/x"} {
		must(t, f.Create(p, nil), "create %s", p)
	}
	l, err := newMutex(t, c, "/r/b").Acquire(ctxT(t))
	must(t, err)
	var once sync.Once
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Children" && op.Paths[0] == "/r/a" {
			once.Do(func() {
				must(t, f.Delete("/r/a/x"))
				must(t, f.Delete("/r/a"))
			})
		}
		return nil
	}})
	found, complete, err := zklock.FindLocks(ctxT(t), c, "/r", zklock.FindLimit{})
	must(t, err, "FindLocks with /r/a deleted under it")
	if got := foundPaths("/r", found); !complete || strings.Join(got, ", ") != "b zklock 1/0" {
		t.Errorf("FindLocks(/r) = %q, complete %v; want [b zklock 1/0], complete", got, complete)
	}
	f.SetHooks(zkfake.Hooks{})
	release(t, l)
}

// TestFakeFindLocksFromTheRoot: FindLocks of "/" on a Client without a
// chroot walks the whole tree (ZooKeeper's own /zookeeper left out) and
// finds a lock at any depth it allows.
func TestFakeFindLocksFromTheRoot(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/fr/app/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	found, _, err := zklock.FindLocks(ctxT(t), c, "/", zklock.FindLimit{})
	must(t, err, "FindLocks of /")
	if len(found) != 1 || found[0].Path != "/fr/app/lock" {
		t.Fatalf("FindLocks of / found %+v, want /fr/app/lock alone", found)
	}
	release(t, l)
}
