package session_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
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
	mine := makeMany(t, s, "/k", 8) // they exist, so that the keeper's checks find them
	old := makeMany(t, s, "/k-old", 1)[0]
	_, done := s.Waiting(old, id+1) // an earlier session's, its end not recorded yet
	defer done()
	laterThan(s.Waiters()[old])
	var first time.Time
	for i, n := range mine {
		_, done := s.Waiting(n, id)
		defer done()
		if i == 0 {
			first = s.Waiters()[n]
		}
		laterThan(s.Waiters()[n])
	}
	for i := 0; i < 4; i++ { // map order differs each time
		v := s.KeeperView()
		sort.Strings(v.Nodes)
		if fmt.Sprint(v.Nodes) != fmt.Sprint(mine) {
			t.Fatalf("the keeper checks %v, want this session's waiters' nodes %v", v.Nodes, mine)
		}
		if !v.WaitSince.Equal(first) {
			t.Fatalf("waiting since %v, want the earliest of this session's waiters (%v)", v.WaitSince, first)
		}
	}
}

// A confirmation checks at most maxChecked (64) nodes, waiters' first:
// no watch tells a waiter its node is gone.
func TestKeeperChecksAtMostMaxNodes(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	waited := makeMany(t, s, "/m/w", 40)
	more := makeMany(t, s, "/m/x", 30)
	for _, n := range waited {
		_, done := s.Waiting(n, s.ID())
		defer done()
	}
	held := makeMany(t, s, "/m/h", 40)
	var groups [][]string
	var covers []session.Cover
	for _, n := range held {
		groups = append(groups, []string{n})
		covers = append(covers, session.Cover{Own: true})
	}
	grant(t, s, groups, covers)
	v := s.KeeperView()
	if len(v.Nodes) != 64 {
		t.Fatalf("the keeper checks %d nodes, want 64", len(v.Nodes))
	}
	checked := map[string]bool{}
	for _, n := range v.Nodes {
		checked[n] = true
	}
	for _, n := range waited {
		if !checked[n] {
			t.Fatalf("waiter's node %s not checked; held nodes were", n)
		}
	}

	// More waiters than that: 64 of them, and no held node.
	for _, n := range more {
		_, done := s.Waiting(n, s.ID())
		defer done()
	}
	v = s.KeeperView()
	if len(v.Nodes) != 64 {
		t.Fatalf("with 70 waiters, the keeper checks %d nodes, want 64", len(v.Nodes))
	}
	for _, n := range held {
		for _, c := range v.Nodes {
			if c == n {
				t.Fatalf("held node %s checked before waiters' nodes", n)
			}
		}
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
// awaited), and stays asleep: nothing wakes it, not even its timer.
func TestIdleKeeperSleeps(t *testing.T) {
	s := openFake(t, zkfake.New())
	eventually(t, s.KeeperAsleep, "the idle keeper asleep")
	for i := 0; i < 2000; i++ {
		runtime.Gosched()
		if !s.KeeperAsleep() {
			t.Fatalf("the idle keeper woke (look %d)", i)
		}
	}
}

// Confirmations may complete out of order: one for an older write never
// moves the deadline back.
func TestConfirmNeverMovesTheDeadlineBack(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 300 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	early := time.Now() // w for a write sent now: the connection's first packet
	// A packet recorded apart from those of Open (one is kept per 24th of
	// the timeout).
	eventually(t, func() bool { return time.Since(early) > timeout/10 }, "a tenth of the timeout since Open")
	_, err := s.Conn().Exists("/")
	must(t, err)
	packet := time.Now()
	eventually(t, func() bool { return time.Since(packet) > timeout/3+timeout/10 }, "a third of the timeout since the packet")
	s.Confirm(time.Now(), s.ID()) // w: the packet
	_, deadline := s.Confirmed()
	s.Confirm(early, s.ID())
	if _, d := s.Confirmed(); !d.Equal(deadline) {
		t.Fatalf("a confirmation of an older write moved the deadline from %v to %v", deadline, d)
	}
}

// The keeper ends the leases at their deadline, also while the connection
// is down (it sets no watch then: the request would wait for the
// connection, and the keeper with it).
func TestKeeperEndsLeasesAtTheDeadline(t *testing.T) {
	t.Parallel() // it waits on the clock
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = 600 * time.Millisecond })
	makeNodes(t, s, "/ke/a", "/ke/b")
	hs := grant(t, s, [][]string{{"/ke/a"}, {"/ke/b"}}, []session.Cover{{Own: true}, {}}) // b: the keeper watches it
	fakeConn(t, f, s).Disconnect()
	for _, h := range hs {
		select {
		case <-h.Done():
		case <-time.After(long):
			t.Fatalf("lease %s not ended by %v, its deadline", h.Nodes()[0], h.ValidUntil())
		}
		if err := h.Err(); !errors.Is(err, session.ErrLeaseExpired) {
			t.Fatalf("lease ended with %v, want ErrLeaseExpired", err)
		}
	}
}

// An arming that fails holds the keeper's next arming off a twelfth of the
// timeout; one that succeeds holds nothing off.
func TestFailedArmingHoldsOffArming(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 600 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	makeNodes(t, s, "/fa/w", "/fa/a")
	// The keeper's own goroutine is held in a confirmation for a waiter,
	// before the node is granted, so that the held node's arming is left
	// to the test's keeper. (Without waiting for that, the keeper's own
	// goroutine may be arming the node itself when the test's keeper
	// looks, and find nothing due.)
	var failGetW atomic.Bool
	failGetW.Store(true)
	entered, _ := gatedChecks(t, f, func(op zkfake.Op) error {
		if op.Name == "GetW" && op.Paths[0] == "/fa/a" && failGetW.Load() {
			return zk.ErrConnectionClosed
		}
		return nil
	})
	_, done := s.Waiting("/fa/w", s.ID())
	defer done()
	awaitEntered(t, entered, "the keeper did not check the waiter's node")
	h := grant(t, s, [][]string{{"/fa/a"}}, []session.Cover{{}})[0]
	due := h.Granted().Add(timeout / 20)
	eventually(t, func() bool { return time.Now().After(due) }, "the node due for its watch")
	dk := s.DetachedKeeper()
	before := time.Now()
	if !dk.Arm() {
		t.Fatal("the keeper would not arm a node due for its watch")
	}
	if next := dk.ArmingDue(time.Now()); next.Before(before.Add(timeout / 12)) {
		t.Fatalf("after a failed arming, the next is due %v later, want a twelfth of the timeout", next.Sub(before))
	}
	failGetW.Store(false)
	dk = s.DetachedKeeper() // no retry pending
	if !dk.Arm() {
		t.Fatal("the node handed back after a failed arming is not due")
	}
	now := time.Now()
	if next := dk.ArmingDue(now); !next.Equal(now) {
		t.Fatalf("after an arming that succeeded, the next is held off until %v", next)
	}
	if cv := s.CoverOf("/fa/a"); cv != "" {
		t.Fatalf("an armed node is still covered by %q", cv)
	}
}

// While anyone waits, the keeper checks the waiters' nodes at least every
// third of the timeout, counted from the wait's start or its own last
// check, whichever is later, even when confirmations are not due yet;
// when a confirmation is due sooner, it comes first.
func TestWaitersCheckedEveryThirdOfTheTimeout(t *testing.T) {
	const third = testTimeout / 3
	f := zkfake.New()
	setUp := func(node string, waitFirst bool) (s *session.Session, wait, confirmed time.Time) {
		s = openFake(t, f)
		makeNodes(t, s, node)
		confirm := func() {
			_, err := s.Conn().Exists("/")
			must(t, err)
			confirmed = time.Now()
			s.Confirm(confirmed, s.ID())
		}
		if !waitFirst {
			confirm()
			laterThan(confirmed)
		}
		_, done := s.Waiting(node, s.ID())
		t.Cleanup(done)
		wait = s.Waiters()[node]
		if waitFirst {
			laterThan(wait)
			confirm()
		}
		return s, wait, confirmed
	}

	s, wait, _ := setUp("/wt/a", true)
	if due := s.DetachedKeeper().ConfirmationDue(); !due.Equal(wait.Add(third)) {
		t.Fatalf("confirmed after the wait began: the waiter's check due at %v, want a third of the timeout after the wait began (%v)", due, wait.Add(third))
	}
	dk := s.DetachedKeeper()
	before := time.Now()
	dk.Confirm()
	after := time.Now()
	if due := dk.ConfirmationDue(); due.Before(before.Add(third)) || due.After(after.Add(third)) {
		t.Fatalf("after the keeper's check, the next is due %v after it, want a third of the timeout", due.Sub(before))
	}

	s, _, confirmed := setUp("/wt/b", false)
	if due := s.DetachedKeeper().ConfirmationDue(); !due.Equal(confirmed.Add(third)) {
		t.Fatalf("a wait that began after the confirmation: the next due at %v, want the confirmation's (%v)", due, confirmed.Add(third))
	}
}

// A confirmation that fails while the deadline is behind (nothing
// confirmed yet) holds the next one off a twelfth of the timeout, rather
// than retrying at once, again and again.
func TestFailedConfirmationHoldsOffTheNext(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/fc/w")
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Check" {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	_, done := s.Waiting("/fc/w", s.ID())
	defer done()
	dk := s.DetachedKeeper()
	if due := dk.ConfirmationDue(); due.After(time.Now()) {
		t.Fatalf("nothing confirmed yet, and the first confirmation is due at %v", due)
	}
	before := time.Now()
	dk.Confirm()
	if due := dk.ConfirmationDue(); due.Before(before.Add(testTimeout / 12)) {
		t.Fatalf("after a failed confirmation, the next is due %v later, want a twelfth of the timeout", due.Sub(before))
	}
}

// When no server takes the session for twice its timeout, the keeper opens
// a new connection (a new session), not sooner; also while it has a
// waiter to confirm the session for (it sends nothing while disconnected,
// where a request would wait for the connection, and the keeper with it).
func TestKeeperRejoinsAfterTwiceTheTimeoutDown(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 300 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	makeNodes(t, s, "/kr/w")
	_, done := s.Waiting("/kr/w", s.ID())
	defer done()
	gen := s.Gen()
	down := time.Now()
	fakeConn(t, f, s).Disconnect()
	eventually(t, func() bool { return s.Gen() != gen }, "a new connection")
	if replaced := time.Now(); replaced.Before(down.Add(2 * timeout)) {
		t.Fatalf("a new connection %v after the drop, want twice the timeout", replaced.Sub(down))
	}
	eventually(t, func() bool { return s.State().Connected && s.ID() != 0 }, "the new connection's session")
}

// gatedChecks makes the fake hold every Check until the returned function
// is called (at the latest when the test ends), and tells on entered when
// one is held; other, if given, decides every other op (nil: none fails).
func gatedChecks(t *testing.T, f *zkfake.Server, other ...func(zkfake.Op) error) (entered <-chan struct{}, open func()) {
	gate, in := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name != "Check" {
			for _, o := range other {
				if err := o(op); err != nil {
					return err
				}
			}
			return nil
		}
		select {
		case in <- struct{}{}:
		default:
		}
		<-gate
		return nil
	}})
	return in, open
}

// awaitEntered waits until a Check is held (gatedChecks), or fails with
// what.
func awaitEntered(t *testing.T, entered <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(long):
		t.Fatal(what)
	}
}

// The leases end at their deadline even while the keeper's check hangs
// (a follower cut off from the quorum holds it); but a deadline that the
// engine's own writes moved meanwhile counts: the keeper ends nothing
// before it.
func TestLeasesEndAtTheDeadlineWhileTheCheckHangs(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 600 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	entered, _ := gatedChecks(t, f)
	h := hold(t, s, []string{"/lh/a"})[0]
	awaitEntered(t, entered, "the keeper did not check the held node")
	// Confirmations by other writes, while the check hangs.
	first := h.ValidUntil()
	eventually(t, func() bool {
		_, err := s.Conn().Exists("/")
		must(t, err)
		s.Confirm(time.Now(), s.ID())
		return time.Now().After(first.Add(timeout / 10))
	}, "past the deadline the keeper's check began with")
	if err := h.Err(); err != nil {
		t.Fatalf("a lease whose deadline other writes moved ended at the old one: %v", err)
	}
	// No more confirmations: the lease ends at its deadline.
	awaitExpired(t, h, "the keeper's check")
}

// awaitExpired waits for h to end at its deadline, while what hangs.
func awaitExpired(t *testing.T, h *session.Hold, what string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(long):
		t.Fatalf("the lease outlived its deadline %v while %s hung", h.ValidUntil(), what)
	}
	if err := h.Err(); !errors.Is(err, session.ErrLeaseExpired) {
		t.Fatalf("lease ended with %v, want ErrLeaseExpired", err)
	}
}

// An arming that finds the node gone ends its lease.
func TestArmingFindsANodeGone(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 600 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	makeNodes(t, s, "/ag/w", "/ag/a")
	entered, _ := gatedChecks(t, f) // the keeper's own goroutine held in a check
	_, done := s.Waiting("/ag/w", s.ID())
	defer done()
	awaitEntered(t, entered, "the keeper did not check the waiter's node")
	h := grant(t, s, [][]string{{"/ag/a"}}, []session.Cover{{}})[0]
	must(t, f.Delete("/ag/a"))
	due := h.Granted().Add(timeout / 20)
	eventually(t, func() bool { return time.Now().After(due) }, "the node due for its watch")
	if !s.DetachedKeeper().Arm() {
		t.Fatal("the keeper would not arm a node due for its watch")
	}
	if err := h.Err(); !errors.Is(err, session.ErrNodeDeleted) {
		t.Fatalf("a lease whose node the arming found gone: %v, want ErrNodeDeleted", err)
	}
}

// The sweep after a reconnect (sweep.go) checks held nodes as a
// confirmation does, and like it never holds the leases past their
// deadline while its check hangs (a follower cut off from the quorum holds
// a write for two thirds of the timeout before the connection fails).
func TestLeasesEndAtTheDeadlineWhileTheSweepHangs(t *testing.T) {
	t.Parallel() // it waits on the clock
	const timeout = 600 * time.Millisecond
	f := zkfake.New()
	s := openFake(t, f, func(o *session.Options) { o.SessionTimeout = timeout })
	h := hold(t, s, []string{"/sh/a"})[0]
	conn := fakeConn(t, f, s)
	conn.Disconnect()
	entered, _ := gatedChecks(t, f)
	conn.Reconnect()
	awaitEntered(t, entered, "no check after the reconnect")
	awaitExpired(t, h, "the sweep's check")
}
