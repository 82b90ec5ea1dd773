package session

import (
	"encoding/binary"
	"testing"
	"time"
)

// The wire recognises requests by ZooKeeper's own opcodes, and replies by
// its header and error codes: pinned here to the values in ZooKeeper's
// source (ZooDefs.OpCode and KeeperException.Code.NONODE, ZooKeeper
// 3.5-3.9; ReplyHeader.jute's xid, zxid and err), not to the constants the
// other tests build their packets with.
func TestWireConstantsAreZooKeepers(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"OpCode.exists", opExists, 3},
		{"OpCode.getData", opGetData, 4},
		{"OpCode.getChildren", opGetChildren, 8},
		{"OpCode.getChildren2", opGetChildren2, 12},
		{"OpCode.setWatches", opSetWatches, 101},
		{"OpCode.closeSession", opCloseSession, -11},
		{"Code.NONODE", int64(zkNoNodeCode), -101},
		{"ReplyHeader's bytes", replyHdrBytes, 4 + 8 + 4},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d, ZooKeeper's is %d", c.name, c.got, c.want)
		}
	}
}

// replyOf is a reply packet of size bytes after its length.
func replyOf(xid int32, zxid int64, size int) []byte {
	b := make([]byte, 4+size)
	binary.BigEndian.PutUint32(b[0:], uint32(size))
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	binary.BigEndian.PutUint64(b[8:], uint64(zxid))
	return b
}

// A packet's length split across reads is decoded once its four bytes are
// in, not from the first of them with the bytes an earlier length left:
// whatever the split, each reply is followed whole, and exactly the
// replies that carry a zxid wait for the gate.
func TestWireLengthSplitAcrossReads(t *testing.T) {
	replies := []struct {
		pkt  []byte
		hold bool
	}{
		{replyOf(4, 900, 16), true},
		{replyOf(5, 901, 0x0114), true}, // a length of four non-zero-and-zero bytes: 00 00 01 14
		{replyOf(-2, 0, 16), false},     // a ping
		{replyOf(6, 902, 0x01ff), true},
		{replyOf(7, 0, 20), false}, // an auth reply
	}
	for split := 1; split <= 3; split++ {
		_, c := gated(t, 42)
		for i, r := range replies {
			pkt := append([]byte(nil), r.pkt...) // observe zeroes a reply's zxid in place (hideZxid)
			hold := c.observe(pkt[:split])
			if c.rd.bad != nil || c.rd.left != 0 {
				t.Fatalf("split %d, reply %d: %d bytes of its length decoded early (bad %v, %d body bytes expected)", split, i, split, c.rd.bad, c.rd.left)
			}
			if c.observe(pkt[split:]) {
				hold = true
			}
			if c.rd.bad != nil {
				t.Fatalf("split %d, reply %d: %v", split, i, c.rd.bad)
			}
			if hold != r.hold {
				t.Fatalf("split %d, reply %d: held %v, want %v", split, i, hold, r.hold)
			}
		}
		stopGateTimer(c)
	}
}

func stopGateTimer(c *wireConn) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
}

// A connect response's timeout replaces the one granted only if it is
// one: a response of 0 (or less) leaves the granted timeout as it was,
// which the deadline and the keeper's schedule are computed from.
func TestWireKeepsTimeoutOnAConnectResponseWithout(t *testing.T) {
	for _, ms := range []int32{0, -1} {
		w := &wire{anchor: newAnchor(), timeout: 4 * time.Second}
		c := connecting(t, w, nopConn{})
		feed(c, connectResponse(ms, 42), 64)
		if got := w.sessionTimeout(); got != 4*time.Second {
			t.Fatalf("a connect response with timeout %d ms made the granted timeout %v, want 4s as before", ms, got)
		}
	}
	w := &wire{anchor: newAnchor(), timeout: 4 * time.Second}
	feed(connecting(t, w, nopConn{}), connectResponse(6000, 42), 64)
	if got := w.sessionTimeout(); got != 6*time.Second {
		t.Fatalf("granted %v, want the response's 6s", got)
	}
}

// A gated handshake (the session's watch table holds the anchor) makes
// the connection ordered, and wakes whoever waits in anchorReady for it
// (Open's awaitAnchor).
func TestGatedHandshakeWakesAnchorWaiters(t *testing.T) {
	w := &wire{anchor: newAnchor()}
	w.anchor.armed = 42
	c := connecting(t, w, nopConn{})
	w.mu.Lock()
	w.cur = c // as the dialer sets it
	w.mu.Unlock()
	ready, changed := w.anchorReady(42)
	if ready {
		t.Fatal("ready before the connect response")
	}
	feed(c, connectResponse(4000, 42), 64)
	defer stopGateTimer(c)
	select {
	case <-changed:
	default:
		t.Fatal("a gated handshake did not wake anchorReady's waiters")
	}
	if ready, _ := w.anchorReady(42); !ready {
		t.Fatal("not ready after a gated handshake in the armed session")
	}
}
