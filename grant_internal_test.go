package zklock

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestGrantOfAnEarlierEpochDecidesAgain: a participant that decided it
// holds, and whose connection then dropped and came back before its grant,
// is granted nothing (the Session refuses a decision read in another
// epoch: its watches may be gone), and is told to decide again, not handed
// an empty set of leases; deciding again, it holds. The window between the
// last read and the grant has no ZooKeeper operation a hook could stop in,
// so the test steps the participant itself.
func TestGrantOfAnEarlierEpochDecidesAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := zkfake.New()
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(f))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := NewMutex(c, "/ge/lock")
	if err != nil {
		t.Fatal(err)
	}
	p := newQueueParticipant(c, m.lock.path, []*Lock{m.lock}, 1)
	if err := p.enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := p.ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b backoff.BackOff
	if err := p.step(ctx, p.ws[0], st, &b); err != nil || !p.ws[0].held {
		t.Fatalf("the first look: %v, held %v; want it to hold", err, p.ws[0].held)
	}

	conn := f.Conns()[0]
	conn.Disconnect()
	conn.Reconnect()
	for s := c.s.State(); s.Epoch == st.Epoch || !s.Connected; s = c.s.State() {
		select {
		case <-s.Changed:
		case <-ctx.Done():
			t.Fatal("the Session never saw the reconnect")
		}
	}
	leases, err := p.grant(ctx, st)
	if leases != nil || err != nil {
		t.Fatalf("a grant of a decision made before a reconnect: %v, %v; want nil, nil", leases, err)
	}

	leases, err = p.await(ctx)
	if err != nil || len(leases) != 1 {
		t.Fatalf("deciding again: %v, %v; want one lease", leases, err)
	}
	if n := f.Children("/ge/lock"); len(n) != 1 || "/ge/lock/"+n[0] != leases[0].Node() {
		t.Fatalf("children %v, lease on %s", n, leases[0].Node())
	}
	if err := leases[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
}
