package session

import (
	"encoding/binary"
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

func gated(t *testing.T, session int64) (*wire, *wireConn) {
	t.Helper()
	w := &wire{anchor: newAnchor()}
	w.anchor.armed = 42
	c := newWireConn(nopConn{}, w)
	if _, err := c.Write(make([]byte, 48)); err != nil { // the connect request
		t.Fatal(err)
	}
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
	c.wait() // returns at once
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

// Closing the connection lets a held read return; and the gate opens by
// itself should no setWatches come.
func TestGateOpensOnCloseOrTimer(t *testing.T) {
	_, c := gated(t, 42)
	done := make(chan struct{})
	go func() { c.wait(); close(done) }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
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
