package session

import (
	"encoding/binary"
	"testing"
	"time"
)

// The wire recognises requests by ZooKeeper's own opcodes, and replies by
// its header, xids and error codes: pinned here to the values in
// ZooKeeper's source (ZooDefs.OpCode, KeeperException.Code.AUTHFAILED,
// ZooKeeper 3.5-3.9; ReplyHeader.jute's xid, zxid and err; the AuthPacket
// xid of ClientCnxn), not to the constants the other tests build their
// packets with.
func TestWireConstantsAreZooKeepers(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"OpCode.auth", opAuth, 100},
		{"OpCode.setAuth (go-zookeeper's name)", opSetAuth, 100},
		{"OpCode.setWatches", opSetWatches, 101},
		{"ClientCnxn's AuthPacket xid", authXid, -4},
		{"Code.AUTHFAILED", zkAuthFailCode, -115},
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
// whatever the split, each packet is followed whole, its header handed on
// once, and exactly the replies' zxids (xid >= 0) are hidden.
func TestWireLengthSplitAcrossReads(t *testing.T) {
	replies := []struct {
		pkt    []byte
		hidden bool
	}{
		{replyOf(4, 900, 16), true},
		{replyOf(5, 901, 0x0114), true}, // a length of four non-zero-and-zero bytes: 00 00 01 14
		{replyOf(-2, 7, 16), false},     // a ping
		{replyOf(6, 902, 0x01ff), true},
		{replyOf(-4, 5, 20), false}, // an auth reply (with a zxid, to show it passes)
	}
	for split := 1; split <= 3; split++ {
		var r reader
		var headers []int32
		packet := func(hdr []byte, connect bool) {
			if !connect {
				headers = append(headers, int32(binary.BigEndian.Uint32(hdr[0:4])))
			}
		}
		r.follow(connectResponse(4000, 42), packet)
		for i, rp := range replies {
			pkt := append([]byte(nil), rp.pkt...) // follow zeroes a reply's zxid in place (hideZxid)
			r.follow(pkt[:split], packet)
			if r.bad != nil || r.left != 0 {
				t.Fatalf("split %d, reply %d: %d bytes of its length decoded early (bad %v, %d body bytes expected)", split, i, split, r.bad, r.left)
			}
			r.follow(pkt[split:], packet)
			if r.bad != nil {
				t.Fatalf("split %d, reply %d: %v", split, i, r.bad)
			}
			if len(headers) != i+1 || headers[i] != int32(binary.BigEndian.Uint32(rp.pkt[4:8])) {
				t.Fatalf("split %d, reply %d: headers handed on %v", split, i, headers)
			}
			zxid := binary.BigEndian.Uint64(pkt[8:16])
			if hidden := zxid == 0; hidden != rp.hidden {
				t.Fatalf("split %d, reply %d: zxid hidden %v, want %v", split, i, hidden, rp.hidden)
			}
		}
	}
}

// A connect response's timeout replaces the one granted only if it is
// one: a response of 0 (or less) leaves the granted timeout as it was,
// which the deadline and the keeper's schedule are computed from.
func TestWireKeepsTimeoutOnAConnectResponseWithout(t *testing.T) {
	for _, ms := range []int32{0, -1} {
		w := testWire(Options{})
		w.hs.grant(4 * time.Second)
		c := connecting(t, w, &pipeConn{data: connectResponse(ms, 42)})
		if err := readPacket(c); err != nil {
			t.Fatal(err)
		}
		if got := w.hs.timeout(); got != 4*time.Second {
			t.Fatalf("a connect response with timeout %d ms made the granted timeout %v, want 4s as before", ms, got)
		}
	}
	w := testWire(Options{})
	w.hs.grant(4 * time.Second)
	if err := readPacket(connecting(t, w, &pipeConn{data: connectResponse(6000, 42)})); err != nil {
		t.Fatal(err)
	}
	if got := w.hs.timeout(); got != 6*time.Second {
		t.Fatalf("granted %v, want the response's 6s", got)
	}
}
