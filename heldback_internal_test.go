package zklock

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestMarkKnowsItsVersion: the version a mark records is the node's own
// after it, whether the mark wrote (a node without it, then one whose data
// someone replaced) or found itself there already: the wait checks our
// node's watch against it, and a version off by one would make every
// held-back waiter decide once more for nothing, or sleep through a
// Revoke (TestFakeSemaphoreRevokedBeforeItsWatch).
func TestMarkKnowsItsVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := zkfake.New()
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(f))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := NewSemaphore(c, "/mv/sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	l := s.layout.(zklockLayout).lock
	p := newQueueParticipant(c, l.path, []*Lock{l}, 1)
	if err := p.enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	w := p.ws[0]
	defer p.abandon()
	zc := c.s.Conn()
	check := func(what string) {
		t.Helper()
		data, st, err := zc.Get(w.nodes[0])
		if err != nil {
			t.Fatal(err)
		}
		if !heldBackData(data) || w.markedAt != st.Version {
			t.Fatalf("%s: node at version %d, data %q; the mark recorded %d", what, st.Version, data, w.markedAt)
		}
	}
	mark := func(what string) {
		t.Helper()
		if err := p.mark(w); err != nil {
			t.Fatal(err)
		}
		check(what)
	}
	mark("the first mark")
	mark("a mark already there")
	if err := zc.Set(w.nodes[0], revokeMessage); err != nil {
		t.Fatal(err)
	}
	mark("a mark after a Revoke")
}
