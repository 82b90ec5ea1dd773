package zklock_test

import (
	"testing"

	"github.com/zkrecipes/zklock"
)

// An uncontended acquire and release costs the floor: one create, one
// getChildren (sent right behind the create, whose result it already
// shows) and one delete; the token needs no request of its own.
func TestUncontendedAcquireRequests(t *testing.T) {
	t.Parallel()
	var rc reqCounter
	c := connect(t, zklock.WithDialer(rc.dial))
	m := newMutex(t, c, lockPath(t))
	acquire := func() *zklock.Lease {
		l, err := m.Acquire(ctxT(t))
		must(t, err)
		return l
	}
	release(t, acquire()) // the path exists from here on
	before := rc.snapshot()
	const cycles = 20
	for i := 0; i < cycles; i++ {
		release(t, acquire())
	}
	got := rc.snapshot().minus(before)
	const (
		opCreate       = 1
		opDelete       = 2
		opGetChildren2 = 12
	)
	for _, op := range []int32{opCreate, opGetChildren2, opDelete} {
		if got[op] != cycles {
			t.Fatalf("%d cycles made %s: want one %s each", cycles, got.per(1), opName(op))
		}
	}
}
