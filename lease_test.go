package zklock_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// A lease outlives many session timeouts while the server is healthy: the
// keeper keeps having the session confirmed and moves the deadline
// forward, also when acquires come and go on the same Client (which wake
// the keeper only when its schedule does not already cover them).
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
