package session

import (
	"testing"
	"time"
)

// sentByOn is the anchor of the deadline: the latest packet that went out no
// later than a time, never a later one (that would make the deadline late),
// and the connect request when no packet is that old.
func TestWireSentBy(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var s sendClock
	r := s.begin()
	r.first, r.sent = at(0), []time.Time{at(0), at(100), at(250), at(900)}
	for _, tc := range []struct {
		by, want int
	}{
		{-50, 0}, // nothing that old: the connect request
		{0, 0},
		{99, 0},
		{100, 100},
		{899, 250},
		{5000, 900},
	} {
		if got := s.sentByOn(t0, at(tc.by)); !got.Equal(at(tc.want)) {
			t.Errorf("sentByOn(+%dms) = +%v, want +%dms", tc.by, got.Sub(t0), tc.want)
		}
	}
	if got := (&sendClock{}).sentByOn(t0, t0); !got.IsZero() {
		t.Errorf("no connection yet: sentByOn = %v, want zero", got)
	}
}

// The record of sent packets is thinned to one per grain, erring early,
// and forgets what is older than twice the timeout; every packet a
// connection writes is recorded.
func TestWireRecordsPackets(t *testing.T) {
	w := testWire(Options{})
	w.hs.grant(2400 * time.Millisecond) // a grain of 100ms
	c := w.newConn(nopConn{}, "zk1:2181")
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.sent.sent) != 1 || !c.sent.sent[0].Equal(c.sent.first) {
		t.Fatalf("50 writes within a grain kept %d entries, want the first only", len(c.sent.sent))
	}
	old := time.Now().Add(-3 * w.hs.timeout())
	c.sent.sent = []time.Time{old, old.Add(time.Second)}
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	if len(c.sent.sent) != 1 {
		t.Fatalf("kept %d entries, want only the newest: the others are older than twice the timeout", len(c.sent.sent))
	}
}

// sentByOn answers only for the connection a request went out on: a write
// sent before the current connection's connect request went out on an
// earlier one, and anchors nothing here.
func TestWireSentByOnlyOnTheWritesConnection(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var s sendClock
	r := s.begin()
	r.first, r.sent = at(1000), []time.Time{at(1000), at(1100)}
	if got := s.sentByOn(at(900), at(900)); !got.IsZero() {
		t.Fatalf("a write sent at +900ms, before the connection's connect request at +1000ms: anchor %v, want none", got.Sub(t0))
	}
	if got := s.sentByOn(at(1200), at(1150)); !got.Equal(at(1100)) {
		t.Fatalf("a write on the current connection: anchor +%v, want +1100ms", got.Sub(t0))
	}
}
