package session

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// connectResponse is a connect response packet: version 0, the timeout,
// the session, a 16-byte password.
func connectResponse(ms int32, session int64) []byte {
	b := make([]byte, 4+4+4+8+4+16)
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[8:], uint32(ms))
	binary.BigEndian.PutUint64(b[12:], uint64(session))
	binary.BigEndian.PutUint32(b[20:], 16)
	return b
}

// reply is a reply packet with a 4-byte body after its header.
func reply(xid int32, zxid int64, code int32) []byte {
	b := make([]byte, 4+16+4)
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	binary.BigEndian.PutUint64(b[8:], uint64(zxid))
	binary.BigEndian.PutUint32(b[16:], uint32(code))
	return b
}

// request is a request packet: length, xid, opcode, then a path and a
// watch flag.
func request(xid, op int32, path string) []byte {
	b := make([]byte, 4+4+4+4+len(path)+1)
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	binary.BigEndian.PutUint32(b[8:], uint32(op))
	binary.BigEndian.PutUint32(b[12:], uint32(len(path)))
	copy(b[16:], path)
	b[len(b)-1] = 1
	return b
}

// opExists is ZooKeeper's exists opcode (ZooDefs.OpCode.exists), for
// requests the wire does not change.
const opExists = 3

// testWire is a wire made as Open makes it, from o.
func testWire(o Options) *wire { return newWire(o) }

// connecting makes a connection of w on nc and writes its connect request,
// as go-zookeeper's authenticate does first.
func connecting(t *testing.T, w *wire, nc net.Conn) *wireConn {
	t.Helper()
	c := w.newConn(nc, "zk1:2181")
	sendConnect(t, c)
	return c
}

// sendConnect writes a connect request on c.
func sendConnect(t *testing.T, c *wireConn) {
	t.Helper()
	if _, err := c.Write(make([]byte, 48)); err != nil {
		t.Fatal(err)
	}
}

// pipeConn serves data to reads, as a server's replies, then io.EOF (or
// err, if set), and records whether it was closed.
type pipeConn struct {
	nopConn
	data   []byte
	err    error
	closed bool
}

func (p *pipeConn) Read(b []byte) (int, error) {
	if p.closed {
		return 0, net.ErrClosed
	}
	if len(p.data) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		return 0, io.EOF
	}
	n := copy(b, p.data)
	p.data = p.data[n:]
	return n, nil
}

func (p *pipeConn) Close() error { p.closed = true; return nil }

// readPacket reads one packet as go-zookeeper's recvLoop does: its
// length, then its body.
func readPacket(c *wireConn) error {
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(n[:])))
	return err
}

// A plaintext connection that the server closes before any connect
// response (as a TLS port does: it reads the connect request as a bad TLS
// record and hangs up) is counted, and Open's error then says that the
// port may be a TLS port; a connect response forgets the count. Our own
// close, a deadline, and a TLS wire are not counted: each says
// something else, or nothing of the port.
func TestWireToldOfConnectionsClosedUnanswered(t *testing.T) {
	const hint = "may be a TLS port"
	w := testWire(Options{})
	for i, err := range []error{io.EOF, &net.OpError{Op: "read", Err: syscall.ECONNRESET}} {
		c := connecting(t, w, &pipeConn{err: err})
		if got := readPacket(c); !errors.Is(got, err) {
			t.Fatalf("read %v, want %v", got, err)
		}
		msg := w.whyNoSession(context.DeadlineExceeded)
		if !errors.Is(msg, context.DeadlineExceeded) || !strings.Contains(msg.Error(), hint) ||
			!strings.Contains(msg.Error(), fmt.Sprintf("closed %d connection(s)", i+1)) || !strings.Contains(msg.Error(), "zk1:2181") {
			t.Fatalf("after %d connection(s) closed unanswered: %v, want the deadline, the count, the server and %q", i+1, msg, hint)
		}
	}

	// A connect response: the server answers, it is no TLS port.
	c := connecting(t, w, &pipeConn{data: connectResponse(4000, 55)})
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if msg := w.whyNoSession(context.DeadlineExceeded); strings.Contains(msg.Error(), hint) {
		t.Fatalf("after a connect response: %v, want no hint", msg)
	}

	for _, err := range []error{net.ErrClosed, &net.OpError{Op: "read", Err: errTimeout{}}} {
		w := testWire(Options{})
		_ = readPacket(connecting(t, w, &pipeConn{err: err}))
		if msg := w.whyNoSession(context.DeadlineExceeded); strings.Contains(msg.Error(), hint) {
			t.Fatalf("read error %v: %v, want no hint", err, msg)
		}
	}
	tw := testWire(Options{TLS: &tls.Config{}})
	_ = readPacket(connecting(t, tw, &pipeConn{}))
	if msg := tw.whyNoSession(context.DeadlineExceeded); strings.Contains(msg.Error(), hint) {
		t.Fatalf("with TLS: %v, want no hint (a TLS handshake came first)", msg)
	}
}

// errTimeout is a net.Error that timed out.
type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

// Open makes one connection to the server: the session's, on which the
// user's first requests go. Against ZooKeeper, five times.
func TestOpenDialsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 5; i++ {
		var dials atomic.Int32
		c := testSession(t, ctx, func(network, addr string, timeout time.Duration) (net.Conn, error) {
			dials.Add(1)
			return net.DialTimeout(network, addr, timeout)
		})
		if _, _, err := c.Conn().ChildrenW("/"); err != nil {
			t.Fatalf("open %d: the first request after Open: %v", i, err)
		}
		if _, err := c.Conn().Children("/"); err != nil {
			t.Fatalf("open %d: the second request after Open: %v", i, err)
		}
		if n := dials.Load(); n != 1 {
			t.Fatalf("open %d: %d connections, want 1", i, n)
		}
		_ = c.Close()
	}
}
