package zklock_test

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

func newLayoutSem(t testing.TB, c *zklock.Client, path string, max int, opts ...zklock.LockOption) *zklock.Semaphore {
	t.Helper()
	s, err := zklock.NewSemaphore(c, path, max, opts...)
	must(t, err, "new semaphore %s", path)
	return s
}

// isKazooID reports kazoo's uuid4().hex: 32 lower-case hex digits.
func isKazooID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// stat reads a node's stat, failing the test if it is not there.
func stat(t testing.TB, c *zklock.Client, path string) *zk.Stat {
	t.Helper()
	_, st, err := c.Conn().Get(path)
	must(t, err, "get %s", path)
	return st
}

// The Curator layout keeps Curator's nodes: the lease under <path>/leases,
// protected and ephemeral-sequential, its token the leases path's pzxid in
// the read that granted it (here, with nothing else under leases, its
// node's czxid); the inner
// mutex at <path>/locks is released once the lease is held. At most max hold at once, at every acquisition; a cancelled
// acquire leaves neither a lease node nor an inner lock node.
func TestSemaphoreLayoutCurator(t *testing.T) {
	t.Parallel()
	const max = 2
	path := lockPath(t)
	c := connect(t)
	s := newLayoutSem(t, connect(t), path, max, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	name := strings.TrimPrefix(l.Node(), path+"/leases/")
	if name == l.Node() || !strings.HasPrefix(name, "_c_") || !strings.Contains(name, "-lease-") {
		t.Fatalf("lease node %s: want %s/leases/_c_<uuid>-lease-<seq>", l.Node(), path)
	}
	st := stat(t, c, l.Node())
	if st.EphemeralOwner == 0 {
		t.Fatalf("lease node %s is not ephemeral", l.Node())
	}
	if l.Token() != st.Czxid {
		t.Fatalf("token %d, want the lease node's czxid %d", l.Token(), st.Czxid)
	}
	if kids := children(t, c, path+"/locks"); len(kids) != 0 {
		t.Fatalf("the inner mutex is still held: %v", kids)
	}

	// Full: the next acquire holds the inner mutex and waits on the leases;
	// cancelled, it leaves no node of either.
	l2, err := s.Acquire(ctxT(t))
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	waiting := async(s.Acquire, ctx)
	queued(t, c, path+"/leases", max+1)
	queued(t, c, path+"/locks", 1)
	_, err = s.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "TryAcquire while the inner mutex is held")
	cancel()
	r := returned(t, waiting)
	mustIs(t, r.err, context.Canceled)
	queued(t, c, path+"/leases", max)
	queued(t, c, path+"/locks", 0)
	release(t, l)
	release(t, l2)

	// The bound, over many cycles, in process and as ZooKeeper's children
	// show it: every holder's lease node is among the first max by
	// sequence. (Counting the children would count a waiter's node too:
	// Curator's layout creates it under the inner lock and then waits,
	// and under load it can appear before a holder's read.)
	var inside, over, cycles atomic.Int32
	hammer(t, 5, 8, func() contender {
		s := newLayoutSem(t, connect(t), path, max, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
		return contender{acquire: one(s.Acquire), held: func(ctx context.Context, ls []*zklock.Lease) error {
			cycles.Add(1)
			if inside.Add(1) > max {
				over.Add(1)
			}
			defer inside.Add(-1)
			// Hold a little, so that holders overlap and the bound is
			// exercised (not a wait for anything).
			time.Sleep(5 * time.Millisecond)
			kids, _, err := c.Conn().Children(path + "/leases")
			if err != nil {
				return err
			}
			mine := ls[0].Node()[len(path+"/leases/"):]
			ahead := 0 // lease nodes before ours, by sequence
			for _, k := range kids {
				if k[len(k)-10:] < mine[len(mine)-10:] {
					ahead++
				}
			}
			if ahead >= max {
				t.Errorf("lease node %s has %d nodes ahead of it, of %v", mine, ahead, kids)
				over.Add(1)
			}
			return nil
		}}
	})
	if n := over.Load(); n != 0 {
		t.Fatalf("more than %d holders, %d times in %d cycles", max, n, cycles.Load())
	}
	queued(t, c, path+"/leases", 0)
	queued(t, c, path+"/locks", 0)
}

// AcquireN under the Curator layout: n lease nodes, all or none, counted as
// n leases; n above the size is refused before any ZooKeeper call.
func TestSemaphoreLayoutCuratorAcquireN(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newLayoutSem(t, connect(t), path, 3, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	ls, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	if len(ls) != 2 {
		t.Fatalf("%d leases, want 2", len(ls))
	}
	_, err = s.TryAcquireN(ctxT(t), 2)
	mustIs(t, err, zklock.ErrLocked, "2 more of 3 with 2 held")
	queued(t, c, path+"/leases", 2)
	l, err := s.TryAcquire(ctxT(t))
	must(t, err, "the third lease")
	_, err = s.AcquireN(ctxT(t), 4)
	mustIs(t, err, zklock.ErrInvalidArgument)
	for _, l := range append(ls, l) {
		release(t, l)
	}
	queued(t, c, path+"/leases", 0)
}

// The size from a Curator SharedCount: created with the seed as a 4-byte
// big-endian int if absent, and followed: raising it lets a waiting
// acquire through.
func TestSemaphoreSharedCount(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	countPath := path + "-count"
	c := connect(t)
	opts := []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount(countPath)}
	s := newLayoutSem(t, connect(t), path, 1, opts...)
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	data, st, err := c.Conn().Get(countPath)
	must(t, err)
	if !slices.Equal(data, []byte{0, 0, 0, 1}) || st.EphemeralOwner != 0 {
		t.Fatalf("count node %s: data %v owner %#x, want [0 0 0 1], not ephemeral", countPath, data, st.EphemeralOwner)
	}
	waiting := async(newLayoutSem(t, connect(t), path, 1, opts...).Acquire, ctxT(t))
	queued(t, c, path+"/leases", 2)
	pending(t, waiting)
	two := make([]byte, 4)
	binary.BigEndian.PutUint32(two, 2)
	_, err = c.Conn().Set(countPath, two, -1)
	must(t, err)
	l2 := await(t, waiting)
	release(t, l)
	release(t, l2)

	// A count of fewer than 4 bytes is not a count.
	_, err = c.Conn().Set(countPath, []byte{7}, -1)
	must(t, err)
	_, err = s.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrInvalidArgument, "a 1-byte count")
	queued(t, c, path+"/leases", 0)
	queued(t, c, path+"/locks", 0)
}

// The kazoo layout keeps kazoo's nodes: <path> with the size as its
// decimal data, the lease an ephemeral plain <path>/<32 hex> whose
// token is its czxid, the lock at <path>-__lock__ released once
// the lease is held. At most max hold at once; a cancelled acquire leaves
// no node.
func TestSemaphoreLayoutKazoo(t *testing.T) {
	t.Parallel()
	const max = 2
	path := lockPath(t)
	lockDir := path + "-__lock__"
	c := connect(t)
	s := newLayoutSem(t, connect(t), path, max, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	if name := strings.TrimPrefix(l.Node(), path+"/"); !isKazooID(name) {
		t.Fatalf("lease node %s: want %s/<32 hex>", l.Node(), path)
	}
	st := stat(t, c, l.Node())
	if st.EphemeralOwner == 0 || l.Token() != st.Czxid {
		t.Fatalf("lease node %s: owner %#x czxid %d, token %d: want ephemeral, token = czxid", l.Node(), st.EphemeralOwner, st.Czxid, l.Token())
	}
	data, _, err := c.Conn().Get(path)
	must(t, err)
	if string(data) != "2" {
		t.Fatalf("%s: data %q, want \"2\"", path, data)
	}
	queued(t, c, lockDir, 0)

	l2, err := s.Acquire(ctxT(t))
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	waiting := async(s.Acquire, ctx)
	queued(t, c, lockDir, 1)
	lockNode := children(t, c, lockDir)[0]
	if i := strings.Index(lockNode, "__lock__"); i != 32 || !isKazooID(lockNode[:32]) {
		t.Fatalf("lock node %s: want kazoo's <32 hex>__lock__<seq>", lockNode)
	}
	_, err = s.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "TryAcquire while the lock is held")
	cancel()
	mustIs(t, returned(t, waiting).err, context.Canceled)
	queued(t, c, lockDir, 0)
	queued(t, c, path, max)
	release(t, l)
	release(t, l2)

	var inside, over atomic.Int32
	hammer(t, 5, 8, func() contender {
		s := newLayoutSem(t, connect(t), path, max, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
		return contender{acquire: one(s.Acquire), held: func(ctx context.Context, ls []*zklock.Lease) error {
			if inside.Add(1) > max {
				over.Add(1)
			}
			defer inside.Add(-1)
			kids, _, err := c.Conn().Children(path)
			if err != nil {
				return err
			}
			if len(kids) > max {
				over.Add(1)
			}
			return nil
		}}
	})
	if n := over.Load(); n != 0 {
		t.Fatalf("more than %d holders, %d times", max, n)
	}
	queued(t, c, path, 0)
	queued(t, c, lockDir, 0)

	// kazoo has no multi-lease acquire.
	_, err = s.AcquireN(ctxT(t), 2)
	mustIs(t, err, zklock.ErrInvalidArgument)
	ls, err := s.AcquireN(ctxT(t), 1)
	must(t, err)
	release(t, ls[0])
}

// The size check under the kazoo layout is kazoo's: a decimal number other
// than ours is refused (ErrSizeMismatch) before anything is created; data
// that is not a number is ignored, and left as it is. (zklock's own layout
// reads no size from the path: TestSemaphoreEmptiedPathTakesANewSize.)
func TestSemaphoreLayoutKazooSize(t *testing.T) {
	t.Parallel()
	c := connect(t)
	for _, tc := range []struct {
		data string
		ok   bool
	}{{"3", false}, {" 2\n", true}, {"+2", true}, {"a$", true}, {"", true}, {"1_0", false}} {
		path := lockPath(t)
		mkParents(t, c, path)
		_, err := c.Conn().Create(path, []byte(tc.data), 0, zk.WorldACL(zk.PermAll))
		must(t, err)
		s := newLayoutSem(t, connect(t), path, 2, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
		l, err := s.Acquire(ctxT(t))
		if !tc.ok {
			mustIs(t, err, zklock.ErrSizeMismatch, "data %q", tc.data)
			if exists, _, err := c.Conn().Exists(path + "-__lock__"); err != nil || exists {
				t.Fatalf("data %q: the refused acquire created the lock path (%v)", tc.data, err)
			}
			continue
		}
		must(t, err, "data %q", tc.data)
		release(t, l)
		if data, _, err := c.Conn().Get(path); err != nil || string(data) != tc.data {
			t.Fatalf("data %q became %q (%v)", tc.data, data, err)
		}
	}
}

// mkParents creates path's ancestors, persistent.
func mkParents(t testing.TB, c *zklock.Client, path string) {
	t.Helper()
	ps := parentsOf(path)
	for _, p := range ps[:len(ps)-1] {
		if _, err := c.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

// A path that shows another layout's nodes is refused with ErrUnknownNode,
// under each layout and for each other layout; under the Curator and kazoo
// layouts before anything is created, under zklock's with no node left.
func TestSemaphoreLayoutRefusals(t *testing.T) {
	t.Parallel()
	c := connect(t)
	layouts := []zklock.SemaphoreLayout{zklock.LayoutZklock, zklock.LayoutCurator, zklock.LayoutKazoo}
	for _, theirs := range layouts {
		for _, ours := range layouts {
			if theirs == ours {
				continue
			}
			path := lockPath(t)
			// A holder of their layout, from zklock itself.
			other := newLayoutSem(t, connect(t), path, 2, zklock.WithSemaphoreLayout(theirs))
			held, err := other.Acquire(ctxT(t))
			must(t, err, "%v holder", theirs)
			before := tree(t, c, path)
			s := newLayoutSem(t, connect(t), path, 2, zklock.WithSemaphoreLayout(ours))
			_, err = s.Acquire(ctxT(t))
			mustIs(t, err, zklock.ErrUnknownNode, "%v on a path of %v", ours, theirs)
			eventually(t, func() bool { return slices.Equal(tree(t, c, path), before) },
				"%v on a path of %v: want the tree as it was, %v", ours, theirs, before)
			release(t, held)
		}
	}
}

// tree lists the paths of path's subtree, path's sibling <path>-__lock__'s
// and their children, sorted.
func tree(t testing.TB, c *zklock.Client, path string) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		kids, _, err := c.Conn().Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		must(t, err)
		out = append(out, p)
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	_, _ = c.Conn().Sync(path)
	walk(path)
	walk(path + "-__lock__")
	slices.Sort(out)
	return out
}

// Bad layout options and arguments fail with ErrInvalidArgument before any
// ZooKeeper call: nothing is created.
func TestSemaphoreLayoutBadInput(t *testing.T) {
	t.Parallel()
	c := connect(t)
	path := lockPath(t)
	for name, opts := range map[string][]zklock.LockOption{
		"layout -1":                 {zklock.WithSemaphoreLayout(-1)},
		"layout 3":                  {zklock.WithSemaphoreLayout(3)},
		"count path relative":       {zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("count")},
		"count path empty":          {zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("")},
		"count with kazoo":          {zklock.WithSemaphoreLayout(zklock.LayoutKazoo), zklock.WithSharedCount("/count")},
		"count with zklock layout":  {zklock.WithSharedCount("/count")},
		"count with default layout": {zklock.WithSemaphoreLayout(zklock.LayoutZklock), zklock.WithSharedCount("/count")},
	} {
		_, err := zklock.NewSemaphore(c, path, 2, opts...)
		mustIs(t, err, zklock.ErrInvalidArgument, name)
	}
	_, err := zklock.NewMutex(c, path, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	mustIs(t, err, zklock.ErrInvalidArgument, "a layout for a mutex")
	_, err = zklock.NewRWMutex(c, path, zklock.WithSharedCount("/count"))
	mustIs(t, err, zklock.ErrInvalidArgument, "a shared count for an RW mutex")

	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		s := newLayoutSem(t, c, path, 2, zklock.WithSemaphoreLayout(layout))
		for _, n := range []int{0, -1, 3} {
			_, err := s.AcquireN(ctxT(t), n)
			mustIs(t, err, zklock.ErrInvalidArgument, "%v AcquireN(%d)", layout, n)
			_, err = s.TryAcquireN(ctxT(t), n)
			mustIs(t, err, zklock.ErrInvalidArgument, "%v TryAcquireN(%d)", layout, n)
		}
		//lint:ignore SA1012 a nil context is exactly the bad input under test
		_, err := s.Acquire(nil)
		mustIs(t, err, zklock.ErrInvalidArgument, "%v nil context", layout)
	}
	if got := tree(t, c, path); len(got) != 0 {
		t.Fatalf("bad input created nodes: %v", got)
	}
	if exists, _, err := c.Conn().Exists("/count"); err != nil || exists {
		t.Fatalf("bad input created /count (%v)", err)
	}
}
