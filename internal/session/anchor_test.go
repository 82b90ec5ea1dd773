package session

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
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

// feed observes b in pieces of at most chunk bytes, as go-zookeeper's
// reads may return them, and reports whether any piece must wait.
func feed(c *wireConn, b []byte, chunk int) bool {
	hold := false
	for len(b) > 0 {
		n := min(chunk, len(b))
		if c.observe(b[:n]) {
			hold = true
		}
		b = b[n:]
	}
	return hold
}

// connecting makes a connection of w on nc and writes its connect request,
// as go-zookeeper's authenticate does first.
func connecting(t *testing.T, w *wire, nc net.Conn) *wireConn {
	t.Helper()
	c := newWireConn(nc, w)
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

func gated(t *testing.T, session int64) (*wire, *wireConn) {
	t.Helper()
	w := &wire{anchor: newAnchor()}
	w.anchor.armed = 42
	c := connecting(t, w, nopConn{})
	if feed(c, connectResponse(4000, session), 7) {
		t.Fatal("the connect response must never wait")
	}
	return w, c
}

// On a connection that resumes the armed session, a reply that carries a
// zxid waits for the setWatches request; pings, watch events and the
// replies to re-sent credentials (zxid 0) never do, or the connection
// would stall before its sendLoop starts.
func TestGateHoldsRepliesUntilSetWatches(t *testing.T) {
	_, c := gated(t, 42)
	for _, p := range []struct {
		name string
		pkt  []byte
	}{
		{"ping", reply(-2, 900, 0)},
		{"watch event", reply(-1, 900, 0)},
		{"auth reply", reply(3, 0, 0)},
	} {
		if feed(c, p.pkt, 5) {
			t.Fatalf("a %s was held", p.name)
		}
	}
	if !feed(c, reply(4, 900, 0), 3) {
		t.Fatal("a reply with a zxid passed before setWatches went out")
	}
	if _, err := c.Write(request(5, opSetWatches, "")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.gate:
	case <-time.After(10 * time.Second):
		t.Fatal("setWatches written, and the gate is still shut")
	}
	if !c.wait() { // returns at once
		t.Fatal("wait reports a closed connection; the gate is open")
	}
}

// A connection of another session (a new one, or none) is never gated:
// its watch table is empty, sendSetWatches reads nothing.
func TestGateOnlyForTheArmedSession(t *testing.T) {
	for _, session := range []int64{43, 0} {
		_, c := gated(t, session)
		if feed(c, reply(4, 900, 0), 16) {
			t.Fatalf("session %d: a reply was held", session)
		}
	}
}

// Closing the connection lets a held read return, with no data (see
// TestHeldReplyIsDroppedOnClose); and the gate opens by itself should no
// setWatches come.
func TestGateOpensOnCloseOrTimer(t *testing.T) {
	_, c := gated(t, 42)
	done := make(chan bool)
	go func() { done <- c.wait() }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case opened := <-done:
		if opened {
			t.Fatal("wait reports the gate open; the connection closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a held read outlived its connection")
	}

	_, c = gated(t, 42)
	c.gateTimer(time.Millisecond)
	select {
	case <-c.gate:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate's timer did not open it")
	}
}

// The anchor is armed by the reply to its exists request, on the
// connection that sent it, when the path does not exist (go-zookeeper then
// sets an exists watch); the watch's event disarms it.
func TestAnchorArmedByItsReply(t *testing.T) {
	w, c := gated(t, 77)
	if _, err := c.Write(request(9, opExists, "/other")); err != nil {
		t.Fatal(err)
	}
	feed(c, reply(9, 900, -101), 64)
	if armed, _, _ := w.anchorState(77); armed {
		t.Fatal("armed by the reply to another path's exists")
	}
	if _, err := c.Write(request(10, opExists, w.anchor.path)); err != nil {
		t.Fatal(err)
	}
	feed(c, reply(10, 901, 0), 64) // the path exists: a data watch, which fires
	if armed, _, _ := w.anchorState(77); armed {
		t.Fatal("armed although the anchor path exists")
	}
	if _, err := c.Write(request(11, opExists, w.anchor.path)); err != nil {
		t.Fatal(err)
	}
	feed(c, reply(11, 902, -101), 5)
	armed, settled, changed := w.anchorState(77)
	if !armed || !settled {
		t.Fatal("not armed by the reply to the anchor's exists")
	}
	w.sawEvent(zk.Event{Type: zk.EventNodeCreated, Path: "/elsewhere"})
	if armed, _, _ := w.anchorState(77); !armed {
		t.Fatal("disarmed by another path's event")
	}
	w.sawEvent(zk.Event{Type: zk.EventNodeCreated, Path: w.anchor.path})
	if armed, _, _ := w.anchorState(77); armed {
		t.Fatal("still armed after the anchor's watch fired")
	}
	select {
	case <-changed:
	default:
		t.Fatal("a change of the anchor's state closed no channel")
	}
}

// pipeConn serves data to reads, as a server's replies, and records
// whether it was closed.
type pipeConn struct {
	nopConn
	data   []byte
	closed bool
}

func (p *pipeConn) Read(b []byte) (int, error) {
	if p.closed {
		return 0, net.ErrClosed
	}
	if len(p.data) == 0 {
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

// watchful returns a connection of session 55 whose anchor is neither
// armed nor given up (a session's first connection), the server's packets
// after the connect response being replies.
func watchful(t *testing.T, replies ...[]byte) (*wire, *wireConn, *pipeConn) {
	t.Helper()
	w := &wire{anchor: newAnchor()}
	h := w.newHosts() // one server, connected to: go-zookeeper's next Next is a retry round
	if err := h.Init([]string{"127.0.0.1:2181"}); err != nil {
		t.Fatal(err)
	}
	h.Next()
	h.Connected()
	p := &pipeConn{data: connectResponse(4000, 55)}
	for _, r := range replies {
		p.data = append(p.data, r...)
	}
	c := newWireConn(p, w)
	w.cur = c
	sendConnect(t, c)
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	return w, c, p
}

// anchoredFirst is a session's first connection (watchful) on which the
// anchor's exists request (xid 7) has had its reply, NONODE, read; the
// server's next packet is a reply to xid 9.
func anchoredFirst(t *testing.T) (*wire, *wireConn, *pipeConn) {
	t.Helper()
	w, c, p := watchful(t, reply(7, 901, -101), reply(9, 903, 0))
	if _, err := c.Write(request(7, opExists, w.anchor.path)); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	return w, c, p
}

// getChildren2W is a getChildren2 request for path; watch sets its flag.
func getChildren2W(xid int32, path string, watch bool) []byte {
	b := request(xid, opGetChildren2, path)
	if !watch {
		b[len(b)-1] = 0
	}
	return b
}

// On a connection whose watch table may have started empty, the reply
// that may register a watch is handed on whole, and the read after it
// closes the connection (sendSetWatches may have read lastZxid, with
// nothing to order recvLoop's next write after it); go-zookeeper then
// reconnects at once. A reply to a request without a watch changes
// nothing.
func TestFirstWatchClosesTheConnection(t *testing.T) {
	w, c, p := watchful(t, reply(6, 900, 0), reply(7, 901, 0), reply(8, 902, 0))
	for _, r := range [][]byte{getChildren2W(6, "/a", false), getChildren2W(7, "/a", true), getChildren2W(8, "/a", false)} {
		if _, err := c.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := readPacket(c); err != nil {
		t.Fatalf("a reply to a request without a watch: %v", err)
	}
	if err := readPacket(c); err != nil {
		t.Fatalf("the reply that registers the first watch: %v", err)
	}
	if p.closed {
		t.Fatal("closed before the reply that registers the watch was handed on")
	}
	if err := readPacket(c); !errors.Is(err, errShut) {
		t.Fatalf("the read after the first watch's reply returned %v, want errShut", err)
	}
	if !p.closed {
		t.Fatal("the connection is still open")
	}
	if _, retry := w.hosts.Next(); retry {
		t.Fatal("the reconnect after a close of the wire's is a retry round: go-zookeeper waits a second")
	}
	if _, retry := w.hosts.Next(); !retry {
		t.Fatal("only the one reconnect after the close skips the retry round")
	}

	// The next connection of the session starts with that watch in its
	// table: it sends setWatches, so it is gated, although the anchor is
	// not armed.
	next := connecting(t, w, nopConn{})
	feed(next, connectResponse(4000, 55), 64)
	if !feed(next, reply(12, 950, 0), 64) {
		t.Fatal("the connection after the first-watch rule's close is not gated")
	}
}

// A watch request whose reply registers nothing (getData or getChildren
// failing, NONODE for getData) leaves the connection open and the next
// one ungated: gating it would hold its replies for a setWatches that
// never comes. exists with NONODE does register (an exists watch).
func TestFirstWatchRuleOnlyForRegisteringReplies(t *testing.T) {
	w, c, p := watchful(t, reply(7, 901, -101), reply(8, 902, -101), reply(9, 903, 0))
	getDataW := request(7, opGetData, "/gone")
	if _, err := c.Write(getDataW); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(request(8, opExists, "/gone")); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); err != nil || p.closed {
		t.Fatalf("closed after a getData that found no node: %v", err)
	}
	if err := readPacket(c); !errors.Is(err, errShut) {
		t.Fatalf("the read after an exists watch's NONODE returned %v, want errShut", err)
	}
	if w.registered != 55 {
		t.Fatal("the session is not marked as holding a watch")
	}
}

// If the setWatches request went out before the read after the first
// watch's reply, sendSetWatches read lastZxid before it: the connection
// stays, and the anchor counts as ready on it once armed.
func TestFirstWatchAfterSetWatchesKeepsTheConnection(t *testing.T) {
	w, c, p := anchoredFirst(t)
	if ready, _ := w.anchorReady(55); ready {
		t.Fatal("ready on the connection the first-watch rule is to close")
	}
	if _, err := c.Write(request(8, opSetWatches, "")); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); err != nil || p.closed {
		t.Fatalf("closed after setWatches went out: %v", err)
	}
	if ready, _ := w.anchorReady(55); !ready {
		t.Fatal("armed, on a connection whose setWatches went out, and not ready")
	}
}

// Once the keeper gave up the anchor in a session, the rule is off (its
// connections would be closed again and again); a gated connection holds
// instead of closing.
func TestFirstWatchRuleOnlyOnWatchfulConnections(t *testing.T) {
	w := &wire{anchor: newAnchor()}
	w.anchor.given = 55
	p := &pipeConn{data: append(connectResponse(4000, 55), append(reply(7, 901, 0), reply(8, 902, 0)...)...)}
	c := connecting(t, w, p)
	for i := 0; i < 3; i++ {
		if i > 0 {
			if _, err := c.Write(getChildren2W(int32(6+i), "/a", true)); err != nil {
				t.Fatal(err)
			}
		}
		if err := readPacket(c); err != nil || p.closed {
			t.Fatalf("packet %d, the anchor given up: %v, closed %v", i, err, p.closed)
		}
	}

	_, g := gated(t, 42)
	if _, err := g.Write(getChildren2W(7, "/a", true)); err != nil {
		t.Fatal(err)
	}
	if !feed(g, reply(7, 901, 0), 64) || g.rd.shut {
		t.Fatal("a gated connection must hold the reply, not close after it")
	}
}

// Open returns on a connection on which every reply comes after any read
// of sendSetWatches, whichever way go-zookeeper's loop and reader raced on
// the first connection: either the first-watch rule closed that one (the
// anchor's reply registered the session's first watch) and Open waited for
// the next, or its setWatches had gone out. Either way the user's first
// requests succeed, on that connection. Against ZooKeeper, twenty times.
func TestOpenClosesTheFirstWatchConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 20; i++ {
		var dials atomic.Int32
		c := testSession(t, ctx, func(network, addr string, timeout time.Duration) (net.Conn, error) {
			dials.Add(1)
			return net.DialTimeout(network, addr, timeout)
		})
		ready, _ := c.wire.anchorReady(c.ID())
		if !ready {
			t.Fatalf("open %d: Open returned with the anchor not ready on the current connection", i)
		}
		if _, _, err := c.Conn().ChildrenW("/"); err != nil {
			t.Fatalf("open %d: the first request after Open: %v", i, err)
		}
		if _, err := c.Conn().Children("/"); err != nil {
			t.Fatalf("open %d: the second request after Open: %v", i, err)
		}
		if n := dials.Load(); n > 2 {
			t.Fatalf("open %d: %d connections, want at most 2 (the first closed by the first-watch rule)", i, n)
		}
		_ = c.Close()
	}
}

// A reply held on a gated connection when the connection closes is never
// handed to recvLoop (its write of lastZxid would race sendSetWatches's
// read), nor is anything after it.
func TestHeldReplyIsDroppedOnClose(t *testing.T) {
	w := &wire{anchor: newAnchor()}
	w.anchor.armed = 42
	p := &pipeConn{data: append(connectResponse(4000, 42), append(reply(7, 901, 0), reply(8, 902, 0)...)...)}
	c := connecting(t, w, p)
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- readPacket(c) }()
	select {
	case err := <-res:
		t.Fatalf("a reply with a zxid was read before setWatches went out: %v", err)
	case <-time.After(50 * time.Millisecond): // held, as far as this can tell; the next step decides
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the held read returned %v, want net.ErrClosed", err)
	}
	if err := readPacket(c); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read after the dropped reply returned %v, want net.ErrClosed", err)
	}
}

// A setWatches that goes out after the first-watch rule decided to close
// the connection does not make it count as ordered: Open must not return
// on a connection that is closing, or its user's first requests fail.
func TestClosingConnectionNeverOrdered(t *testing.T) {
	w, c, p := anchoredFirst(t)
	if err := readPacket(c); !errors.Is(err, errShut) || !p.closed {
		t.Fatalf("the read after the anchor's reply: %v (closed %v), want errShut", err, p.closed)
	}
	if _, err := c.Write(request(8, opSetWatches, "")); err != nil {
		t.Fatal(err)
	}
	if ready, _ := w.anchorReady(55); ready {
		t.Fatal("ready on a connection the first-watch rule closed")
	}
}

// Once the close request has gone out (go-zookeeper's Close: no
// setWatches may be queued after it), a held reply is dropped and the
// connection closed, rather than waiting for a gate that will not open.
func TestHeldReplyIsDroppedAfterCloseRequest(t *testing.T) {
	w := &wire{anchor: newAnchor()}
	w.anchor.armed = 42
	p := &pipeConn{data: append(connectResponse(4000, 42), reply(7, 901, 0)...)}
	c := connecting(t, w, p)
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(request(7, opCloseSession, "")); err != nil {
		t.Fatal(err)
	}
	if err := readPacket(c); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the held reply after the close request: %v, want net.ErrClosed", err)
	}
	if !p.closed {
		t.Fatal("the connection is still open")
	}
}

// writeHookConn runs hook inside a Write, before it returns.
type writeHookConn struct {
	pipeConn
	hook func()
}

func (h *writeHookConn) Write(p []byte) (int, error) {
	if f := h.hook; f != nil {
		h.hook = nil
		f()
	}
	return len(p), nil
}

// A request is noted before it is written: its reply can be read, and
// handed to recvLoop, before the writing goroutine runs again. The anchor's
// reply read that early still arms it, and a watch's still closes the
// connection after it.
func TestRequestNotedBeforeItsReply(t *testing.T) {
	w := &wire{anchor: newAnchor()}
	h := &writeHookConn{pipeConn: pipeConn{data: append(connectResponse(4000, 55), append(reply(7, 901, -101), reply(8, 902, 0)...)...)}}
	c := connecting(t, w, h)
	if err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	var rerr error
	h.hook = func() { rerr = readPacket(c) } // the reply, read while the request is being written
	if _, err := c.Write(request(7, opExists, w.anchor.path)); err != nil || rerr != nil {
		t.Fatal(err, rerr)
	}
	if armed, _, _ := w.anchorState(55); !armed {
		t.Fatal("the anchor's reply, read before its request's Write returned, did not arm it")
	}
	if err := readPacket(c); !errors.Is(err, errShut) {
		t.Fatalf("the read after it returned %v, want errShut", err)
	}
}
