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
	ctx, f, c, p := enqueuedOnFake(t, func(c *Client) (*Lock, error) {
		m, err := NewMutex(c, "/ge/lock")
		if err != nil {
			return nil, err
		}
		return m.lock, nil
	})
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

// enqueuedOnFake connects a Client to a new fake, makes a lock on it with
// mk, and queues a participant of one node on that lock: the start of the
// tests that step a participant themselves.
func enqueuedOnFake(t *testing.T, mk func(*Client) (*Lock, error)) (context.Context, *zkfake.Server, *Client, *participant) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f := zkfake.New()
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(f))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := mk(c)
	if err != nil {
		t.Fatal(err)
	}
	p := newQueueParticipant(c, l.path, []*Lock{l}, 1)
	if err := p.enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, f, c, p
}
