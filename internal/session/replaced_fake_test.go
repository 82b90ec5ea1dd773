package session_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// warnings is a slog.Handler that keeps the Warn records, with their
// attributes.
type warnings struct {
	mu   sync.Mutex
	recs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	w.mu.Lock()
	w.recs = append(w.recs, s)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) containing(sub string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.recs {
		if strings.Contains(r, sub) {
			out = append(out, r)
		}
	}
	return out
}

// lostLog records the leases the Session reports lost, with why.
type lostLog struct {
	mu   sync.Mutex
	errs map[*session.Hold]error
}

func (l *lostLog) lost(h *session.Hold, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[*session.Hold]error{}
	}
	l.errs[h] = err
}

func (l *lostLog) of(h *session.Hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs[h]
}

// openSwappable opens a Session on f that logs to w and reports lost
// leases to lost.
func openSwappable(t *testing.T, f *zkfake.Server, w *warnings, lost *lostLog) *session.Session {
	return openFake(t, f, func(o *session.Options) {
		o.Logger = slog.New(w)
		o.Hooks.Lost = lost.lost
	})
}

// A reconnect answered with another session (no StateExpired before it)
// ends every lease of the old session at the handshake, with
// ErrSessionReplaced (an ErrSessionExpired too), reported to Hooks.Lost,
// logged once naming both sessions; the old session's nodes are deleted
// while it still lives on the server, and the Session goes on in the new
// one.
func TestFakeSwappedSessionEndsLeasesAndDeletesItsNodes(t *testing.T) {
	f := zkfake.New()
	w, lost := &warnings{}, &lostLog{}
	s := openSwappable(t, f, w, lost)
	hs := hold(t, s, []string{"/a/n1"}, []string{"/b/n2", "/c/n3"})
	old := s.ID()

	c := fakeConn(t, f, s)
	c.Disconnect()
	c.ReconnectSwapped()
	for _, h := range hs {
		returnedWithin(t, h.Done(), "a lease of the swapped session")
		if err := h.Err(); !errors.Is(err, session.ErrSessionReplaced) || !errors.Is(err, session.ErrSessionExpired) {
			t.Fatalf("lease %v ended with %v; want ErrSessionReplaced, an ErrSessionExpired", h.Nodes(), err)
		}
		eventually(t, func() bool { return lost.of(h) != nil }, "Hooks.Lost of a lease of the swapped session")
		if err := lost.of(h); !errors.Is(err, session.ErrSessionReplaced) {
			t.Fatalf("Hooks.Lost of %v said %v; want ErrSessionReplaced", h.Nodes(), err)
		}
	}
	now := s.ID()
	if now == old || now == 0 {
		t.Fatalf("session %#x after the swap of %#x", now, old)
	}
	eventually(t, func() bool {
		return !f.Exists("/a/n1") && !f.Exists("/b/n2") && !f.Exists("/c/n3")
	}, "the swapped session's nodes deleted")
	live := false
	for _, id := range f.Sessions() {
		live = live || id == old
	}
	if !live {
		t.Fatal("the old session ended: the nodes went with it, not by our deletes")
	}
	warns := w.containing("another session")
	if len(warns) != 1 || !strings.Contains(warns[0], fmt.Sprintf("0x%x", old)) || !strings.Contains(warns[0], fmt.Sprintf("0x%x", now)) {
		t.Fatalf("warnings %q; want one naming 0x%x and 0x%x", warns, old, now)
	}
	if !errors.Is(s.Replaced(old), session.ErrSessionReplaced) || s.Replaced(now) != nil {
		t.Fatalf("Replaced(old) = %v, Replaced(new) = %v", s.Replaced(old), s.Replaced(now))
	}

	// The new session holds as any.
	h := hold(t, s, []string{"/a/n4"})[0]
	must(t, h.Release(ctxT(t)), "release in the new session")
}

// A cleanup of the swapped session's nodes, queued after the swap (an
// acquire that was waiting in it, abandoned), deletes what that session
// still owns, and nothing else: a node the old session does not own
// stays.
func TestFakeCleanupOfASwappedSessionChecksTheOwner(t *testing.T) {
	f := zkfake.New()
	s := openSwappable(t, f, &warnings{}, &lostLog{})
	makeNodes(t, s, "/w/mine")
	must(t, s.Conn().CreatePersistent("/w/other", nil, acl), "make /w/other")
	old := s.ID()
	c := fakeConn(t, f, s)
	c.Disconnect()
	c.ReconnectSwapped()
	eventually(t, func() bool { return s.State().Connected && s.ID() != old }, "the new session")

	s.Discard(session.Job{Nodes: []string{"/w/mine", "/w/other"}, Session: old})
	eventually(t, func() bool { return !f.Exists("/w/mine") }, "the old session's node deleted")
	if !f.Exists("/w/other") {
		t.Fatal("a node the old session did not own was deleted")
	}
}

// Not every new session is a swap: a session resumed keeps its leases,
// and a genuine expiry, even after a swap, ends them with
// ErrSessionExpired alone, its new session no swap either.
func TestFakeOnlyASwapIsASwap(t *testing.T) {
	f := zkfake.New()
	w, lost := &warnings{}, &lostLog{}
	s := openSwappable(t, f, w, lost)
	h := hold(t, s, []string{"/r/n1"})[0]
	c := fakeConn(t, f, s)
	c.Disconnect()
	c.Reconnect()
	eventually(t, func() bool { return s.State().Connected }, "the session resumed")
	if err := h.Err(); err != nil {
		t.Fatalf("a resumed session's lease ended: %v", err)
	}

	c.Disconnect()
	c.ReconnectSwapped()
	returnedWithin(t, h.Done(), "the swapped session's lease")
	swapped := s.ID()
	h2 := hold(t, s, []string{"/r/n2"})[0]
	f.Expire(swapped)
	returnedWithin(t, h2.Done(), "the expired session's lease")
	if err := h2.Err(); !errors.Is(err, session.ErrSessionExpired) || errors.Is(err, session.ErrSessionReplaced) {
		t.Fatalf("an expired session's lease ended with %v; want ErrSessionExpired alone", err)
	}
	eventually(t, func() bool { return s.State().Connected && s.ID() != swapped }, "a new session after the expiry")
	h3 := hold(t, s, []string{"/r/n3"})[0]
	if err := h3.Err(); err != nil {
		t.Fatalf("a lease of the session after the expiry: %v", err)
	}
	if n := len(w.containing("another session")); n != 1 {
		t.Fatalf("%d swaps logged; want the one", n)
	}
}
