package session_test

import (
	"errors"
	"testing"

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
