package session_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A confirmation that arrives for a session the connection no longer has
// (the keeper's check was answered, then the session expired), or after
// Close, does not move the deadline: the deadline is the current
// session's, and only a write acknowledged in it says anything of it.
func TestConfirmIgnoredForAnotherSessionOrAfterClose(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	old := s.ID()
	f.Expire(old)
	eventually(t, func() bool { id := s.ID(); return id != 0 && id != old && s.State().Connected }, "a new session")
	sid, deadline := s.Confirmed()
	_, err := s.Conn().Exists("/") // a packet of the new connection: Confirm's w
	must(t, err)
	s.Confirm(time.Now(), old)
	if sid2, deadline2 := s.Confirmed(); sid2 != sid || !deadline2.Equal(deadline) {
		t.Fatalf("a confirmation of the expired session %#x moved the deadline to %v (of session %#x)", old, deadline2, sid2)
	}
	s.Confirm(time.Now(), s.ID())
	if sid2, deadline2 := s.Confirmed(); sid2 != s.ID() || !deadline2.After(time.Now()) {
		t.Fatalf("a confirmation of the session gave a deadline %v of session %#x", deadline2, sid2)
	}

	c := openFake(t, f)
	id := c.ID()
	_, err = c.Conn().Exists("/")
	must(t, err)
	sid, deadline = c.Confirmed()
	must(t, c.Close())
	c.Confirm(time.Now(), id)
	if sid2, deadline2 := c.Confirmed(); sid2 != sid || !deadline2.Equal(deadline) {
		t.Fatalf("a confirmation after Close moved the deadline to %v (of session %#x)", deadline2, sid2)
	}
}

// Open, when its first connection cannot be opened, stops the keeper it
// started and returns the error.
func TestFailedOpenStopsTheKeeper(t *testing.T) {
	boom := errors.New("no connection for you")
	o := fakeOptions(zkfake.New())
	o.Connect = func(time.Duration, func(zk.Event)) (session.Conn, error) { return nil, boom }
	done := make(chan error, 1)
	go func() {
		_, err := session.Open(context.Background(), o)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("Open: %v, want the connection's error", err)
		}
	case <-time.After(long):
		t.Fatal("Open did not return when its connection could not be opened")
	}
}

// The keeper checks the nodes of the current session's waiters, not those
// of an earlier session's, and counts the wait from the earliest of them.
func TestKeeperChecksOnlyThisSessionsWaiters(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	id := s.ID()
	makeNodes(t, s, "/k/old", "/k/first", "/k/second") // so that a check finds them all
	_, done := s.Waiting("/k/old", id+1)               // an earlier session's, its end not recorded yet
	defer done()
	laterThan(s.Waiters()["/k/old"])
	_, done = s.Waiting("/k/first", id)
	defer done()
	first := s.Waiters()["/k/first"]
	laterThan(first)
	_, done = s.Waiting("/k/second", id)
	defer done()

	v := s.KeeperView()
	sort.Strings(v.Nodes)
	if fmt.Sprint(v.Nodes) != "[/k/first /k/second]" {
		t.Fatalf("the keeper checks %v, want this session's waiters' nodes", v.Nodes)
	}
	if !v.WaitSince.Equal(first) {
		t.Fatalf("waiting since %v, want the earliest of this session's waiters (%v)", v.WaitSince, first)
	}
}

// laterThan returns once the clock reads later than t, so that the next
// time taken differs from it.
func laterThan(t time.Time) {
	for !time.Now().After(t) {
		runtime.Gosched()
	}
}

// A confirmation that succeeds holds nothing off: held nodes due for a
// watch are armed at once. One that fails holds the keeper's requests
// off for a twelfth of the timeout, so that it does not hammer a
// connection that is failing.
func TestConfirmationDoesNotHoldOffArming(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/c/a")
	_, done := s.Waiting("/c/a", s.ID())
	defer done()
	dk := s.DetachedKeeper()
	now := time.Now()
	if !dk.Confirm() {
		t.Fatal("the keeper would not confirm the session of a waiter")
	}
	if due := dk.ArmingDue(now); !due.Equal(now) {
		t.Fatalf("after a confirmation, arming due at %v is held off until %v", now, due)
	}

	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Check" {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	before := time.Now()
	dk.Confirm()
	if due := dk.ArmingDue(before); due.Before(before.Add(testTimeout / 12)) {
		t.Fatalf("after a failed confirmation, arming is due at %v, %v later", due, due.Sub(before))
	}
	if due := dk.ConfirmationDue(); due.Before(before.Add(testTimeout / 12)) {
		t.Fatalf("after a failed confirmation, the next is due %v later", due.Sub(before))
	}
}

// The keeper opens a new connection only once no server has taken the
// session for twice its timeout: never while connected, and not before any
// server answered at all (Open's first connection is still trying).
func TestNoRejoinBeforeAnyServerAnswered(t *testing.T) {
	s := openFake(t, zkfake.New())
	dk := s.DetachedKeeper()
	if due, acts := dk.Rejoin(false, time.Time{}); acts {
		t.Fatalf("a new connection due at %v before any server answered", due)
	}
	down := time.Now().Add(-time.Hour)
	if _, acts := dk.Rejoin(true, down); acts {
		t.Fatal("a new connection while connected")
	}
	if due, acts := dk.Rejoin(false, down); !acts || !due.Equal(down.Add(2*testTimeout)) {
		t.Fatalf("down since %v: a new connection due at %v (%v), want twice the timeout later", down, due, acts)
	}
}

// An idle keeper sleeps (it has nothing to do until something is held or
// awaited), rather than spinning.
func TestIdleKeeperSleeps(t *testing.T) {
	s := openFake(t, zkfake.New())
	eventually(t, s.KeeperAsleep, "the idle keeper asleep")
}
