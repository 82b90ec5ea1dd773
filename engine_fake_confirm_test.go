package zklock_test

// What moves a session's deadline: only writes the quorum acknowledged.

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeFailedAnnounceDoesNotConfirm: a semaphore waiter that holds
// tells its successors so with a write to its node (the announce); when
// that write fails, nothing was acknowledged, and the session's deadline
// must not move (Session.Confirm derives it from the packets sent a third
// of the timeout before an acknowledged write: a failed one proves
// nothing). The keeper's own confirmations are cut off meanwhile, so the
// deadline read before the handoff is the one after it, unless the failed
// announce is taken for an acknowledgement. The Client sends reads all
// along, so that a confirmation at the announce would find packets later
// than the one the create's confirmation found, and move the deadline.
func TestFakeFailedAnnounceDoesNotConfirm(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithSessionTimeout(timeout))
	other := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/fa/m")
	must(t, err)
	lm, err := m.Acquire(ctxT(t)) // a lease to read the session's deadline by
	must(t, err)
	so, err := zklock.NewSemaphore(other, "/fa/sem", 1)
	must(t, err)
	lo, err := so.Acquire(ctxT(t))
	must(t, err)
	sc, err := zklock.NewSemaphore(c, "/fa/sem", 1)
	must(t, err)

	stop := make(chan struct{})
	var traffic sync.WaitGroup
	traffic.Add(1)
	go func() { // reads, which confirm nothing
		defer traffic.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = zklock.Participants(ctxT(t), c, "/fa/m")
		}
	}()
	defer func() { close(stop); traffic.Wait() }()
	// A third of the timeout of reads, so that a confirmation finds one
	// sent that long before it.
	for start := time.Now(); time.Since(start) < timeout/3+timeout/10; {
		_, err := zklock.Participants(ctxT(t), c, "/fa/m")
		must(t, err)
	}

	conn := connOf(t, f, c)
	var announces atomic.Int32
	watching := make(chan struct{})
	var once sync.Once
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		switch {
		case op.Conn != conn:
		case op.Name == "Check":
			return zk.ErrConnectionClosed // the keeper's confirmations fail
		case (op.Name == "SetIf" || op.Name == "Register") && strings.HasPrefix(op.Paths[0], "/fa/sem/"):
			announces.Add(1)
			return zk.ErrConnectionClosed
		case op.Name == "GetW" && op.Paths[0] == lo.Node():
			once.Do(func() { close(watching) })
		}
		return nil
	}})
	w := async(sc.Acquire, ctxT(t))
	select {
	case <-watching: // created (and confirmed by the create), queued
	case <-time.After(long):
		t.Fatal("the semaphore waiter never waited")
	}
	before := lm.ValidUntil()
	// The announce comes a few of the wire's grains (its record of sent
	// packets keeps one per twenty-fourth of the timeout) after the create.
	for start := time.Now(); time.Since(start) < timeout/8; {
		_, err := zklock.Participants(ctxT(t), other, "/fa/sem")
		must(t, err)
	}
	release(t, lo)
	lc := await(t, w)
	after := lm.ValidUntil()
	if announces.Load() == 0 {
		t.Fatal("the waiter never announced its hold")
	}
	if !after.Equal(before) {
		t.Fatalf("the deadline moved from %v to %v at a failed announce", before.Format(time.StampMicro), after.Format(time.StampMicro))
	}
	f.SetHooks(zkfake.Hooks{})
	release(t, lc)
	release(t, lm)
}
