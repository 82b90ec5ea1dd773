package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// reader follows the packets go-zookeeper reads (a 4-byte length, then the
// body: Conn.authenticate for the connect response, then Conn.recvLoop) as
// the bytes pass, however the reads split them, zeroing replies' zxids
// (hideZxid). It is go-zookeeper's reader goroutine's own.
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
// packet read whole, the connect response first; it stops at a bad frame.
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

// length takes what b has of a packet's 4-byte length, and returns the
// rest. A length no server sends sets r.bad: replies and the connect
// response start with a 16-byte header (ReplyHeader; protocol version,
// timeout, session), and a jute int length is never negative (the Java
// client refuses both: ClientCnxnSocket.readLength). go-zookeeper would
// decode a shorter packet's header from an earlier one's bytes
// (Conn.recvLoop), out of the reader's sight, and allocate a longer one.
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

// hideZxid zeroes, in b (a packet's body from header offset from on, as it
// goes to go-zookeeper), the zxid of a reply with xid >= 0 (read before
// it), so that recvLoop never writes its lastZxid (zxid.go).
func (r *reader) hideZxid(b []byte, from int) {
	if !r.shook || r.nhdr < 4 || int32(binary.BigEndian.Uint32(r.hdr[0:4])) < 0 {
		return
	}
	for i := max(from, 4); i < min(r.nhdr, 12); i++ {
		b[i-from] = 0
	}
}

// errBadFrame is what go-zookeeper gets on a frame no server sends
// (reader.length): the wire closes the connection; go-zookeeper reconnects.
var errBadFrame = errors.New("zklock: closing a connection that read a malformed ZooKeeper frame")
