package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// want is one expected participant: the node it is (a lease's Node(),
// or a directory prefix for a node the test did not name) and whether it
// holds.
type want struct {
	node   string // the node, or the prefix of its path when prefix is set
	prefix bool
	holds  bool
	kind   zklock.Kind
}

// checkParticipants waits until zklock.Participants(path) lists exactly
// want, in order.
func checkParticipants(t *testing.T, c *zklock.Client, path string, wants ...want) []zklock.Participant {
	t.Helper()
	var got []zklock.Participant
	match := func() bool {
		var err error
		got, err = zklock.Participants(ctxT(t), c, path)
		must(t, err, "participants of %s", path)
		if len(got) != len(wants) {
			return false
		}
		for i, w := range wants {
			p := got[i]
			nodeOK := p.Node == w.node || (w.prefix && strings.HasPrefix(p.Node, w.node))
			if !nodeOK || p.Holder != w.holds || p.Kind != w.kind {
				return false
			}
		}
		return true
	}
	if !poll(match) {
		t.Fatalf("participants of %s:\n%s\nwant:\n%+v", path, describeParts(got), wants)
	}
	return got
}

// poll polls cond, as eventually does, and reports whether it came true
// within long.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(long)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

func describeParts(ps []zklock.Participant) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %s holds=%v kind=%v data=%q\n", p.Node, p.Holder, p.Kind, p.Data)
	}
	return b.String()
}

// The Curator layout: the lease nodes hold, except those of the inner
// mutex's holder, which waits for the count with them; the mutex's other
// nodes wait behind it. Once a holder leaves, the waiting acquire holds and
// the next one takes the mutex and waits with its own lease node.
func TestParticipantsCuratorLayout(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	curator := zklock.WithSemaphoreLayout(zklock.LayoutCurator)
	a, err := newLayoutSem(t, connect(t), path, 1, curator).Acquire(ctxT(t))
	must(t, err)
	b := async(newLayoutSem(t, connect(t), path, 1, curator).Acquire, ctxT(t))
	queued(t, c, path+"/leases", 2) // b holds the mutex and waits for the count
	cl := async(newLayoutSem(t, connect(t), path, 1, curator).Acquire, ctxT(t))
	queued(t, c, path+"/locks", 2)

	checkParticipants(t, c, path,
		want{node: a.Node(), holds: true, kind: zklock.KindLease},
		want{node: path + "/leases/", prefix: true, kind: zklock.KindLease},
		want{node: path + "/locks/", prefix: true, kind: zklock.KindMutex})

	release(t, a)
	bl := await(t, b)
	checkParticipants(t, c, path,
		want{node: bl.Node(), holds: true, kind: zklock.KindLease},
		want{node: path + "/leases/", prefix: true, kind: zklock.KindLease})
	pending(t, cl)
	release(t, bl)
	release(t, await(t, cl))
	checkParticipants(t, c, path)
}

// Under the Curator layout, AcquireN's n nodes wait together; the leases
// that the mutex holder's session created before it queued for the mutex
// hold (one Client's two acquires).
func TestParticipantsCuratorLayoutAcquireN(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newLayoutSem(t, connect(t), path, 3, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
	held, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	waiting, ctx := make(chan error, 1), ctxT(t)
	go func() {
		ls, err := s.AcquireN(ctx, 2)
		for _, l := range ls {
			_ = l.Release(context.Background())
		}
		waiting <- err
	}()
	queued(t, c, path+"/leases", 4)
	checkParticipants(t, c, path,
		want{node: held[0].Node(), holds: true, kind: zklock.KindLease},
		want{node: held[1].Node(), holds: true, kind: zklock.KindLease},
		want{node: path + "/leases/", prefix: true, kind: zklock.KindLease},
		want{node: path + "/leases/", prefix: true, kind: zklock.KindLease})
	release(t, held[0])
	release(t, held[1])
	select {
	case err := <-waiting:
		must(t, err, "AcquireN(2) once two leases are free")
	case <-ctx.Done():
		t.Fatal("AcquireN(2) did not return")
	}
}

// A lease node that another session created after the mutex's holder
// queued is not the holder's: it holds. (The holder of the mutex has
// created no lease yet: as between a Curator acquire's grant of the mutex
// and its create.)
func TestParticipantsCuratorLayoutOtherSession(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c, mutexHolder, leaseHolder := connect(t), connect(t), connect(t)
	mkAll(t, c, path+"/locks")
	mkAll(t, c, path+"/leases")
	lock, err := mutexHolder.Conn().Create(path+"/locks/_c_00000000-0000-4000-8000-000000000001-lock-", nil,
		zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	must(t, err)
	lease, err := leaseHolder.Conn().Create(path+"/leases/_c_00000000-0000-4000-8000-000000000002-lease-", nil,
		zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	must(t, err)
	checkParticipants(t, c, path,
		want{node: lease, holds: true, kind: zklock.KindLease},
		want{node: lock, kind: zklock.KindMutex})

	// The same two nodes of one session: the lease is the mutex holder's.
	must(t, leaseHolder.Conn().Delete(lease, -1))
	lease, err = mutexHolder.Conn().Create(path+"/leases/_c_00000000-0000-4000-8000-000000000003-lease-", nil,
		zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	must(t, err)
	checkParticipants(t, c, path, want{node: lease, kind: zklock.KindLease})
	must(t, mutexHolder.Conn().Delete(lease, -1))
	must(t, mutexHolder.Conn().Delete(lock, -1))
}

// The kazoo layout: every lease node holds, in the order they were
// created; the acquires queued on <path>-__lock__ wait, the first of them
// for a free lease.
func TestParticipantsKazooLayout(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	t.Cleanup(func() {
		_ = c.Conn().Delete(path+"-__lock__", -1)
		_ = c.Conn().Delete(path, -1)
	})
	kazoo := zklock.WithSemaphoreLayout(zklock.LayoutKazoo)
	sem := func() *zklock.Semaphore { return newLayoutSem(t, connect(t), path, 4, kazoo) }
	// Four holders: their nodes' names are random, their order is their
	// creation's.
	var early []*zklock.Lease
	for i := 0; i < 3; i++ {
		l, err := sem().Acquire(ctxT(t))
		must(t, err)
		early = append(early, l)
	}
	a := early[0]
	b, err := sem().Acquire(ctxT(t))
	must(t, err)
	w1 := async(sem().Acquire, ctxT(t))
	queued(t, c, path+"-__lock__", 1)
	w2 := async(sem().Acquire, ctxT(t))
	queued(t, c, path+"-__lock__", 2)

	queue := children(t, c, path+"-__lock__")
	// kazoo's <32 hex>__lock__<seq>: in queue order by what follows the id.
	slices.SortFunc(queue, func(a, b string) int { return strings.Compare(a[32:], b[32:]) })
	checkParticipants(t, c, path,
		want{node: early[0].Node(), holds: true, kind: zklock.KindLease},
		want{node: early[1].Node(), holds: true, kind: zklock.KindLease},
		want{node: early[2].Node(), holds: true, kind: zklock.KindLease},
		want{node: b.Node(), holds: true, kind: zklock.KindLease},
		want{node: path + "-__lock__/" + queue[0], kind: zklock.KindMutex},
		want{node: path + "-__lock__/" + queue[1], kind: zklock.KindMutex})

	release(t, b)
	l1 := await(t, w1)
	checkParticipants(t, c, path,
		want{node: early[0].Node(), holds: true, kind: zklock.KindLease},
		want{node: early[1].Node(), holds: true, kind: zklock.KindLease},
		want{node: early[2].Node(), holds: true, kind: zklock.KindLease},
		want{node: l1.Node(), holds: true, kind: zklock.KindLease},
		want{node: path + "-__lock__/", prefix: true, kind: zklock.KindMutex})
	release(t, a)
	release(t, await(t, w2))
	for _, l := range append(early[1:], l1) {
		release(t, l)
	}
	checkParticipants(t, c, path)
}

// A path whose children merely share the Curator layout's names ("locks",
// "leases" holding other things: a plain node, a mutex's nodes) or kazoo's
// (32 hex digits, with no kazoo lock next to it) is not a semaphore: it has
// no participants of its own.
func TestParticipantsNotALayout(t *testing.T) {
	t.Parallel()
	root := lockPath(t)
	c := connect(t)
	hex := strings.Repeat("ab", 16)
	for _, p := range []string{root + "/curator/leases/pool", root + "/curator/locks", root + "/kazoo/" + hex, root + "/mutexes/locks"} {
		mkAll(t, c, p)
	}
	for _, p := range []string{root + "/curator/leases/pool", root + "/mutexes/leases"} {
		l, err := newMutex(t, c, p).Acquire(ctxT(t))
		must(t, err)
		defer release(t, l)
	}
	for _, p := range []string{root + "/curator", root + "/kazoo", root + "/mutexes"} {
		ps, err := zklock.Participants(ctxT(t), c, p)
		must(t, err, "participants of %s", p)
		if len(ps) != 0 {
			t.Errorf("participants of %s, not a semaphore: %s", p, describeParts(ps))
		}
	}
}

// mkAll creates p and its missing ancestors, persistent, and deletes
// them when the test ends, deepest first.
func mkAll(t testing.TB, c *zklock.Client, p string) {
	t.Helper()
	for _, q := range parentsOf(p) {
		if _, err := c.Conn().Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", q, err)
		}
		t.Cleanup(func() { _ = c.Conn().Delete(q, -1) })
	}
}
