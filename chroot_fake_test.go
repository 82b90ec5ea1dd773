package zklock_test

// The chroot on internal/zkfake: a Client whose connect string ends in a
// chroot sees every path relative to it, and meets a Client without one at
// the full path. The same on a real server: chroot_test.go.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

const fakeRoot = "/apps/billing"

// fakeChrootClient opens a Client on f under the chroot root.
func fakeChrootClient(t testing.TB, f *zkfake.Server, root string, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{"zkfake" + root}, append([]zklock.Option{zklock.WithFakeForTest(f)}, opts...)...)
	must(t, err, "connect to the fake under %s", root)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A missing chroot is made, as containers, by the first lock that needs
// it; everything the chrooted Client returns is relative to it; a Client
// without the chroot sees the holder at the full path, is excluded by it,
// and excludes it.
func TestFakeChrootRelativeAndShared(t *testing.T) {
	ctx := ctxT(t)
	f := zkfake.New()
	var mu sync.Mutex
	var traced []string
	inner := fakeChrootClient(t, f, fakeRoot, zklock.WithTrace(&zklock.Trace{
		Acquired: func(i zklock.AcquireInfo) { mu.Lock(); traced = append(traced, i.Path, i.Node); mu.Unlock() },
		Released: func(i zklock.LeaseInfo) { mu.Lock(); traced = append(traced, i.Path, i.Node); mu.Unlock() },
	}))
	if got := inner.Chroot(); got != fakeRoot {
		t.Fatalf("Chroot() = %q, want %q", got, fakeRoot)
	}
	outer := fakeClient(t, f)
	if f.Exists("/apps") {
		t.Fatal("the chroot exists before any lock needed it")
	}

	mi, err := zklock.NewMutex(inner, "/locks/x")
	must(t, err)
	mo, err := zklock.NewMutex(outer, fakeRoot+"/locks/x")
	must(t, err)

	l, err := mi.Acquire(ctx)
	must(t, err, "acquire under the chroot")
	if !strings.HasPrefix(l.Node(), "/locks/x/_c_") {
		t.Fatalf("Node() = %q, want it relative to the chroot, under /locks/x", l.Node())
	}
	if kids := f.Children(fakeRoot + "/locks/x"); len(kids) != 1 || fakeRoot+"/locks/x/"+kids[0] != fakeRoot+l.Node() {
		t.Fatalf("on the server, %s/locks/x holds %v, want the lease's node %s", fakeRoot, kids, fakeRoot+l.Node())
	}
	for _, p := range []string{"/apps", fakeRoot} {
		if f.Owner(p) != 0 || !f.Exists(p) {
			t.Fatalf("%s: want a node of no session, made for the chroot", p)
		}
	}

	_, err = mo.TryAcquire(ctx)
	mustIs(t, err, zklock.ErrLocked, "the Client without the chroot, on the full path")
	ps, err := mo.Participants(ctx)
	must(t, err)
	if len(ps) != 1 || ps[0].Node != fakeRoot+l.Node() || !ps[0].Holder {
		t.Fatalf("the outer Client's participants %+v, want the holder at %s", ps, fakeRoot+l.Node())
	}
	ps, err = mi.Participants(ctx)
	must(t, err)
	if len(ps) != 1 || ps[0].Node != l.Node() {
		t.Fatalf("the chrooted Client's participants %+v, want %s", ps, l.Node())
	}

	_, err = mi.TryAcquire(ctx)
	var op *zklock.OpError
	if !errors.As(err, &op) || !errors.Is(err, zklock.ErrLocked) || op.Path != "/locks/x" {
		t.Fatalf("TryAcquire: %v (%+v), want an *OpError on /locks/x wrapping ErrLocked", err, op)
	}

	// A waiter under the chroot is woken by a release outside it.
	must(t, l.Release(ctx))
	lo, err := mo.Acquire(ctx)
	must(t, err, "the outer Client after the release")
	got := make(chan *zklock.Lease, 1)
	go func() {
		li, err := mi.Acquire(ctx)
		if err != nil {
			t.Errorf("the chrooted waiter: %v", err)
		}
		got <- li
	}()
	fakeQueued(t, f, fakeRoot+"/locks/x", 2)
	must(t, lo.Release(ctx))
	li := <-got
	if li == nil {
		t.FailNow()
	}
	mustLive(t, li)
	must(t, li.Release(ctx))

	mu.Lock()
	defer mu.Unlock()
	for _, p := range traced {
		if strings.HasPrefix(p, fakeRoot) {
			t.Fatalf("a Trace event names %q, not relative to the chroot", p)
		}
	}
	if len(traced) == 0 {
		t.Fatal("no Trace event")
	}
}

// A held node deleted from outside ends the lease: the watch event's path
// is the server's, and the Session maps it back under the chroot to find
// the lease. The keeper's checks, which would find the node gone too, fail
// here, so only the event can tell (a lease whose checks fail ends at its
// deadline with ErrLeaseExpired, not ErrNodeDeleted).
func TestFakeChrootDeletedNodeEndsLease(t *testing.T) {
	ctx := ctxT(t)
	f := zkfake.New()
	c := fakeChrootClient(t, f, fakeRoot, zklock.WithSessionTimeout(2*time.Second))
	m, err := zklock.NewMutex(c, "/a")
	must(t, err)
	l, err := m.Acquire(ctx)
	must(t, err)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Check" {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	must(t, f.Delete(fakeRoot+l.Node()), "delete the held node from outside")
	mustIs(t, doneWithin(t, l), zklock.ErrNodeDeleted)
	if err := l.Err(); !strings.Contains(err.Error(), " "+l.Node()) || strings.Contains(err.Error(), fakeRoot) {
		t.Fatalf("Err() = %v, want it to name %s, relative", err, l.Node())
	}
}

// A chroot the server reaped (a container whose last child went) is made
// again by the next lock that needs it.
func TestFakeChrootReapedIsMadeAgain(t *testing.T) {
	ctx := ctxT(t)
	f := zkfake.New()
	c := fakeChrootClient(t, f, fakeRoot)
	m, err := zklock.NewMutex(c, "/a/b")
	must(t, err)
	l, err := m.Acquire(ctx)
	must(t, err)
	must(t, l.Release(ctx))
	for len(f.ReapContainers()) > 0 { // the lock path, then each parent in turn
	}
	if f.Exists(fakeRoot) {
		t.Fatalf("the chroot was not reaped: %v", f.Nodes())
	}
	l, err = m.Acquire(ctx)
	must(t, err, "acquire once the chroot is gone")
	must(t, l.Release(ctx))
}

// Every recipe's paths are under the chroot: an election's leader, a
// revocation, a SharedCount and a semaphore of each layout.
func TestFakeChrootRecipes(t *testing.T) {
	ctx := ctxT(t)
	f := zkfake.New()
	c := fakeChrootClient(t, f, fakeRoot)

	e, err := zklock.NewElection(c, "/leader")
	must(t, err)
	lead, err := e.Campaign(ctx)
	must(t, err)
	p, err := e.Leader(ctx)
	must(t, err)
	if p.Node != lead.Node() || strings.HasPrefix(p.Node, fakeRoot) || !strings.HasPrefix(p.Node, "/leader/") {
		t.Fatalf("Leader().Node = %q, lease node %q: want one relative path under /leader", p.Node, lead.Node())
	}
	must(t, zklock.Revoke(ctx, c, lead.Node()), "revoke by the relative node")
	select {
	case <-lead.Revoked():
	case <-ctx.Done():
		t.Fatal("the leader was not asked to let go")
	}
	must(t, lead.Release(ctx))

	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutZklock, zklock.LayoutCurator, zklock.LayoutKazoo} {
		opts := []zklock.LockOption{zklock.WithSemaphoreLayout(layout)}
		if layout == zklock.LayoutCurator {
			opts = append(opts, zklock.WithSharedCount("/counts/sem"))
		}
		path := "/sem/" + strings.ToLower(layoutName(layout))
		s, err := zklock.NewSemaphore(c, path, 2, opts...)
		must(t, err)
		l, err := s.Acquire(ctx)
		must(t, err, "semaphore, layout %d", layout)
		if !strings.HasPrefix(l.Node(), path+"/") || !f.Exists(fakeRoot+l.Node()) {
			t.Fatalf("layout %d: lease node %q, want it under %s, and %s on the server", layout, l.Node(), path, fakeRoot+l.Node())
		}
		must(t, l.Release(ctx))
	}
	if !f.Exists(fakeRoot + "/counts/sem") {
		t.Fatalf("the SharedCount is not under the chroot: %v", f.Nodes())
	}
	for _, n := range f.Nodes() {
		if n != "/" && n != "/apps" && !strings.HasPrefix(n, fakeRoot) {
			t.Fatalf("%s is outside the chroot", n)
		}
	}
}

func layoutName(l zklock.SemaphoreLayout) string {
	return [...]string{"zklock", "curator", "kazoo"}[l]
}
