package session_test

// Tests of the Session's own decisions (the keeper, the janitor, holding and
// releasing) on internal/zkfake: the real Session, an in-memory ZooKeeper,
// no network. Each waits on the fake's state or a channel, never on time.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// long bounds every wait: far above what any step needs, so that a hang
// fails instead of blocking the run.
const long = 30 * time.Second

// patience is the ctx of a call that must return before its ctx ends: far
// above what it needs, and short enough that a call that waits for its
// ctx fails the test quickly.
const patience = 10 * time.Second

// testTimeout is the sessions' timeout: long enough that the keeper's own
// schedule (a confirmation every third of it) stays out of a test's way.
const testTimeout = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*long)
	t.Cleanup(cancel)
	return ctx
}

func must(t testing.TB, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", fmt.Sprint(what...), err)
	}
}

// eventually polls cond until it holds, and fails the test if it does not
// within long.
func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(long)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, long)
		case <-tick.C:
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fastBackOff retries every millisecond, for ever.
func fastBackOff() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }

// fakeOptions are the options of a Session on f.
func fakeOptions(f *zkfake.Server) session.Options {
	return session.Options{
		Servers:        []string{"zkfake"},
		SessionTimeout: testTimeout,
		ACL:            func(string) []zk.ACL { return zk.WorldACL(zk.PermAll) },
		Logger:         quiet,
		NewBackOff:     fastBackOff,
		Hooks: session.Hooks{
			Lost:     func(*session.Hold, error) {},
			Released: func(*session.Hold) {},
			State:    func(session.State, int64, string) {},
		},
		Connect: f.Connect,
	}
}

// openFake opens a Session on f, with edit applied to its options.
func openFake(t testing.TB, f *zkfake.Server, edit ...func(*session.Options)) *session.Session {
	t.Helper()
	o := fakeOptions(f)
	for _, e := range edit {
		e(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	s, err := session.Open(ctx, o)
	must(t, err, "open a session on the fake")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fakeConn returns the fake connection s is on.
func fakeConn(t testing.TB, f *zkfake.Server, s *session.Session) *zkfake.Conn {
	t.Helper()
	id := s.ID()
	for _, c := range f.Conns() {
		if id != 0 && c.SessionID() == id {
			return c
		}
	}
	t.Fatalf("no fake connection has session %#x", id)
	return nil
}

var acl = zk.WorldACL(zk.PermAll)

// makeNodes makes each node, an ephemeral of s's session, and its parent.
func makeNodes(t testing.TB, s *session.Session, nodes ...string) {
	t.Helper()
	zc := s.Conn()
	for _, n := range nodes {
		dir := n[:strings.LastIndex(n, "/")]
		for i := 1; i <= len(dir); i++ {
			if i == len(dir) || dir[i] == '/' {
				must(t, zc.CreatePersistent(dir[:i], nil, acl), "make "+dir[:i])
			}
		}
		must(t, zc.CreateEphemeral(n, nil, acl), "make "+n)
	}
}

// hold makes a lease for each group of nodes (made first), granted as the
// engine grants them, each node covered by a data watch of its own (so
// that the keeper sets none, and a delete ends the lease at once).
func hold(t testing.TB, s *session.Session, groups ...[]string) []*session.Hold {
	t.Helper()
	var covers []session.Cover
	for _, g := range groups {
		makeNodes(t, s, g...)
		for _, n := range g {
			_, _, err := s.Conn().GetW(n)
			must(t, err, "watch "+n)
			covers = append(covers, session.Cover{Own: true})
		}
	}
	return grant(t, s, groups, covers)
}

// grant grants groups, nodes that exist, with covers, after a confirmation
// of the session by the call just made on it.
func grant(t testing.TB, s *session.Session, groups [][]string, covers []session.Cover) []*session.Hold {
	t.Helper()
	deadline := time.Now().Add(long)
	for time.Now().Before(deadline) {
		st, id := s.State(), s.ID()
		if _, err := s.Conn().Exists("/"); err != nil { // a packet to confirm the session by
			t.Fatal(err)
		}
		s.Confirm(time.Now(), id)
		hs, err := s.Grant(session.Grant{Epoch: st.Epoch, Session: id, Groups: groups, Token: 1, Covers: covers})
		switch {
		case errors.Is(err, session.ErrUnconfirmed), err == nil && hs == nil:
			continue // the state moved under us: again
		case err != nil:
			t.Fatal(err)
		}
		return hs
	}
	t.Fatal("no grant")
	return nil
}

// makeMany makes n ephemeral sequential nodes of s's session under dir,
// in one multi, and returns them: a lease of many nodes (a MultiLock's),
// without a transaction per node.
func makeMany(t testing.TB, s *session.Session, dir string, n int) []string {
	t.Helper()
	makeNodes(t, s, dir+"/seed")
	prefixes := make([]string, n)
	for i := range prefixes {
		prefixes[i] = dir + "/n-"
	}
	out, err := s.Conn().CreateEach(prefixes, nil, func(string) []zk.ACL { return acl })
	must(t, err, "make ", n, " nodes under ", dir)
	return out
}

// opLog records the operations the fake applied, and lets a test hold one.
type opLog struct {
	mu  sync.Mutex
	ops []zkfake.Op
}

func (l *opLog) add(op zkfake.Op) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// count returns how many ops named name were made on path (any of their
// paths), or on any path if path is "".
func (l *opLog) count(name, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, op := range l.ops {
		if op.Name != name {
			continue
		}
		if path == "" {
			n++
			continue
		}
		for _, p := range op.Paths {
			if p == path {
				n++
				break
			}
		}
	}
	return n
}

// sizes returns the number of paths of each op named name, in order.
func (l *opLog) sizes(name string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, op := range l.ops {
		if op.Name == name {
			out = append(out, len(op.Paths))
		}
	}
	return out
}

// returnedWithin waits for ch, and fails the test if it is not closed
// within long.
func returnedWithin(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(long):
		t.Fatalf("%s did not return within %v", what, long)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// On a connection of Options.Connect's (the fake's: no wire), Open adds
// the credentials through the connection, each of them, and one refused
// fails Open, naming its scheme.
func TestOpenAddsCredentialsWithoutAWire(t *testing.T) {
	f := zkfake.New()
	var added []string
	var mu sync.Mutex
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "AddAuth" {
			mu.Lock()
			defer mu.Unlock()
			added = append(added, op.Name)
			if len(added) == 2 {
				return zk.ErrNoAuth
			}
		}
		return nil
	}})
	o := fakeOptions(f)
	o.Auth = []session.Auth{{Scheme: "digest", Auth: []byte("u:p")}, {Scheme: "second", Auth: []byte("x")}}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	s, err := session.Open(ctx, o)
	if err == nil {
		_ = s.Close()
	}
	if !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "auth second") || len(added) != 2 {
		t.Fatalf("Open with its second credential refused: %v after %d AddAuth; want zk.ErrNoAuth naming scheme second, after 2", err, len(added))
	}
}

// Under a chroot, what reaches the engine of a watch names the Client's
// path, and is there by the time a later reply is, as without one: the
// event on the watch's channel, and the event the Session's callback
// reads, which ends the lease of a node deleted on the server at once.
func TestChrootEventsCarryTheClientsPaths(t *testing.T) {
	f := zkfake.New()
	lost := make(chan error, 1)
	s := openFake(t, f, func(o *session.Options) {
		o.Root, o.RootACL = "/apps/billing", acl
		o.Hooks.Lost = func(_ *session.Hold, err error) {
			select {
			case lost <- err:
			default:
			}
		}
	})
	hold(t, s, []string{"/locks/a/n"})
	zc := s.Conn()
	must(t, zc.CreatePersistent("/locks/w", nil, acl), "make /locks/w")
	_, ch, err := zc.GetW("/locks/w")
	must(t, err, "watch /locks/w")

	must(t, f.Delete("/apps/billing/locks/w"), "delete /locks/w on the server")
	must(t, f.Delete("/apps/billing/locks/a/n"), "delete the held node on the server")
	_, err = zc.Exists("/") // a reply after both events
	must(t, err, "a round trip")

	select {
	case ev := <-ch:
		if !session.Deleted(ev) || ev.Path != "/locks/w" {
			t.Fatalf("the watch's channel got %v at %q, want EventNodeDeleted at /locks/w", ev.Type, ev.Path)
		}
	default:
		t.Fatal("the watch's event was not on its channel by the reply to a later request")
	}
	select {
	case err := <-lost:
		if !errors.Is(err, session.ErrNodeDeleted) || !strings.HasSuffix(err.Error(), ": /locks/a/n") {
			t.Fatalf("the lease was lost with %v, want session.ErrNodeDeleted naming /locks/a/n", err)
		}
	default:
		t.Fatal("the lease of the deleted node was not lost by the reply to a later request: the callback did not find it by its path")
	}
}
