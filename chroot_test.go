package zklock_test

// The chroot on a real server (the same on internal/zkfake:
// chroot_fake_test.go): a connect string that ends in a chroot roots every
// path, makes the chroot if it is missing, and returns every path relative
// to it; a Client without the chroot meets the same lock at the full path.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zklock"
)

// chrooted connects a Client under root, which the connect string's last
// server carries.
func chrooted(t testing.TB, root string, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	srv := append([]string(nil), servers(t)...)
	srv[len(srv)-1] += root
	c, err := zklock.Connect(ctxT(t), srv, opts...)
	must(t, err, "connect under %s", root)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestChrootCreatedAndShared(t *testing.T) {
	ctx := ctxT(t)
	root := strings.TrimSuffix(lockPath(t), "/lock") + "/apps/billing" // missing, parents and all
	var mu sync.Mutex
	var traced []string
	record := func(i zklock.AcquireInfo) { mu.Lock(); traced = append(traced, i.Path, i.Node); mu.Unlock() }
	inner := chrooted(t, root, zklock.WithTrace(&zklock.Trace{Queued: record, Acquired: record}))
	outer := connect(t)
	if ok, _, err := outer.Conn().Exists(root); err != nil || ok {
		t.Fatalf("the chroot %s exists (%v) before the test made anything", root, err)
	}

	mi, err := zklock.NewMutex(inner, "/locks/x")
	must(t, err)
	mo, err := zklock.NewMutex(outer, root+"/locks/x")
	must(t, err)
	l, err := mi.Acquire(ctx)
	must(t, err, "acquire under a chroot that does not exist")
	if !strings.HasPrefix(l.Node(), "/locks/x/_c_") {
		t.Fatalf("Node() = %q, want it relative to the chroot", l.Node())
	}
	// Client.Conn is not chrooted: the node is at the full path there.
	if ok, st, err := inner.Conn().Exists(root + l.Node()); err != nil || !ok || st.EphemeralOwner != inner.SessionID() {
		t.Fatalf("%s through the raw connection: exists %v, %v", root+l.Node(), ok, err)
	}
	_, err = mo.TryAcquire(ctx)
	mustIs(t, err, zklock.ErrLocked, "the Client without the chroot, on the full path")
	ps, err := zklock.Participants(ctx, outer, root+"/locks/x")
	must(t, err)
	if len(ps) != 1 || ps[0].Node != root+l.Node() || !ps[0].Holder {
		t.Fatalf("participants seen without the chroot: %+v, want the holder %s", ps, root+l.Node())
	}
	ps, err = zklock.Participants(ctx, inner, "/locks/x")
	must(t, err)
	if len(ps) != 1 || ps[0].Node != l.Node() {
		t.Fatalf("participants seen under the chroot: %+v, want %s", ps, l.Node())
	}
	_, err = mi.TryAcquire(ctx)
	var op *zklock.OpError
	if !errors.As(err, &op) || op.Path != "/locks/x" || strings.Contains(err.Error(), root) {
		t.Fatalf("TryAcquire: %v, want an *OpError on /locks/x, naming no chroot", err)
	}

	// Waiters on each side are woken by the other side's release: the
	// chrooted Client's watch events come back relative to it.
	wo := async(mo.Acquire, ctx)
	queued(t, outer, root+"/locks/x", 2)
	release(t, l)
	lo := await(t, wo)
	wi := async(mi.Acquire, ctx)
	queued(t, outer, root+"/locks/x", 2)
	release(t, lo)
	li := await(t, wi)
	mustLive(t, li)

	// A held node deleted from outside ends the lease, named relative.
	must(t, outer.Conn().Delete(root+li.Node(), -1))
	mustIs(t, doneWithin(t, li), zklock.ErrNodeDeleted)
	if strings.Contains(li.Err().Error(), root) {
		t.Fatalf("Err() = %v names the chroot", li.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range traced {
		if strings.HasPrefix(p, root) {
			t.Fatalf("a Trace event names %s, not relative to the chroot", p)
		}
	}
}

// An election's leader, seen from under the chroot and from outside it.
func TestChrootElection(t *testing.T) {
	ctx := ctxT(t)
	root := strings.TrimSuffix(lockPath(t), "/lock")
	inner := chrooted(t, root)
	outer := connect(t)
	e, err := zklock.NewElection(inner, "/leader")
	must(t, err)
	lead, err := e.Campaign(ctx)
	must(t, err)
	p, err := e.Leader(ctx)
	must(t, err)
	if p.Node != lead.Node() || !strings.HasPrefix(p.Node, "/leader/") {
		t.Fatalf("Leader().Node = %q, lease %q: want one node, relative", p.Node, lead.Node())
	}
	eo, err := zklock.NewElection(outer, root+"/leader")
	must(t, err)
	po, err := eo.Leader(ctx)
	must(t, err)
	if po.Node != root+lead.Node() {
		t.Fatalf("the leader seen without the chroot: %q, want %q", po.Node, root+lead.Node())
	}
	release(t, lead)
	_, err = e.Leader(ctx)
	mustIs(t, err, zklock.ErrNoLeader)
}

// A chroot of "/" is none.
func TestChrootSlashIsNone(t *testing.T) {
	c := chrooted(t, "/")
	if c.Chroot() != "" {
		t.Fatalf("Chroot() = %q, want none", c.Chroot())
	}
	path := lockPath(t)
	m, err := zklock.NewMutex(c, path)
	must(t, err)
	l, err := m.Acquire(context.Background())
	must(t, err)
	defer release(t, l)
	if !strings.HasPrefix(l.Node(), path+"/") {
		t.Fatalf("Node() = %q, want it under %s", l.Node(), path)
	}
}
