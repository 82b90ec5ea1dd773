package session

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// The connect response's timeout is read off the wire, whatever the reads'
// sizes.
func TestWireReadsGrantedTimeout(t *testing.T) {
	w := testWire(Options{})
	resp := connectResponse(4000, 7)
	conn := &bytesConn{data: resp, chunk: 5}
	c := w.newConn(conn, "zk1:2181")
	buf := make([]byte, 64)
	for len(conn.data) > 0 {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.hs.timeout(); got != 4*time.Second {
		t.Fatalf("granted timeout %v, want 4s", got)
	}
	if got, want := horizon(10*time.Second), 9500*time.Millisecond; got != want {
		t.Fatalf("horizon(10s) = %v, want %v", got, want)
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
			w := testWire(Options{SessionTimeout: tc.requested})
			w.hs.grant(tc.grant)
			if tc.servers > 0 {
				names := make([]string, tc.servers)
				for i := range names {
					names[i] = fmt.Sprintf("127.0.0.%d:2181", i+1)
				}
				if err := w.res.newHosts(nil).Init(names); err != nil {
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
	w := testWire(Options{})
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
