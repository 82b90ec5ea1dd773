package session

import (
	"net"
	"testing"
	"time"
)

// sentBy is the anchor of the deadline: the latest packet that went out no
// later than a time, never a later one (that would make the deadline late),
// and the connect request when no packet is that old.
func TestWireSentBy(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := &wire{timeout: 2400 * time.Millisecond} // a grain of 100ms
	w.cur = &wireConn{w: w, first: at(0), sent: []time.Time{at(0), at(100), at(250), at(900)}}
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
		if got := w.sentBy(at(tc.by)); !got.Equal(at(tc.want)) {
			t.Errorf("sentBy(+%dms) = +%v, want +%dms", tc.by, got.Sub(t0), tc.want)
		}
	}
	if got := (&wire{}).sentBy(t0); !got.IsZero() {
		t.Errorf("no connection yet: sentBy = %v, want zero", got)
	}
}

// The record of sent packets is thinned to one per grain, erring early,
// and forgets what is older than twice the timeout.
func TestWireRecordsPackets(t *testing.T) {
	w := &wire{timeout: 2400 * time.Millisecond}
	c := &wireConn{Conn: nopConn{}, w: w}
	w.cur = c
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.sent) != 1 || !c.sent[0].Equal(c.first) {
		t.Fatalf("50 writes within a grain kept %d entries, want the first only", len(c.sent))
	}
	old := time.Now().Add(-3 * w.timeout)
	c.sent = []time.Time{old, old.Add(time.Second)}
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 1 {
		t.Fatalf("kept %d entries, want only the newest: the others are older than twice the timeout", len(c.sent))
	}
}

// The connect response's timeout is read off the wire, whatever the reads'
// sizes.
func TestWireReadsGrantedTimeout(t *testing.T) {
	w := &wire{}
	resp := connectResponse(4000, 7)
	conn := &bytesConn{data: resp, chunk: 5}
	c := newWireConn(conn, w)
	buf := make([]byte, 64)
	for len(conn.data) > 0 {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.sessionTimeout(); got != 4*time.Second {
		t.Fatalf("granted timeout %v, want 4s", got)
	}
	if got, want := horizon(10*time.Second), 9500*time.Millisecond; got != want {
		t.Fatalf("horizon(10s) = %v, want %v", got, want)
	}
}

type nopConn struct{ net.Conn }

func (nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (nopConn) Close() error                { return nil }

// bytesConn reads data, at most chunk bytes at a time.
type bytesConn struct {
	net.Conn
	data  []byte
	chunk int
}

func (b *bytesConn) Read(p []byte) (int, error) {
	n := min(len(p), b.chunk, len(b.data))
	copy(p, b.data[:n])
	b.data = b.data[n:]
	return n, nil
}

// An expectation closes when a packet carrying its marker has been
// written, not before and not for other packets, and stop forgets it.
func TestWireExpect(t *testing.T) {
	w := &wire{timeout: 2400 * time.Millisecond}
	c := &wireConn{Conn: nopConn{}, w: w}
	w.cur = c
	sent, _ := w.expect("/a/_c_x-lock-")
	other, stop := w.expect("/b/_c_y-lock-")
	if _, err := c.Write([]byte("....create /a/_c_z-lock-")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
		t.Fatal("closed by a packet without its marker")
	default:
	}
	if _, err := c.Write([]byte("....create /a/_c_x-lock-")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
	default:
		t.Fatal("not closed by the packet that carries its marker")
	}
	stop()
	if len(w.expects) != 0 {
		t.Fatalf("%d expectations left, want none", len(w.expects))
	}
	select {
	case <-other:
		t.Fatal("a stopped expectation closed")
	default:
	}
}

// sentByOn answers only for the connection a request went out on: a write
// sent before the current connection's connect request went out on an
// earlier one, and anchors nothing here.
func TestWireSentByOnlyOnTheWritesConnection(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := &wire{timeout: 2400 * time.Millisecond}
	w.cur = &wireConn{w: w, first: at(1000), sent: []time.Time{at(1000), at(1100)}}
	if got := w.sentByOn(at(900), at(900)); !got.IsZero() {
		t.Fatalf("a write sent at +900ms, before the connection's connect request at +1000ms: anchor %v, want none", got.Sub(t0))
	}
	if got := w.sentByOn(at(1200), at(1150)); !got.Equal(at(1100)) {
		t.Fatalf("a write on the current connection: anchor +%v, want +1100ms", got.Sub(t0))
	}
}
