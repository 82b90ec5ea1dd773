package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// Look.End drops the look: it is no longer active, and its path's record
// goes with the last look on it; a second End drops nothing more.
func TestLookEndDropsTheLook(t *testing.T) {
	s := openFake(t, zkfake.New())
	l := s.StartLook("/p")
	if !l.Active() {
		t.Fatal("a look just started is not active")
	}
	l.End()
	if l.Active() {
		t.Fatal("a look still active after End")
	}
	if n := s.LookedPaths(); n != 0 {
		t.Fatalf("a look ended, and %d paths still recorded", n)
	}
	other := s.StartLook("/p")
	l.End()
	if refs, _ := s.LooksOn("/p"); refs != 1 {
		t.Fatalf("a second End of one look dropped another's record: %d in flight, want 1", refs)
	}
	other.End()
	if n := s.LookedPaths(); n != 0 {
		t.Fatalf("every look ended, and %d paths still recorded", n)
	}
}

// Grant hands out leases only for a decision made in the connection's
// current state and session, before the deadline: after Close it says
// ErrClientClosed; for another state (an older epoch, a disconnect) or
// another session it says nothing (decide again); past the deadline it
// says ErrUnconfirmed.
func TestGrantRefusals(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = 600 * time.Millisecond })
	makeNodes(t, s, "/gr/a")
	try := func(epoch uint64, sid int64) ([]*session.Hold, error) {
		return s.Grant(session.Grant{Epoch: epoch, Session: sid, Groups: [][]string{{"/gr/a"}}, Token: 1, Covers: []session.Cover{{Own: true}}})
	}
	_, err := s.Conn().Exists("/")
	must(t, err)
	s.Confirm(time.Now(), s.ID())
	st, id := s.State(), s.ID()
	if hs, err := try(st.Epoch, id+1); hs != nil || err != nil {
		t.Fatalf("a grant for another session: %v, %v; want neither", hs, err)
	}
	if hs, err := try(st.Epoch-1, id); hs != nil || err != nil {
		t.Fatalf("a grant decided in an older state: %v, %v; want neither", hs, err)
	}

	conn := fakeConn(t, f, s)
	conn.Disconnect()
	eventually(t, func() bool { return !s.State().Connected }, "the session sees the connection down")
	if hs, err := try(s.State().Epoch, id); hs != nil || err != nil {
		t.Fatalf("a grant while disconnected: %v, %v; want neither", hs, err)
	}
	conn.Reconnect()
	eventually(t, func() bool { return s.State().Connected }, "the connection back")

	_, deadline := s.Confirmed()
	eventually(t, func() bool { return time.Now().After(deadline) }, "the deadline passed")
	if hs, err := try(s.State().Epoch, id); hs != nil || !errors.Is(err, session.ErrUnconfirmed) {
		t.Fatalf("a grant past the deadline: %v, %v; want ErrUnconfirmed", hs, err)
	}

	st = s.State()
	must(t, s.Close())
	if hs, err := try(st.Epoch, id); hs != nil || !errors.Is(err, session.ErrClientClosed) {
		t.Fatalf("a grant after Close: %v, %v; want ErrClientClosed", hs, err)
	}
}

// A lease granted while the keeper sleeps with nothing to do wakes it; the
// keeper then has the session confirmed every third of the timeout, so
// that the lease outlives the timeout many times over.
func TestGrantWakesTheKeeperWhichKeepsConfirming(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 600 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	eventually(t, s.KeeperAsleep, "the idle keeper asleep")
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error { log.add(op); return nil }})
	h := hold(t, s, []string{"/gw/a"})[0]
	eventually(t, func() bool { return log.count("Check", "/gw/a") > 0 }, "the keeper confirms the session with the held node")
	granted := h.Granted()
	eventually(t, func() bool { return time.Since(granted) > 2*timeout }, "twice the timeout")
	if err := h.Err(); err != nil {
		t.Fatalf("a lease of a live session, held for twice the timeout: %v", err)
	}
	if n := log.count("Check", "/gw/a"); n < 4 {
		t.Fatalf("%d confirmations in twice the timeout, want one every third of it", n)
	}
}

// AwaitConfirmed returns when the quorum confirms the session, when its
// state changes, or when ctx ends.
func TestAwaitConfirmed(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = 300 * time.Millisecond })
	await := func(ctx context.Context, st session.Snapshot) <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- s.AwaitConfirmed(ctx, st) }()
		return ch
	}
	within := func(ch <-chan error, what string) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(long):
			t.Fatalf("AwaitConfirmed did not return on %s", what)
			return nil
		}
	}

	ctx, cancel := context.WithCancel(ctxT(t))
	ch := await(ctx, s.State())
	cancel()
	if err := within(ch, "its ctx's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitConfirmed: %v, want its ctx's error", err)
	}

	// Confirmations that move the deadline, until one comes after the
	// wait began (it cannot be told when it has).
	ch = await(ctxT(t), s.State())
	var err error
	eventually(t, func() bool {
		_, xerr := s.Conn().Exists("/")
		must(t, xerr)
		s.Confirm(time.Now(), s.ID())
		select {
		case err = <-ch:
			return true
		default:
			return false
		}
	}, "AwaitConfirmed returns on a confirmation")
	must(t, err)

	ch = await(ctxT(t), s.State())
	conn := fakeConn(t, f, s)
	conn.Disconnect()
	must(t, within(ch, "a state change"))
	conn.Reconnect()
}

// A lease lost while its session lives (here, to a disconnect, with the
// policy that ends leases then) is forgotten, the recipes hear of it
// once, and its node goes to the janitor, which deletes it once the
// connection is back.
func TestLostLeaseIsForgottenAndItsNodeDeleted(t *testing.T) {
	f := zkfake.New()
	var mu sync.Mutex
	var lost []error
	s := openFake(t, f, func(o *session.Options) {
		o.LossOnDrop = true
		o.Hooks.Lost = func(_ *session.Hold, err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() }
	})
	h := hold(t, s, []string{"/ll/a"})[0]
	conn := fakeConn(t, f, s)
	conn.Disconnect()
	returnedWithin(t, h.Done(), "the lease, at the disconnect")
	if err := h.Err(); !errors.Is(err, session.ErrConnectionSuspended) {
		t.Fatalf("lease ended with %v, want ErrConnectionSuspended", err)
	}
	if v := s.KeeperView(); len(v.Nodes) != 0 {
		t.Fatalf("the keeper still checks the lost lease's node: %v", v.Nodes)
	}
	conn.Reconnect()
	eventually(t, func() bool { return !f.Exists("/ll/a") }, "the janitor deletes the lost lease's node")
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !errors.Is(lost[0], session.ErrConnectionSuspended) {
		t.Fatalf("the recipes heard of losses %v, want the one", lost)
	}
}
