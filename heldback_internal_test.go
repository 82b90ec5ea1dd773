package zklock

import "testing"

// TestMarkKnowsItsVersion: the version a mark records is the node's own
// after it, whether the mark wrote (a node without it, then one whose data
// someone replaced) or found itself there already: the wait checks our
// node's watch against it, and a version off by one would make every
// held-back waiter decide once more for nothing, or sleep through a
// Revoke (TestFakeSemaphoreRevokedBeforeItsWatch).
func TestMarkKnowsItsVersion(t *testing.T) {
	_, _, c, p := enqueuedOnFake(t, func(c *Client) (*Lock, error) {
		s, err := NewSemaphore(c, "/mv/sem", 2)
		if err != nil {
			return nil, err
		}
		return s.layout.(zklockLayout).lock, nil
	})
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
