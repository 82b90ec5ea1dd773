package session

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
)

// A frame no ZooKeeper server sends closes the connection with an error
// before go-zookeeper reads its body: one shorter than the 16-byte reply
// header (go-zookeeper would decode the header left in its buffer by the
// previous packet, out of the reader's sight: the zxid it then writes to
// lastZxid would race sendSetWatches's read again), or one whose length
// is negative as the jute int it is (go-zookeeper would allocate up to 4
// GiB for it). FuzzWireReader found the first.
func TestWireClosesOnMalformedFrame(t *testing.T) {
	for _, length := range []uint32{0, 8, 15, 1 << 31, 0xffffffff} {
		w := testWire(Options{})
		frame := make([]byte, 4+16)
		binary.BigEndian.PutUint32(frame, length)
		binary.BigEndian.PutUint32(frame[4:], 9)    // xid
		binary.BigEndian.PutUint64(frame[8:], 1000) // zxid
		p := &pipeConn{data: append(connectResponse(4000, 55), frame...)}
		c := connecting(t, w, p)
		if err := readPacket(c); err != nil {
			t.Fatal(err)
		}
		var n [4]byte
		_, err := io.ReadFull(c, n[:])
		if !errors.Is(err, errBadFrame) {
			t.Fatalf("length %#x: read %v, want errBadFrame", length, err)
		}
		if !p.closed {
			t.Fatalf("length %#x: the connection is still open", length)
		}
		if _, err := c.Read(n[:]); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("length %#x: a read after it got %v, want net.ErrClosed", length, err)
		}
		if w.zxid.last.zxid != 0 {
			t.Fatalf("length %#x: the bad frame's zxid was kept: %#x", length, w.zxid.last.zxid)
		}
	}
}
