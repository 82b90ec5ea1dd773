package session

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// sentByOn is the anchor of the deadline: the latest packet that went out no
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
		if got := w.sentByOn(t0, at(tc.by)); !got.Equal(at(tc.want)) {
			t.Errorf("sentByOn(+%dms) = +%v, want +%dms", tc.by, got.Sub(t0), tc.want)
		}
	}
	if got := (&wire{}).sentByOn(t0, t0); !got.IsZero() {
		t.Errorf("no connection yet: sentByOn = %v, want zero", got)
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

// deadlineConn records the deadlines set on it and reads from r.
type deadlineConn struct {
	net.Conn
	r          []byte
	read, wrot []time.Time
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	n := copy(p, d.r)
	d.r = d.r[n:]
	return n, nil
}
func (d *deadlineConn) Write(p []byte) (int, error)        { return len(p), nil }
func (d *deadlineConn) SetReadDeadline(t time.Time) error  { d.read = append(d.read, t); return nil }
func (d *deadlineConn) SetWriteDeadline(t time.Time) error { d.wrot = append(d.wrot, t); return nil }
func (d *deadlineConn) SetDeadline(t time.Time) error {
	d.read, d.wrot = append(d.read, t), append(d.wrot, t)
	return nil
}

// A handshake is bounded by the session timeout over the number of
// servers, from when the dial returned, as in ZooKeeper's Java client, and at least
// minHandshake; go-zookeeper's own deadlines (ten times two-thirds of the
// session timeout, or none) are cut to it until the connect response has
// been read, and pass untouched after.
func TestHandshakeBounded(t *testing.T) {
	for _, tc := range []struct {
		name             string
		requested, grant time.Duration
		servers          int
		want             time.Duration
	}{
		{"asked for, over the servers", 9 * time.Second, 0, 3, 3 * time.Second},
		{"granted, over the servers", 9 * time.Second, 6 * time.Second, 3, 2 * time.Second},
		{"one server", 4 * time.Second, 0, 1, 4 * time.Second},
		{"no server count", 4 * time.Second, 0, 0, 4 * time.Second},
		{"never below a second", 2 * time.Second, 0, 5, minHandshake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := &deadlineConn{r: connectResponse(4000, 7)}
			w := &wire{anchor: newAnchor(), requested: tc.requested, timeout: tc.grant}
			if tc.servers > 0 {
				names := make([]string, tc.servers)
				for i := range names {
					names[i] = fmt.Sprintf("127.0.0.%d:2181", i+1)
				}
				if err := w.newHosts().Init(names); err != nil {
					t.Fatal(err)
				}
			}
			w.dial = func(string, string, time.Duration) (net.Conn, error) { return dc, nil }
			before := time.Now()
			nc, err := w.dialer("tcp", "127.0.0.1:2181", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			far := time.Now().Add(time.Hour)
			// go-zookeeper's authenticate, in its order.
			_ = nc.SetWriteDeadline(far)
			if _, err := nc.Write(make([]byte, 48)); err != nil {
				t.Fatal(err)
			}
			_ = nc.SetWriteDeadline(time.Time{})
			_ = nc.SetReadDeadline(far)
			hdr := make([]byte, 4)
			if _, err := nc.Read(hdr); err != nil {
				t.Fatal(err)
			}
			_ = nc.SetReadDeadline(time.Time{})
			for _, d := range append(dc.read, dc.wrot...) {
				if d.IsZero() || d.Before(before.Add(tc.want)) || d.After(after.Add(tc.want)) {
					t.Fatalf("a handshake deadline is %v after the dial, want %v", d.Sub(before), tc.want)
				}
			}
			body := make([]byte, len(connectResponse(4000, 7))-4)
			for n := 0; n < len(body); {
				m, err := nc.Read(body[n:])
				if err != nil {
					t.Fatal(err)
				}
				n += m
			}
			// Read: the recvLoop's deadlines are its own.
			dc.read, dc.wrot = nil, nil
			_ = nc.SetReadDeadline(far)
			_ = nc.SetWriteDeadline(time.Time{})
			_ = nc.SetDeadline(far)
			if len(dc.read) != 2 || !dc.read[0].Equal(far) || !dc.read[1].Equal(far) ||
				len(dc.wrot) != 2 || !dc.wrot[0].IsZero() || !dc.wrot[1].Equal(far) {
				t.Fatalf("after the handshake, deadlines changed: read %v, write %v", dc.read, dc.wrot)
			}
		})
	}
}

// Without a session timeout (a wire made in a test), nothing is bounded.
func TestHandshakeUnboundedWithoutTimeout(t *testing.T) {
	dc := &deadlineConn{}
	w := &wire{anchor: newAnchor()}
	w.dial = func(string, string, time.Duration) (net.Conn, error) { return dc, nil }
	nc, err := w.dialer("tcp", "127.0.0.1:2181", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	if len(dc.read) != 1 || !dc.read[0].IsZero() {
		t.Fatalf("read deadlines %v, want none", dc.read)
	}
}
