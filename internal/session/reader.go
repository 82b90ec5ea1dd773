package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// reader follows the packets a connection reads, as go-zookeeper reads them
// (a 4-byte length, then the body: Conn.authenticate for the connect
// response, then Conn.recvLoop), without reading ahead: it only looks at the
// bytes as they pass, whatever the reads split. On the way it zeroes each
// reply's zxid (see hideZxid). It is go-zookeeper's reader goroutine's own.
type reader struct {
	nlen  int // bytes of the length read
	len   [4]byte
	left  int // bytes of the body still to come
	nhdr  int
	hdr   [keptBytes]byte // the packet's start: its header, and a notification's event
	shook bool            // the connect response has passed
	bad   error           // a frame no server sends was read: the connection closes (wireConn.Read)
}

// follow follows b, just read, and calls packet with the header of each
// packet read whole: the connect response first (connect), then replies.
// It stops at a bad frame (r.bad).
func (r *reader) follow(b []byte, packet func(hdr []byte, connect bool)) {
	for len(b) > 0 && r.bad == nil {
		if r.nlen < 4 {
			b = r.length(b)
			continue
		}
		var end bool
		if b, end = r.body(b); end {
			connect := !r.shook
			r.shook = true
			packet(r.hdr[:min(r.nhdr, len(r.hdr))], connect) // a whole header at least: length keeps shorter frames out
		}
	}
}

// length takes what b has of a packet's 4-byte length, and returns the rest.
// A length no server sends sets r.bad: every reply and the connect response
// start with a 16-byte header (ReplyHeader; the protocol version, timeout and
// session), and the length is a jute int, so never negative (the Java client
// refuses both: ClientCnxnSocket.readLength). go-zookeeper would decode a
// shorter packet's header from the bytes of an earlier one (Conn.recvLoop),
// out of the reader's sight, and allocate a longer one whole.
func (r *reader) length(b []byte) []byte {
	k := copy(r.len[r.nlen:], b)
	r.nlen += k
	if r.nlen == 4 {
		n := binary.BigEndian.Uint32(r.len[:])
		if n < replyHdrBytes || n > math.MaxInt32 {
			r.bad = fmt.Errorf("%w: a packet of %d bytes", errBadFrame, int32(n))
			return nil
		}
		r.left, r.nhdr = int(n), 0
	}
	return b[k:]
}

// body takes what b has of a packet's body, keeping its header, and
// returns the rest and whether the packet ended.
func (r *reader) body(b []byte) ([]byte, bool) {
	k := min(len(b), r.left)
	from := r.nhdr
	r.nhdr += copy(r.hdr[r.nhdr:], b[:k])
	r.hideZxid(b[:k], from)
	r.left -= k
	if r.left > 0 {
		return b[k:], false
	}
	r.nlen = 0
	return b[k:], true
}

// hideZxid zeroes, in b (the bytes of a packet's body from header offset
// from on, as they go to go-zookeeper), the zxid of a reply whose xid is
// not negative, so that go-zookeeper's recvLoop never writes its lastZxid
// (zxid.go). The xid comes before it, so it is known.
func (r *reader) hideZxid(b []byte, from int) {
	if !r.shook || r.nhdr < 4 || int32(binary.BigEndian.Uint32(r.hdr[0:4])) < 0 {
		return
	}
	for i := max(from, 4); i < min(r.nhdr, 12); i++ {
		b[i-from] = 0
	}
}

// errBadFrame is what go-zookeeper's reader gets from a connection on
// which the server sent a frame no ZooKeeper server sends (reader.length);
// the wire closes it, and go-zookeeper reconnects.
var errBadFrame = errors.New("zklock: closing a connection that read a malformed ZooKeeper frame")
