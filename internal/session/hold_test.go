package session_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A second Release says ErrReleased, also of a lease that was lost: the
// first said how it was lost, and only the first may act on its nodes.
func TestSecondReleaseSaysReleasedAfterALoss(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/r/a"})[0]
	must(t, f.Delete("/r/a"), "delete the held node")
	returnedWithin(t, h.Done(), "the lease of a deleted node")
	if err := h.Release(ctxT(t)); !errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("first release of a lost lease: %v, want ErrNodeDeleted", err)
	}
	err := h.Release(ctxT(t))
	if !errors.Is(err, session.ErrReleased) || errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("second release: %v, want ErrReleased alone", err)
	}

	live := hold(t, s, []string{"/r/b"})[0]
	must(t, live.Release(ctxT(t)), "release")
	if err := live.Release(ctxT(t)); !errors.Is(err, session.ErrReleased) {
		t.Fatalf("second release of a released lease: %v, want ErrReleased", err)
	}
}

// blockDeletes makes the fake hold every Delete of node until the returned
// function is called, and logs every op.
func blockDeletes(f *zkfake.Server, log *opLog, node string) (unblock func()) {
	gate := make(chan struct{})
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		log.add(op)
		if op.Name == "Delete" && len(op.Paths) == 1 && op.Paths[0] == node {
			<-gate
		}
		return nil
	}})
	return func() { close(gate) }
}

// releaseAsync releases h with ctx in the background; the channel gets its
// error, and whether ctx was still live when it returned.
type released struct {
	err      error
	ctxEnded bool
}

func releaseAsync(ctx context.Context, h *session.Hold) <-chan released {
	ch := make(chan released, 1)
	go func() {
		err := h.Release(ctx)
		ch <- released{err, ctx.Err() != nil}
	}()
	return ch
}

func awaitRelease(t *testing.T, ch <-chan released, what string) released {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(long):
		t.Fatalf("%s: Release did not return", what)
		return released{}
	}
}

// queueBehind starts the Release of each of hs, in order, each queued
// behind the delete in flight before the next starts.
func queueBehind(t *testing.T, s *session.Session, ctx context.Context, hs ...*session.Hold) []<-chan released {
	t.Helper()
	var out []<-chan released
	for i, h := range hs {
		out = append(out, releaseAsync(ctx, h))
		eventually(t, func() bool { _, n := s.ReleasesState(); return n == i+1 }, fmt.Sprintf("release %d queued", i+1))
	}
	return out
}

// When every Release queued behind a delete has left (its ctx ended), the
// one whose delete returns sends their batch itself, and marks that no
// delete is in flight: a later Release is not queued behind nothing.
func TestReleaseQueueSentWhenEveryoneLeft(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	hs := hold(t, s, []string{"/q/a"}, []string{"/q/b"}, []string{"/q/c"}, []string{"/q/d"})
	var log opLog
	unblock := blockDeletes(f, &log, "/q/a")
	first := releaseAsync(ctxT(t), hs[0])
	eventually(t, func() bool { return log.count("Delete", "/q/a") == 1 }, "the first delete in flight")

	ctx, cancel := context.WithCancel(ctxT(t))
	leaving := queueBehind(t, s, ctx, hs[1], hs[2])
	cancel()
	for i, ch := range leaving {
		must(t, awaitRelease(t, ch, "a release whose ctx ended").err, "release ", i)
	}
	if n := log.count("DeleteAll", "/q/b"); n != 0 {
		t.Fatalf("the batch went out before the delete in flight returned (%d)", n)
	}
	unblock()
	must(t, awaitRelease(t, first, "the first release").err, "the first release")
	if n := log.count("DeleteAll", "/q/b"); n != 1 {
		t.Fatalf("the batch of the Releases that left was sent %d times, want once", n)
	}
	if busy, n := s.ReleasesState(); busy || n != 0 {
		t.Fatalf("after the last delete: in flight %v, %d queued; want idle", busy, n)
	}
	r := awaitRelease(t, releaseAsync(ctxT(t), hs[3]), "a release after the queue emptied")
	must(t, r.err, "release")
	if r.ctxEnded {
		t.Fatal("a release waited for its ctx to end")
	}
	for _, n := range []string{"/q/a", "/q/b", "/q/c", "/q/d"} {
		if f.Exists(n) {
			t.Fatalf("%s outlived its release", n)
		}
	}
}

// A queued Release whose ctx ends as the lead reaches it, when all the
// others queued with it have left, sends their batch itself and marks that
// no delete is in flight: nobody else would, and every later Release
// would queue behind nothing until its ctx ended.
func TestReleaseLeavingWithTheLeadSendsTheBatch(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	nodes := []string{"/w/a", "/w/b", "/w/c"}
	makeNodes(t, s, nodes...)
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error { log.add(op); return nil }})
	s.LeaveWithTheLead([][]string{nodes[:1], nodes[1:]})
	if got := log.sizes("DeleteAll"); len(got) != 1 || got[0] != 3 {
		t.Fatalf("multis sent, by size: %v, want one of 3", got)
	}
	for _, n := range nodes {
		if f.Exists(n) {
			t.Fatalf("%s outlived the batch", n)
		}
	}
	if busy, n := s.ReleasesState(); busy || n != 0 {
		t.Fatalf("after the batch: in flight %v, %d queued; want idle", busy, n)
	}
}

// While a batch is in flight, a Release queues behind it as behind any
// delete: the queue is not marked idle when it is handed on.
func TestReleaseQueuesBehindABatchInFlight(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	hs := hold(t, s, []string{"/i/a"}, []string{"/i/b"}, []string{"/i/c"}, []string{"/i/d"})
	var log opLog
	gate := make(chan struct{})
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		log.add(op)
		if op.Name == "Delete" && op.Paths[0] == "/i/a" || op.Name == "DeleteAll" {
			<-gate
		}
		return nil
	}})
	first := releaseAsync(ctxT(t), hs[0])
	eventually(t, func() bool { return log.count("Delete", "/i/a") == 1 }, "the first delete in flight")
	queued := queueBehind(t, s, ctxT(t), hs[1], hs[2])
	gate <- struct{}{} // the first delete returns; the batch goes out, and waits
	must(t, awaitRelease(t, first, "the first release").err)
	eventually(t, func() bool { return log.count("DeleteAll", "/i/b") == 1 }, "the batch in flight")
	last := queueBehind(t, s, ctxT(t), hs[3])
	if n := log.count("Delete", "/i/d"); n != 0 {
		t.Fatalf("a release behind a batch in flight deleted at once (%d)", n)
	}
	close(gate)
	for i, ch := range append(queued, last...) {
		r := awaitRelease(t, ch, "a queued release")
		must(t, r.err, "queued release ", i)
	}
	for _, n := range []string{"/i/a", "/i/b", "/i/c", "/i/d"} {
		if f.Exists(n) {
			t.Fatalf("%s outlived its release", n)
		}
	}
}

// Releases queued behind a delete go out in one multi of up to
// maxReleaseBatch (1000) nodes, exactly 1000 included; a Release that
// would take the batch past it deletes its nodes alone, at once, not when
// its ctx ends.
func TestReleaseBatchUpToMaxNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int // of the Releases queued, in order
		multi []int // the multis sent after the first delete returns, in any order
	}{
		{"one alone", []int{1}, nil}, // handed the lead, it deletes its own
		{"exactly 1000", []int{500, 500}, []int{1000}},
		{"one past", []int{500, 501}, []int{500, 501}},
		{"the middle one left out", []int{600, 600, 1}, []int{601, 600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			s := openFake(t, f)
			hs := hold(t, s, []string{"/b/first"})
			var groups [][]string
			var covers []session.Cover
			for i, n := range tc.sizes {
				g := makeMany(t, s, fmt.Sprintf("/b/%d", i), n)
				groups = append(groups, g)
				covers = append(covers, make([]session.Cover, n)...)
			}
			for i := range covers {
				covers[i].Own = true // a lie: nothing here deletes them
			}
			hs = append(hs, grant(t, s, groups, covers)...)
			var log opLog
			unblock := blockDeletes(f, &log, "/b/first")
			first := releaseAsync(ctxT(t), hs[0])
			eventually(t, func() bool { return log.count("Delete", "/b/first") == 1 }, "the first delete in flight")
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			queued := queueBehind(t, s, ctx, hs[1:]...)
			unblock()
			must(t, awaitRelease(t, first, "the first release").err)
			for i, ch := range queued {
				r := awaitRelease(t, ch, "a queued release")
				must(t, r.err, "queued release ", i)
				if r.ctxEnded {
					t.Fatalf("queued release %d (%d nodes) returned only when its ctx ended", i, tc.sizes[i])
				}
			}
			got := map[int]int{}
			for _, n := range log.sizes("DeleteAll") {
				got[n]++
			}
			want := map[int]int{}
			for _, n := range tc.multi {
				want[n]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("multis sent, by size: %v, want %v", got, want)
			}
			for i := range tc.sizes {
				if left := f.Children(fmt.Sprintf("/b/%d", i)); len(left) != 1 { // the seed
					t.Fatalf("nodes left under /b/%d: %v", i, left)
				}
			}
		})
	}
}

// Release ends the lease before it deletes its nodes (a lease never
// outlives its nodes): Done is closed and Err says ErrReleased by the time
// the delete goes out, and its deadline is no later than its end.
func TestReleaseEndsTheLeaseBeforeItsNodes(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/e/a"})[0]
	if until := h.ValidUntil(); !until.After(time.Now()) {
		t.Fatalf("a live lease valid until %v", until)
	}
	endedFirst := make(chan bool, 1)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Delete" && op.Paths[0] == "/e/a" {
			endedFirst <- isClosed(h.Done()) && errors.Is(h.Err(), session.ErrReleased)
		}
		return nil
	}})
	must(t, h.Release(ctxT(t)), "release")
	released := time.Now()
	select {
	case ok := <-endedFirst:
		if !ok {
			t.Fatal("the node's delete went out while its lease was live")
		}
	default:
		t.Fatal("Release did not delete the node")
	}
	if until := h.ValidUntil(); until.After(released) {
		t.Fatalf("a lease released by %v valid until %v", released, until)
	}
}

// Err compares the clock with the deadline itself: once it has passed, a
// lease reports ErrLeaseExpired (and ends) before anything else has ended
// it; here the keeper, which would, is held setting a watch.
func TestErrReportsAPassedDeadline(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = 600 * time.Millisecond })
	makeNodes(t, s, "/d/a")
	g := make(chan struct{})
	defer close(g)
	held := make(chan struct{}, 1)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "GetW" && op.Paths[0] == "/d/a" {
			held <- struct{}{}
			<-g
		}
		return nil
	}})
	h := grant(t, s, [][]string{{"/d/a"}}, []session.Cover{{}})[0] // covered by nothing: the keeper sets a watch
	select {
	case <-held:
	case <-time.After(long):
		t.Fatal("the keeper did not set the node's watch")
	}
	deadline := h.ValidUntil()
	eventually(t, func() bool { return time.Now().After(deadline) }, "the deadline passed")
	if isClosed(h.Done()) {
		t.Fatal("the lease ended while the keeper was held: the test shows nothing")
	}
	if err := h.Err(); !errors.Is(err, session.ErrLeaseExpired) {
		t.Fatalf("past its deadline, a lease says %v, want ErrLeaseExpired", err)
	}
	if !isClosed(h.Done()) {
		t.Fatal("a lease that reported its expiry is not ended")
	}
	if until := h.ValidUntil(); !until.Equal(deadline) {
		t.Fatalf("an expired lease valid until %v, want its deadline %v", until, deadline)
	}
}

// A released lease is forgotten: the recipes hear of it once, and the
// keeper neither confirms the session for it nor watches its node.
func TestReleaseForgetsTheLease(t *testing.T) {
	f := zkfake.New()
	var mu sync.Mutex
	var heard []*session.Hold
	s := openFake(t, f, func(o *session.Options) {
		o.Hooks.Released = func(h *session.Hold) { mu.Lock(); heard = append(heard, h); mu.Unlock() }
	})
	h := grant(t, s, [][]string{{"/f/a"}}, []session.Cover{{}})[0] // covered by nothing: handed to the keeper
	if v := s.KeeperView(); len(v.Nodes) != 1 || s.CoverOf("/f/a") != "arm" {
		t.Fatalf("a held node: the keeper checks %v, covered by %q", v.Nodes, s.CoverOf("/f/a"))
	}
	must(t, h.Release(ctxT(t)), "release")
	if v := s.KeeperView(); len(v.Nodes) != 0 {
		t.Fatalf("after the release, the keeper still checks %v", v.Nodes)
	}
	if cv := s.CoverOf("/f/a"); cv != "" {
		t.Fatalf("after the release, the node is still covered by %q", cv)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || heard[0] != h {
		t.Fatalf("the recipes heard of %d releases, want this one", len(heard))
	}
}

// What a Release could not delete before its ctx ended (the connection
// kept failing) goes to the janitor, which deletes it once it can.
func TestReleaseLeavesWhatIsLeftToTheJanitor(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/j/a"})[0]
	var mu sync.Mutex
	failing := true
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failing && op.Name == "Delete" && op.Paths[0] == "/j/a" {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer cancel()
	must(t, h.Release(ctx), "a release whose ctx ends before its delete")
	if !f.Exists("/j/a") {
		t.Fatal("the delete went through: the test shows nothing")
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	eventually(t, func() bool { return !f.Exists("/j/a") }, "the janitor deletes what the release left")
}

// Releases one after another each delete at once: the first, once its
// delete returned, leaves no delete counted in flight for the next to
// queue behind.
func TestReleasesOneAfterAnother(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	hs := hold(t, s, []string{"/o/a"}, []string{"/o/b"}, []string{"/o/c"})
	for i, h := range hs {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		r := awaitRelease(t, releaseAsync(ctx, h), "a release")
		cancel()
		must(t, r.err, "release ", i)
		if r.ctxEnded {
			t.Fatalf("release %d waited for its ctx to end", i)
		}
		if busy, n := s.ReleasesState(); busy || n != 0 {
			t.Fatalf("after release %d: in flight %v, %d queued; want idle", i, busy, n)
		}
	}
}

// Release retries a delete that meets a connection loss itself, with
// backoff, before it returns; and of nodes that cannot be deleted for good
// it names the first.
func TestReleaseRetriesAndNamesTheFirstFailure(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/t/a"})[0]
	var mu sync.Mutex
	tries := map[string]int{}
	byRelease := false // the delete of /t/a that went through was Release's own
	answers := map[string][]error{
		"/t/a": {zk.ErrConnectionClosed, zk.ErrConnectionClosed}, // then deleted
		"/t/b": {zk.ErrNoAuth},                                   // for good
		"/t/c": {zk.ErrNoAuth},                                   // for good, after b
		"/t/e": {zk.ErrConnectionClosed, zk.ErrNoAuth},           // for good, found on the retry
	}
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "DeleteAll" {
			return zk.ErrConnectionClosed // no multi: each node its own delete
		}
		if op.Name != "Delete" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		n := tries[op.Paths[0]]
		tries[op.Paths[0]]++
		if a := answers[op.Paths[0]]; n < len(a) {
			return a[n]
		}
		if op.Paths[0] == "/t/a" {
			buf := make([]byte, 64<<10)
			byRelease = strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*Hold).Release")
		}
		return nil
	}})
	must(t, h.Release(ctxT(t)), "a release whose delete meets a connection loss twice")
	eventually(t, func() bool { return !f.Exists("/t/a") }, "the node deleted")
	mu.Lock()
	if !byRelease {
		t.Fatal("Release left the retries of its delete to the janitor")
	}
	mu.Unlock()

	m := hold(t, s, []string{"/t/b", "/t/c", "/t/d", "/t/e"})[0]
	err := m.Release(ctxT(t))
	var ne *session.NodeError
	if !errors.As(err, &ne) || ne.Node != "/t/b" || !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("release of nodes that cannot be deleted: %v, want the first, /t/b", err)
	}
	if f.Exists("/t/d") {
		t.Fatal("a node that could be deleted was kept")
	}
}

// The nodes of a lease on several paths (a MultiLock's) are deleted in one
// transaction: one multi, no delete of its own for any node.
func TestReleaseOfSeveralNodesIsOneTransaction(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/m1/a", "/m2/a"})[0]
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error { log.add(op); return nil }})
	must(t, h.Release(ctxT(t)), "release")
	if got := log.sizes("DeleteAll"); fmt.Sprint(got) != "[2]" {
		t.Fatalf("multis sent, by size: %v, want one of both nodes", got)
	}
	if n := log.count("Delete", ""); n != 0 {
		t.Fatalf("%d deletes of single nodes besides the multi", n)
	}
}

// A node already gone (deleted by someone else, its watch not yet heard
// of) is fine to a Release: deleted is deleted.
func TestReleaseOfANodeAlreadyGoneIsFine(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/g1/a", "/g2/a")
	h := grant(t, s, [][]string{{"/g1/a", "/g2/a"}}, []session.Cover{{Own: true}, {Own: true}})[0] // no watch, in truth
	must(t, f.Delete("/g2/a"))
	must(t, h.Release(ctxT(t)), "release of a lease one of whose nodes is gone")
	if f.Exists("/g1/a") {
		t.Fatal("the other node outlived the release")
	}
}

// A Release whose delete meets the Session's Close returns nil: the
// session's end deletes the node, which is no failure of the node.
func TestReleaseRacingCloseIsFine(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/rc/a"})[0]
	gate, in := make(chan struct{}), make(chan struct{})
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Delete" && op.Paths[0] == "/rc/a" {
			close(in)
			<-gate
		}
		return nil
	}})
	r := releaseAsync(ctxT(t), h)
	<-in
	must(t, s.Close(), "close")
	close(gate)
	if res := awaitRelease(t, r, "a release racing Close"); res.err != nil {
		t.Fatalf("a release racing Close: %v, want nil", res.err)
	}
}
