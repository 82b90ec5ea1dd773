package zklock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// A lease outlives many session timeouts while the server is healthy: the
// keeper keeps having the session confirmed and moves the deadline
// forward, also when acquires come and go on the same Client (which move
// the sleeping keeper's timer rather than wake it, and only when its
// schedule does not already cover them).
func TestLeaseOutlivesSessionTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	c := connect(t, zklock.WithSessionTimeout(timeout))
	held, err := newMutex(t, c, lockPath(t)).Acquire(ctxT(t))
	must(t, err)
	busy := newMutex(t, c, lockPath(t))
	for i := 0; i < 20; i++ { // acquires that come and go beside it
		l, err := busy.Acquire(ctxT(t))
		must(t, err)
		release(t, l)
	}
	// A lease granted while the keeper sleeps, then alone on the Client.
	alone, err := busy.Acquire(ctxT(t))
	must(t, err)
	release(t, held)

	first := alone.ValidUntil()
	end := time.Now().Add(3 * timeout)
	for time.Now().Before(end) {
		select {
		case <-alone.Done():
			t.Fatalf("the lease ended on a healthy server: %v", alone.Err())
		case <-time.After(timeout / 10):
		}
	}
	must(t, alone.Err(), "the lease after three session timeouts")
	if !alone.ValidUntil().After(first.Add(timeout)) {
		t.Fatalf("the deadline did not move forward: %v, then %v", first, alone.ValidUntil())
	}
	release(t, alone)
}

func TestReleaseTwice(t *testing.T) {
	t.Parallel()
	m := newMutex(t, connect(t), lockPath(t))
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if err := l.Err(); err != nil {
		t.Fatalf("a held lease has Err %v", err)
	}
	if closed(l.Done()) {
		t.Fatal("a held lease is done")
	}
	must(t, l.Release(ctxT(t)))
	if !closed(l.Done()) {
		t.Fatal("a released lease is not done")
	}
	mustIs(t, l.Err(), zklock.ErrReleased)
	mustIs(t, l.Release(ctxT(t)), zklock.ErrReleased, "a second Release")
}

// With WithLossOnDisconnect, Done closes while the session lives on: a
// disconnect alone ends the lease, and its node is deleted once the
// connection is back.
func TestHolderDisconnectSuspendsLease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, 10*time.Second, zklock.WithLossOnDisconnect())
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sid := a.SessionID()

	fa.Drop()
	select {
	case <-held.Done():
	case <-time.After(long):
		t.Fatal("lease not lost on disconnect")
	}
	mustIs(t, held.Err(), zklock.ErrConnectionSuspended)
	c := connect(t)
	eventually(t, func() bool { return len(children(t, c, path)) == 0 },
		"the lost lease's node is deleted after reconnecting")
	if id := a.SessionID(); id != sid {
		t.Fatalf("session %#x, want the same session %#x", id, sid)
	}
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
}

// By default a lease rides out a disconnect: the same session comes back,
// the quorum confirms it again, and the lease goes on without a gap, its
// node untouched and its deadline moved forward. (A leader election or a
// rolling restart drops connections this way and keeps sessions.)
func TestLeaseRidesOutDisconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sid := a.SessionID()
	before := held.ValidUntil()
	if !before.After(time.Now()) {
		t.Fatalf("a fresh lease's deadline %v is not ahead", before)
	}

	dropped := time.Now()
	fa.Drop()
	eventually(t, func() bool {
		return closed(held.Done()) || held.ValidUntil().After(dropped.Add(time.Second))
	}, "the lease is confirmed again after the drop, or lost")
	must(t, held.Err(), "the lease after the drop")
	if id := a.SessionID(); id != sid {
		t.Fatalf("session %#x, want the same session %#x", id, sid)
	}
	if kids := children(t, connect(t), path); len(kids) != 1 || path+"/"+kids[0] != held.Node() {
		t.Fatalf("children %v, want only the held node", kids)
	}
	_, err = newMutex(t, connect(t), path).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "the lock is still held")
	release(t, held)
}

// Once Done is closed, Err says one thing for good.
func TestErrStableAfterDone(t *testing.T) {
	t.Parallel()
	c, f := faulty(t, time.Second)
	m, err := zklock.NewMutex(c, lockPath(t))
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	f.Partition()
	<-l.Done()
	first := l.Err()
	mustIs(t, first, zklock.ErrLeaseExpired)
	must(t, f.PartitionUntilExpired(ctxT(t)), "let the session expire")
	f.Heal()
	if got := l.Err(); !errors.Is(got, zklock.ErrLeaseExpired) || errors.Is(got, zklock.ErrSessionExpired) {
		t.Fatalf("Err changed after Done: %v, then %v", first, got)
	}
}
