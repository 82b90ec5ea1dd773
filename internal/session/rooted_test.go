package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The chroot's one method, Do, and its relays of watch events; its paths:
// chroot_test.go.

// A relay hands the watch's one event on, rewritten, and closes; flush
// hands on an event that has reached the connection's channel before it
// returns, whoever of it and the relay's goroutine receives it; a channel
// closed with nothing (no connection does that) closes the relay's too.
func TestRelays(t *testing.T) {
	r := rooted{root: "/apps/billing"}
	rs := &relays{rel: r.relEvent}
	for i := 0; i < 100; i++ {
		from := make(chan Event, 1)
		to := rs.relay(from)
		from <- Event{Type: zk.EventNodeDeleted, Path: "/apps/billing/a/n"}
		close(from)
		rs.flush()
		select {
		case ev := <-to:
			if ev.Path != "/a/n" || !Deleted(ev) {
				t.Fatalf("relayed %v %q, want EventNodeDeleted at /a/n", ev.Type, ev.Path)
			}
		default:
			t.Fatal("flush returned before the event that was on the connection's channel was on ours")
		}
		if _, ok := <-to; ok {
			t.Fatal("a second event on a relay")
		}
	}
	rs.flush()
	if len(rs.live) != 0 {
		t.Fatalf("%d relays kept after their events were handed on", len(rs.live))
	}

	pending := make(chan Event, 1)
	rs.relay(pending)
	rs.flush()
	if len(rs.live) != 1 {
		t.Fatalf("%d relays live, want the one whose watch has not fired", len(rs.live))
	}

	empty := make(chan Event)
	to := rs.relay(empty)
	close(empty)
	if ev, ok := <-to; ok {
		t.Fatalf("a channel closed with nothing relayed %v", ev)
	}
	close(pending)
	rs.flush()
	if len(rs.live) != 0 {
		t.Fatalf("%d relays kept after their channels closed", len(rs.live))
	}
}

// stubBackend answers each request with do's answer, and keeps them.
type stubBackend struct {
	Backend
	reqs []Request
	do   func(Request) (Result, error)
}

func (s *stubBackend) Do(r Request) (Result, error) {
	s.reqs = append(s.reqs, r)
	return s.do(r)
}

// Every operation's paths go to the server rooted, through the chroot's
// one method, and what names a node comes back relative: created nodes'
// paths, and the path of a gone node.
func TestRootedDoRootsEveryOp(t *testing.T) {
	stub := &stubBackend{do: func(r Request) (Result, error) {
		return Result{Created: []string{"/apps/billing/a/n-0001"}}, &goneNode{path: "/apps/billing/b", err: zk.ErrNoNode}
	}}
	r := rooted{root: "/apps/billing"}.over(stub)
	for op := Op(0); op < opCount; op++ {
		stub.reqs = nil
		paths := []string{"/a/x", "/b/c"} // not top-level: no chroot to make
		res, err := r.Do(Request{Op: op, Paths: paths})
		if len(stub.reqs) != 1 || len(stub.reqs[0].Paths) != 2 ||
			stub.reqs[0].Paths[0] != "/apps/billing/a/x" || stub.reqs[0].Paths[1] != "/apps/billing/b/c" {
			t.Fatalf("%v: the server was asked %+v, want the paths under /apps/billing", op, stub.reqs)
		}
		if paths[0] != "/a/x" {
			t.Fatalf("%v: the caller's paths were rewritten", op)
		}
		if len(res.Created) != 1 || res.Created[0] != "/a/n-0001" {
			t.Fatalf("%v: created %v, want /a/n-0001", op, res.Created)
		}
		if !GoneAt(err, "/b") {
			t.Fatalf("%v: %v, want it gone at /b", op, err)
		}
	}
}

// A create of a lock path's ancestor that finds the chroot missing makes
// it, outermost first, with the chroot's ACL, and tries again.
func TestRootedDoMakesTheRoot(t *testing.T) {
	made := map[string]bool{}
	stub := &stubBackend{do: func(r Request) (Result, error) {
		p := r.Paths[0]
		if p != "/apps" && !made[p[:strings.LastIndexByte(p, '/')]] {
			return Result{}, zk.ErrNoNode
		}
		made[p] = true
		return Result{}, nil
	}}
	rootACL := zk.WorldACL(zk.PermRead)
	r := rooted{root: "/apps/billing", acl: rootACL}.over(stub)
	if _, err := r.Do(Request{Op: OpCreatePersistent, Paths: []string{"/locks"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range stub.reqs {
		got = append(got, q.Op.String()+" "+q.Paths[0])
	}
	want := "[CreatePersistent /apps/billing/locks CreateContainer /apps CreateContainer /apps/billing CreatePersistent /apps/billing/locks]"
	if fmt.Sprint(got) != want {
		t.Fatalf("asked %v, want %s", got, want)
	}
	if acl := stub.reqs[1].ACL; len(acl) != 1 || len(acl[0]) != 1 || acl[0][0] != rootACL[0] {
		t.Fatalf("the chroot was made with ACL %v, want %v", acl, rootACL)
	}
}

// A watch event that came before a reply is on the rooted watch's
// channel, with the Client's path, when the chroot's Do returns that
// reply, and its relay is done with.
func TestRootedDoHandsOnEventsBeforeTheReply(t *testing.T) {
	var fired chan Event
	stub := &stubBackend{do: func(r Request) (Result, error) {
		if r.Op == OpGetW {
			fired = make(chan Event, 1)
			return Result{Watch: fired}, nil
		}
		// The event comes before this reply, as the connection has it.
		fired <- Event{Type: zk.EventNodeDataChanged, Path: "/apps/billing/w"}
		close(fired)
		return Result{}, nil
	}}
	r := rooted{root: "/apps/billing"}.over(stub)
	res, err := r.Do(Request{Op: OpGetW, Paths: []string{"/w"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do(Request{Op: OpExists, Paths: []string{"/"}}); err != nil {
		t.Fatal(err)
	}
	r.watches.mu.Lock()
	live := len(r.watches.live)
	r.watches.mu.Unlock()
	if live != 0 {
		t.Fatalf("%d relays live after the reply that followed the event, want none", live)
	}
	select {
	case ev := <-res.Watch:
		if !DataChanged(ev) || ev.Path != "/w" {
			t.Fatalf("the watch's channel got %v at %q, want EventNodeDataChanged at /w", ev.Type, ev.Path)
		}
	default:
		t.Fatal("the event that came before the reply was not on the watch's channel when Do returned")
	}
}

// On ZooKeeper, a chrooted Session's watch channel gets its event with the
// Client's path, there by the time a later reply is: another session's
// write, then a round trip (a sync, then a read), as TestConformance's
// settle has it.
func TestChrootWatchOnZooKeeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := "/" + t.Name()
	acl := zk.WorldACL(zk.PermAll)
	in := testSession(t, ctx, nil, func(o *Options) { o.Root, o.RootACL = root, acl })
	out := testSession(t, ctx, nil)
	zc := in.Conn()
	if err := zc.CreatePersistent("/w", nil, acl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = out.Conn().Delete(root + "/w")
		_ = out.Conn().Delete(root)
	})
	_, ch, err := zc.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Conn().Set(root+"/w", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := zc.Sync("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Exists("/w"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if !DataChanged(ev) || ev.Path != "/w" {
			t.Fatalf("the watch's channel got %v at %q, want EventNodeDataChanged at /w", ev.Type, ev.Path)
		}
	default:
		t.Fatal("the watch's event was not on its channel by the reply to a later request")
	}
}
