package session_test

// A lease's extras (Hold.Attach: a registry entry, a marker) go with its
// nodes, and never before them: a reader counting entries must not
// under-count a live holder.

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// extraOrder watches the fake's ops for a delete of extra while node
// exists (a DeleteAll of both is one transaction: fine), and fails the
// ops its rules say.
type extraOrder struct {
	f           *zkfake.Server
	node, extra string
	log         opLog

	mu      sync.Mutex
	early   []string           // ops that would delete extra before node
	fails   map[string]failing // the answers to single deletes, by path
	failAll bool               // every DeleteAll fails (a connection loss)
	tries   map[string]int     // single deletes tried, by path
}

// failing is what a path's single deletes get: the first tries, first in
// order, and every later one, then.
type failing struct {
	first []error
	then  error
}

// lossesThen is n connection losses, then err (nil: deleted).
func lossesThen(n int, err error) failing {
	f := failing{then: err}
	for i := 0; i < n; i++ {
		f.first = append(f.first, zk.ErrConnectionClosed)
	}
	return f
}

func watchExtraOrder(f *zkfake.Server, node, extra string) *extraOrder {
	o := &extraOrder{f: f, node: node, extra: extra, fails: map[string]failing{}, tries: map[string]int{}}
	f.SetHooks(zkfake.Hooks{Before: o.before})
	return o
}

func (o *extraOrder) before(op zkfake.Op) error {
	o.log.add(op)
	if op.Name != "Delete" && op.Name != "DeleteAll" {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if slices.Contains(op.Paths, o.extra) && !slices.Contains(op.Paths, o.node) && o.f.Exists(o.node) {
		o.early = append(o.early, op.Name)
	}
	if op.Name == "DeleteAll" && o.failAll {
		return zk.ErrConnectionClosed
	}
	if op.Name != "Delete" {
		return nil
	}
	p := op.Paths[0]
	o.tries[p]++
	fl := o.fails[p]
	if len(fl.first) > 0 {
		o.fails[p] = failing{fl.first[1:], fl.then}
		return fl.first[0]
	}
	return fl.then
}

// set has every DeleteAll fail, and path's single deletes answered as fl
// says.
func (o *extraOrder) set(path string, fl failing) {
	o.mu.Lock()
	o.fails[path], o.failAll = fl, true
	o.mu.Unlock()
}

// check fails the test if extra was deleted, or its delete sent, while
// node existed.
func (o *extraOrder) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.early) > 0 {
		t.Fatalf("the extra's delete went out while the node existed: %v", o.early)
	}
}

// holdWithExtra holds node, with extra (an ephemeral of the same session)
// attached.
func holdWithExtra(t *testing.T, s *session.Session, node, extra string) *session.Hold {
	t.Helper()
	h := hold(t, s, []string{node})[0]
	makeNodes(t, s, extra)
	h.Attach(extra)
	if got := h.Nodes(); !slices.Equal(got, []string{node}) {
		t.Fatalf("Nodes after Attach: %v, want the lease's node alone", got)
	}
	return h
}

// Release deletes the lease's node and its extra in one multi, the node
// first.
func TestReleaseDeletesTheExtraWithTheNode(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := holdWithExtra(t, s, "/x/n", "/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	must(t, h.Release(ctxT(t)), "release")
	if f.Exists("/x/n") || f.Exists("/x/_holders/r-n") {
		t.Fatalf("after the release: %v", f.Nodes())
	}
	o.log.mu.Lock()
	ops := slices.Clone(o.log.ops)
	o.log.mu.Unlock()
	if len(ops) != 1 || ops[0].Name != "DeleteAll" || !slices.Equal(ops[0].Paths, []string{"/x/n", "/x/_holders/r-n"}) {
		t.Fatalf("the release sent %+v, want one DeleteAll of the node, then the extra", ops)
	}
}

// When the multi fails and the node's own delete meets a connection loss,
// the extra waits: Release deletes it once the node is gone, not before.
func TestReleaseDeletesTheExtraOnlyAfterTheNode(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := holdWithExtra(t, s, "/x/n", "/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	o.set("/x/n", lossesThen(2, nil))
	must(t, h.Release(ctxT(t)), "release")
	o.check(t)
	if f.Exists("/x/n") || f.Exists("/x/_holders/r-n") {
		t.Fatalf("after the release: %v", f.Nodes())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tries["/x/n"] != 3 {
		t.Fatalf("the node's delete was tried %d times, want 3 (two failed): the test shows nothing", o.tries["/x/n"])
	}
}

// A node that cannot be deleted for good keeps its extra: it stays with
// the node until the session ends (which deletes both in one transaction).
func TestReleaseKeepsTheExtraOfAnUndeletableNode(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := holdWithExtra(t, s, "/x/n", "/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	o.set("/x/n", failing{then: zk.ErrNoAuth})
	err := h.Release(ctxT(t))
	var ne *session.NodeError
	if !errors.As(err, &ne) || ne.Node != "/x/n" {
		t.Fatalf("release of an undeletable node: %v, want a *NodeError naming it", err)
	}
	o.check(t)
	if !f.Exists("/x/_holders/r-n") {
		t.Fatal("the extra of an undeletable node was deleted")
	}
	if jobs := s.JanitorJobs(); len(jobs) != 0 {
		t.Fatalf("the janitor has %+v; nothing is to be retried", jobs)
	}
}

// Of a lease of several nodes, one undeletable keeps the extra, even once
// the others, retried, are gone: also when it is found undeletable on a
// retry, after a round that left the extra waiting behind it.
func TestReleaseKeepsTheExtraOfAnUndeletableNodeAmongSeveral(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/x/a", "/y/b"})[0]
	makeNodes(t, s, "/x/_holders/r-a")
	h.Attach("/x/_holders/r-a")
	o := watchExtraOrder(f, "/x/a", "/x/_holders/r-a")
	o.set("/x/a", lossesThen(1, zk.ErrNoAuth))
	o.set("/y/b", lossesThen(3, nil))
	err := h.Release(ctxT(t))
	var ne *session.NodeError
	if !errors.As(err, &ne) || ne.Node != "/x/a" {
		t.Fatalf("release of an undeletable node: %v, want a *NodeError naming it", err)
	}
	o.check(t)
	if f.Exists("/y/b") || !f.Exists("/x/_holders/r-a") {
		t.Fatalf("after the release: %v; want /y/b gone, the extra kept with /x/a", f.Nodes())
	}
}

// Releases queued behind a delete in flight go out in one multi with their
// extras.
func TestReleaseBatchCarriesTheExtras(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	hs := hold(t, s, []string{"/q/a"}, []string{"/q/b"}, []string{"/q/c"})
	makeNodes(t, s, "/q/_holders/r-b", "/q/_holders/r-c")
	hs[1].Attach("/q/_holders/r-b")
	hs[2].Attach("/q/_holders/r-c")
	var log opLog
	unblock := blockDeletes(f, &log, "/q/a")
	first := releaseAsync(ctxT(t), hs[0])
	eventually(t, func() bool { return log.count("Delete", "/q/a") == 1 }, "the first delete in flight")
	queued := queueBehind(t, s, ctxT(t), hs[1], hs[2])
	unblock()
	must(t, awaitRelease(t, first, "the first release").err, "the first release")
	for i, ch := range queued {
		must(t, awaitRelease(t, ch, "a queued release").err, "release ", i)
	}
	if got := log.sizes("DeleteAll"); !slices.Equal(got, []int{4}) {
		t.Fatalf("the queued releases sent DeleteAlls of %v paths, want one of 4", got)
	}
	if left := f.Children("/q/_holders"); len(left) != 0 || f.Exists("/q/b") || f.Exists("/q/c") {
		t.Fatalf("after the batch: %v", f.Nodes())
	}
}

// A lease with extras never hands off: HandOff deletes the node alone.
func TestReleaseWithAnExtraDoesNotHandOff(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/x/n", "/x/_holders/r-n")
	_, _, err := s.Conn().GetW("/x/n")
	must(t, err, "watch the node")
	h := grantWith(t, s, session.Grant{Groups: [][]string{{"/x/n"}}, Token: 1,
		Covers: []session.Cover{{Own: true}}, Handoffs: []string{"/x/_g_n_"}})
	h.Attach("/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	must(t, h.Release(ctxT(t)), "release")
	if n := o.log.count("HandOff", ""); n != 0 {
		t.Fatalf("a lease with an extra handed off (%d)", n)
	}
	if f.Exists("/x/n") || f.Exists("/x/_holders/r-n") {
		t.Fatalf("after the release: %v", f.Nodes())
	}
}

// A lease lost while its session lives (its node deleted by someone else)
// has its extra deleted by the janitor.
func TestLostLeaseHasItsExtraDeleted(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := holdWithExtra(t, s, "/x/n", "/x/_holders/r-n")
	must(t, f.Delete("/x/n"), "delete the held node")
	returnedWithin(t, h.Done(), "the lease of a deleted node")
	eventually(t, func() bool { return !f.Exists("/x/_holders/r-n") }, "the janitor deletes the lost lease's extra")
}

// An extra attached to a lease that has ended already (lost between its
// grant and the registration) is deleted by the janitor after the lease's
// nodes: here the node is made again once the loss's own cleanup is done,
// so that the order shows.
func TestAttachToAnEndedLease(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/x/n"})[0]
	must(t, f.Delete("/x/n"), "delete the held node")
	returnedWithin(t, h.Done(), "the lease of a deleted node")
	_ = s.State() // the loss, under the Session's mutex, has queued its job
	eventually(t, func() bool { return len(s.JanitorJobs()) == 0 }, "the loss's cleanup done")
	makeNodes(t, s, "/x/n", "/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	h.Attach("/x/_holders/r-n")
	eventually(t, func() bool { return !f.Exists("/x/_holders/r-n") }, "the janitor deletes the late extra")
	o.check(t)
	if f.Exists("/x/n") {
		t.Fatal("the janitor did not delete the lease's node with its late extra")
	}
	if got := h.Nodes(); !slices.Equal(got, []string{"/x/n"}) {
		t.Fatalf("Nodes after a late Attach: %v", got)
	}
}

// The janitor keeps a job's Then behind its nodes: while the node's delete
// meets connection losses, the extra waits; once the node is gone, it goes.
func TestJanitorDeletesThenAfterTheNodes(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/x/n", "/x/_holders/r-n")
	o := watchExtraOrder(f, "/x/n", "/x/_holders/r-n")
	o.set("/x/n", lossesThen(5, nil))
	s.Discard(session.Job{Nodes: []string{"/x/n"}, Then: []string{"/x/_holders/r-n"}, Session: s.ID()})
	eventually(t, func() bool { return !f.Exists("/x/_holders/r-n") }, "the janitor deletes the extra")
	o.check(t)
	if f.Exists("/x/n") {
		t.Fatal("the node stayed")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tries["/x/n"] != 6 {
		t.Fatalf("the node's delete was tried %d times, want 6 (five failed): the test shows nothing", o.tries["/x/n"])
	}
}

// grantWith grants g (its Epoch and Session filled in) after a
// confirmation, as grant does, and returns its one lease.
func grantWith(t *testing.T, s *session.Session, g session.Grant) *session.Hold {
	t.Helper()
	for i := 0; i < 1000; i++ {
		st, id := s.State(), s.ID()
		_, err := s.Conn().Exists("/")
		must(t, err, "a packet to confirm the session by")
		s.Confirm(time.Now(), id)
		g.Epoch, g.Session = st.Epoch, id
		hs, err := s.Grant(g)
		switch {
		case errors.Is(err, session.ErrUnconfirmed), err == nil && hs == nil:
			continue
		case err != nil:
			t.Fatal(err)
		}
		return hs[0]
	}
	t.Fatal("no grant")
	return nil
}

// A prefix job's Then waits for the nodes it names, and goes when they
// are gone or none is found.
func TestJanitorPrefixJobDeletesThenAfterItsNodes(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/p/_c_x-lock-1", "/p/_holders/r-1", "/p/_holders/r-2")
	o := watchExtraOrder(f, "/p/_c_x-lock-1", "/p/_holders/r-1")
	o.set("/p/_c_x-lock-1", lossesThen(2, nil))
	s.Discard(session.Job{Parent: "/p", Prefix: "_c_x-", Then: []string{"/p/_holders/r-1"}, Session: s.ID()})
	eventually(t, func() bool { return !f.Exists("/p/_holders/r-1") }, "the janitor deletes the prefix job's Then")
	o.check(t)
	if f.Exists("/p/_c_x-lock-1") {
		t.Fatal("the prefix job's node stayed")
	}
	s.Discard(session.Job{Parent: "/p", Prefix: "_c_x-", Then: []string{"/p/_holders/r-2"}, Session: s.ID()})
	eventually(t, func() bool { return !f.Exists("/p/_holders/r-2") }, "the janitor deletes the Then of a prefix job that finds none")
}
