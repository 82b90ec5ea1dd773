package session_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// Two first looks in flight on one path: the first to end leaves the
// other's record, so that a grant on the other still counts its children
// watch as covering the node; the last to end drops the path. A children
// event after a look began means its watch may be spent: its grant hands
// the node to the keeper instead.
func TestTwoLooksInFlightOnOnePath(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/l/a", "/m/a")
	first, second := s.StartLook("/l"), s.StartLook("/l")
	if refs, _ := s.LooksOn("/l"); refs != 2 {
		t.Fatalf("%d looks in flight on /l, want 2", refs)
	}
	first.End()
	if refs, _ := s.LooksOn("/l"); refs != 1 {
		t.Fatalf("after one of two looks ended: %d in flight, want 1", refs)
	}
	grant(t, s, [][]string{{"/l/a"}}, []session.Cover{{Look: second}})
	if cv := s.CoverOf("/l/a"); cv != "path" {
		t.Fatalf("a node granted by a look still in flight is covered by %q, want its children watch", cv)
	}
	second.End()
	if n := s.LookedPaths(); n != 0 {
		t.Fatalf("no look in flight, and %d paths still recorded", n)
	}

	spent := s.StartLook("/m")
	s.OnWatch(s.Gen(), zk.Event{Type: zk.EventNodeChildrenChanged, Path: "/m"})
	grant(t, s, [][]string{{"/m/a"}}, []session.Cover{{Look: spent}})
	spent.End()
	if cv := s.CoverOf("/m/a"); cv != "arm" {
		t.Fatalf("a node granted by a look whose watch fired is covered by %q, want the keeper's watch", cv)
	}
}

// The watch events of a replaced connection neither end nor re-arm the
// leases of the new one; the current connection's do.
func TestStaleWatchEventsIgnored(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	old := s.Gen()
	s.Replace()
	eventually(t, func() bool { return s.Gen() != old && s.State().Connected && s.ID() != 0 }, "a new connection")
	h := hold(t, s, []string{"/w/a"})[0]
	makeNodes(t, s, "/w/b")
	look := s.StartLook("/w")
	grant(t, s, [][]string{{"/w/b"}}, []session.Cover{{Look: look}})
	defer look.End()

	s.OnWatch(old, zk.Event{Type: zk.EventNodeDeleted, Path: "/w/a"})
	if err := h.Err(); err != nil {
		t.Fatalf("a deletion reported by the replaced connection ended a lease: %v", err)
	}
	s.OnWatch(old, zk.Event{Type: zk.EventNodeDataChanged, Path: "/w/a"})
	if cv := s.CoverOf("/w/a"); cv != "" {
		t.Fatalf("a data change reported by the replaced connection handed a node to the keeper (%q)", cv)
	}
	s.OnWatch(old, zk.Event{Type: zk.EventNodeChildrenChanged, Path: "/w"})
	if _, events := s.LooksOn("/w"); events != 0 || s.CoverOf("/w/b") != "path" {
		t.Fatalf("a children event of the replaced connection counted (%d) or spent the watch (%q)", events, s.CoverOf("/w/b"))
	}

	s.OnWatch(s.Gen(), zk.Event{Type: zk.EventNodeDeleted, Path: "/w/a"})
	returnedWithin(t, h.Done(), "the lease, on the current connection's deletion event")
	if err := h.Err(); !errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("lease ended with %v, want ErrNodeDeleted", err)
	}
}

// A finished wait is forgotten, so that the keeper stops checking its
// node; the end of an earlier wait on the same node leaves the later one.
func TestFinishedWaitForgotten(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/x/a")
	_, done1 := s.Waiting("/x/a", s.ID())
	_, done2 := s.Waiting("/x/a", s.ID())
	done1()
	if _, ok := s.Waiters()["/x/a"]; !ok {
		t.Fatal("the end of an earlier wait forgot the later wait on the same node")
	}
	done2()
	if w := s.Waiters(); len(w) != 0 {
		t.Fatalf("waits finished, still recorded: %v", w)
	}
	if v := s.KeeperView(); len(v.Nodes) != 0 || !v.WaitSince.IsZero() {
		t.Fatalf("the keeper still checks %v, waiting since %v", v.Nodes, v.WaitSince)
	}
}

// The register follows releases and children events: a released node
// leaves the others on its path covered by the children watch; a children
// event hands them to the keeper, at armAge after their grant, and they
// leave the path's record; the last release leaves no record.
func TestRegisterFollowsReleasesAndChildrenEvents(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/g/a", "/g/b")
	look := s.StartLook("/g")
	hs := grant(t, s, [][]string{{"/g/a"}, {"/g/b"}}, []session.Cover{{Look: look}, {Look: look}})
	look.End()
	must(t, hs[0].Release(ctxT(t)), "release a")
	if cv := s.CoverOf("/g/b"); cv != "path" {
		t.Fatalf("after another node's release, b is covered by %q, want its path's children watch", cv)
	}
	s.OnWatch(s.Gen(), zk.Event{Type: zk.EventNodeChildrenChanged, Path: "/g"})
	if cv := s.CoverOf("/g/b"); cv != "arm" {
		t.Fatalf("after the path's children event, b is covered by %q, want the keeper's watch alone", cv)
	}
	if due, want := s.ArmDue("/g/b"), hs[1].Granted().Add(testTimeout/20); !due.Equal(want) {
		t.Fatalf("b is due for a watch at %v, want armAge after its grant (%v)", due, want)
	}
	if n := s.BarePaths(); n != 0 {
		t.Fatalf("%d paths still recorded as covering nodes", n)
	}
	must(t, hs[1].Release(ctxT(t)), "release b")
	if cv := s.CoverOf("/g/b"); cv != "" {
		t.Fatalf("a released node is still covered by %q", cv)
	}

	makeNodes(t, s, "/g2/a", "/g2/b")
	look = s.StartLook("/g2")
	hs = grant(t, s, [][]string{{"/g2/a"}, {"/g2/b"}}, []session.Cover{{Look: look}, {Look: look}})
	look.End()
	for _, h := range hs {
		must(t, h.Release(ctxT(t)), "release")
	}
	if n := s.BarePaths(); n != 0 {
		t.Fatalf("every covered node released, and %d paths still recorded", n)
	}
}

// A node found by a read whose look had ended (it set no watch) is not
// covered by another look in flight on its path: the keeper watches it.
func TestEndedLookCoversNothing(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/h/a")
	ended := s.StartLook("/h")
	ended.End()
	live := s.StartLook("/h")
	defer live.End()
	grant(t, s, [][]string{{"/h/a"}}, []session.Cover{{Look: ended}})
	if cv := s.CoverOf("/h/a"); cv != "arm" {
		t.Fatalf("a node granted by an ended look is covered by %q, want the keeper's watch", cv)
	}
}

// A held node whose data watch fired (its data changed) is handed to the
// keeper for a new one, no sooner than armAge after its grant.
func TestDataChangeHandsTheNodeToTheKeeper(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	h := hold(t, s, []string{"/dc/a"})[0]
	if cv := s.CoverOf("/dc/a"); cv != "" {
		t.Fatalf("a node with its own watch is covered by %q", cv)
	}
	s.OnWatch(s.Gen(), zk.Event{Type: zk.EventNodeDataChanged, Path: "/dc/a"})
	if cv := s.CoverOf("/dc/a"); cv != "arm" {
		t.Fatalf("after its data watch fired, the node is covered by %q, want the keeper's watch", cv)
	}
	if due, want := s.ArmDue("/dc/a"), h.Granted().Add(testTimeout/20); !due.Equal(want) {
		t.Fatalf("due for a watch at %v, want armAge after its grant (%v)", due, want)
	}
}

// The keeper wakes for the earliest node due for a watch.
func TestNextArmIsTheEarliest(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	var first time.Time
	for i := 0; i < 16; i++ {
		node := fmt.Sprintf("/na/n%d", i)
		makeNodes(t, s, node)
		h := grant(t, s, [][]string{{node}}, []session.Cover{{}})[0]
		if i == 0 {
			first = s.ArmDue(node)
		}
		laterThan(h.Granted())
	}
	for i := 0; i < 4; i++ { // map order differs each time
		if next := s.NextArm(); !next.Equal(first) {
			t.Fatalf("next watch due at %v, want the earliest, %v", next, first)
		}
	}
}

// A check by the keeper that finds a node gone ends what the node was for:
// a waiter hears of it (and is forgotten), a lease ends with
// ErrNodeDeleted.
func TestKeeperCheckFindsNodesGone(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	dk := s.DetachedKeeper()
	makeNodes(t, s, "/kg/w", "/kg/h")
	gone, done := s.Waiting("/kg/w", s.ID())
	defer done()
	must(t, f.Delete("/kg/w"))
	dk.Confirm()
	if !isClosed(gone) {
		t.Fatal("the waiter was not told its node is gone")
	}
	if w := s.Waiters(); len(w) != 0 {
		t.Fatalf("a waiter whose node is gone is still recorded: %v", w)
	}
	h := grant(t, s, [][]string{{"/kg/h"}}, []session.Cover{{Own: true}})[0] // no watch, in truth
	must(t, f.Delete("/kg/h"))
	if err := h.Err(); err != nil {
		t.Fatalf("the lease ended with no watch on its node: %v", err)
	}
	dk.Confirm()
	if err := h.Err(); !errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("a lease whose node the keeper found gone: %v, want ErrNodeDeleted", err)
	}
}

// A new waiter wakes an idle keeper, which then checks its node.
func TestWaitingWakesTheKeeper(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/ww/a")
	eventually(t, s.KeeperAsleep, "the idle keeper asleep")
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error { log.add(op); return nil }})
	_, done := s.Waiting("/ww/a", s.ID())
	defer done()
	eventually(t, func() bool { return log.count("Check", "/ww/a") > 0 }, "the keeper checks the waiter's node")
}
