package zkfake_test

// What the conformance test cannot run against a server in seconds: an
// expiry, a dropped connection, a container's reaping, the hooks.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// recorder keeps a connection's events, and lets a test wait for them.
type recorder struct {
	mu  sync.Mutex
	evs []string
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1000)} }

// dialPair dials two connections to f, each with a session of timeout,
// closed when the test ends, and waits until both have their session; it
// returns a's session events.
func dialPair(t *testing.T, f *zkfake.Server, timeout time.Duration) (a, b *zkfake.Conn, ra, rb *recorder, aEvents []string) {
	t.Helper()
	ra, rb = newRecorder(), newRecorder()
	a, b = f.Dial(ra.event, timeout), f.Dial(rb.event, timeout)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	aEvents = ra.await(t, 3)
	rb.await(t, 3)
	return a, b, ra, rb, aEvents
}

func (r *recorder) event(ev zk.Event) {
	r.mu.Lock()
	if ev.Type == zk.EventSession {
		r.evs = append(r.evs, ev.State.String())
	} else {
		r.evs = append(r.evs, fmt.Sprintf("%v %s", ev.Type, ev.Path))
	}
	r.mu.Unlock()
	r.ch <- struct{}{}
}

// await waits until n events have come, and returns them, forgetting them.
func (r *recorder) await(t *testing.T, n int) []string {
	t.Helper()
	for {
		r.mu.Lock()
		if len(r.evs) >= n {
			out := r.evs[:n]
			r.evs = r.evs[n:]
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("want %d events, have %v", n, r.evs)
		}
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestExpiry(t *testing.T) {
	f := zkfake.New()
	a, b, ra, rb, events := dialPair(t, f, time.Second)
	if got := fmt.Sprint(events); got != "[StateConnecting StateConnected StateHasSession]" {
		t.Fatalf("session events %s", got)
	}
	acl := zk.WorldACL(zk.PermAll)
	mustNil(t, a.CreatePersistent("/p", nil, acl))
	made, err := a.CreateEach([]string{"/p/n-"}, nil, func(string) []zk.ACL { return acl })
	mustNil(t, err)
	_, ch, err := a.GetW(made[0])
	mustNil(t, err)
	_, bch, err := b.GetW(made[0])
	mustNil(t, err)
	old := a.SessionID()
	if !f.Expire(old) {
		t.Fatal("Expire of a live session")
	}
	// go-zookeeper: the connection drops, the reconnect finds the session
	// expired, the watchers are told, and a new session is opened.
	if got := fmt.Sprint(ra.await(t, 6)); got != "[StateDisconnected StateExpired StateDisconnected StateConnecting StateConnected StateHasSession]" {
		t.Fatalf("expiry events %s", got)
	}
	if ev := <-ch; ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
		t.Fatalf("A's watcher got %+v", ev)
	}
	if got := fmt.Sprint(rb.await(t, 1)); got != "[EventNodeDeleted "+made[0]+"]" {
		t.Fatalf("B heard %s", got)
	}
	if ev := <-bch; ev.Type != zk.EventNodeDeleted {
		t.Fatalf("B's watcher got %+v", ev)
	}
	if id := a.SessionID(); id == old || id == 0 {
		t.Fatalf("session %#x after the expiry of %#x", id, old)
	}
	if f.Expire(old) {
		t.Fatal("an expired session expired again")
	}
}

func TestDisconnectHoldsRequestsAndEvents(t *testing.T) {
	f := zkfake.New()
	a, b, _, rb, _ := dialPair(t, f, time.Second)
	acl := zk.WorldACL(zk.PermAll)
	mustNil(t, a.CreatePersistent("/d", nil, acl))
	_, _, err := b.ChildrenStatW("/d")
	mustNil(t, err)
	b.Disconnect()
	rb.await(t, 1) // StateDisconnected
	mustNil(t, a.CreatePersistent("/d/x", nil, acl))
	done := make(chan error, 1)
	// A request made while the connection is down waits in its queue,
	// and does not fail.
	go func() { _, err := b.Exists("/d/x"); done <- err }()
	b.Reconnect()
	mustNil(t, <-done)
	if got := fmt.Sprint(rb.await(t, 3)); got != "[StateConnected StateHasSession EventNodeChildrenChanged /d]" {
		t.Fatalf("after the reconnect %s", got)
	}
	// A session that expires while its connection is down is found
	// expired on the reconnect.
	b.Disconnect()
	rb.await(t, 1)
	if ids := f.ExpireIdle(time.Now()); len(ids) != 0 {
		t.Fatalf("expired %v before their timeout", ids)
	}
	if ids := f.ExpireIdle(time.Now().Add(time.Second)); len(ids) != 1 || ids[0] != b.SessionID() {
		t.Fatalf("expired %v, want B's %#x", ids, b.SessionID())
	}
	b.Reconnect()
	if got := fmt.Sprint(rb.await(t, 5)); got != "[StateExpired StateDisconnected StateConnecting StateConnected StateHasSession]" {
		t.Fatalf("reconnect after expiry %s", got)
	}
}

func TestHooksAndContainers(t *testing.T) {
	f := zkfake.New()
	r := newRecorder()
	c := f.Dial(r.event, time.Second)
	defer c.Close()
	var seen []string
	f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			seen = append(seen, op.Name)
			if op.Name == "Delete" {
				return zk.ErrConnectionClosed // refused, unapplied
			}
			return nil
		},
		After: func(op zkfake.Op, err error) error {
			if op.Name == "CreateContainer" {
				return zk.ErrConnectionClosed // applied, reply lost
			}
			return err
		},
	})
	acl := zk.WorldACL(zk.PermAll)
	if err := c.CreateContainer("/c", nil, acl); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("create container: %v", err)
	}
	if !f.Exists("/c") {
		t.Fatal("the container was not made")
	}
	mustNil(t, c.CreateEphemeral("/c/e", nil, acl))
	if err := c.Delete("/c/e"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("delete: %v", err)
	}
	if !f.Exists("/c/e") {
		t.Fatal("a refused delete applied")
	}
	f.SetHooks(zkfake.Hooks{})
	if reaped := f.ReapContainers(); len(reaped) != 0 {
		t.Fatalf("reaped %v with a child", reaped)
	}
	mustNil(t, c.Delete("/c/e"))
	if reaped := f.ReapContainers(); fmt.Sprint(reaped) != "[/c]" {
		t.Fatalf("reaped %v", reaped)
	}
	if fmt.Sprint(seen) != "[CreateContainer CreateEphemeral Delete]" {
		t.Fatalf("hooks saw %v", seen)
	}
	err := c.Check([]string{"/nope"})
	var _ session.Backend = c
	if !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("check of a gone node: %v", err)
	}
	c.Close()
	if _, err := c.Exists("/"); !errors.Is(err, zk.ErrClosing) {
		t.Fatalf("after close: %v", err)
	}
}

// A late setWatches (LateWatches, then SetWatches): until it comes, the
// session's watches that had not fired tell it nothing; then each is set
// again or told at once, against the tree as it is, as
// DataTree.setWatches does: an exists watch on a node created and deleted
// meanwhile is set again and told nothing, until the node is created again.
func TestLateSetWatches(t *testing.T) {
	f := zkfake.New()
	a, b, ra, _, _ := dialPair(t, f, time.Minute)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/p", "/y", "/z", "/q"} {
		mustNil(t, b.CreatePersistent(p, nil, acl))
	}
	_, _, err := a.ExistsW("/x") // missing: an exists watch
	mustNil(t, err)
	for _, p := range []string{"/y", "/z", "/q"} {
		_, _, err := a.GetW(p)
		mustNil(t, err)
	}
	_, _, err = a.ChildrenW("/p")
	mustNil(t, err)

	a.Disconnect()
	a.LateWatches()
	ra.await(t, 1) // StateDisconnected
	a.Reconnect()
	if got := fmt.Sprint(ra.await(t, 2)); got != "[StateConnected StateHasSession]" {
		t.Fatalf("reconnect events %s", got)
	}
	mustNil(t, b.CreatePersistent("/x", nil, acl))
	mustNil(t, b.Delete("/x"))
	mustNil(t, b.Delete("/y"))
	mustNil(t, b.Set("/z", []byte("new")))
	if w := f.Watched(); len(w) != 0 {
		t.Fatalf("watched before the late setWatches: %v", w)
	}
	a.SetWatches()
	if got := fmt.Sprint(ra.await(t, 2)); got != "[EventNodeDeleted /y EventNodeDataChanged /z]" {
		t.Fatalf("the late setWatches told %s", got)
	}
	if got := fmt.Sprint(f.Watched()); got != "[/p /q /x]" {
		t.Fatalf("watched after the late setWatches: %s, want [/p /q /x]", got)
	}
	mustNil(t, b.CreatePersistent("/x", nil, acl))
	if got := fmt.Sprint(ra.await(t, 1)); got != "[EventNodeCreated /x]" {
		t.Fatalf("the exists watch set again told %s", got)
	}
}
