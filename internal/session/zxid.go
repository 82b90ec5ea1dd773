package session

import (
	"encoding/binary"
	"sync"
)

// zxidKeeper keeps go-zookeeper's Conn.lastZxid in its place: the session
// it is for, and the zxid of the last reply in that session that carried
// one (xid >= 0, zxid > 0) and that the wire handed on.
//
// go-zookeeper v1.0.4 writes Conn.lastZxid in recvLoop's goroutine (for
// every such reply, conn.go:848-849) and reads it in Conn.loop's, for the
// setWatches requests of a new connection (sendSetWatches, conn.go:614)
// and its connect request (authenticate, conn.go:664), with nothing to
// order the write after the read when a reply beats the new connection's
// setWatches, or when a setWatches that an earlier connection queued and
// left goes out first (go-zookeeper/zk PR #35): a data race, which the
// race detector reports and which the Go memory model leaves undefined.
// So the wire keeps the value itself:
//
//   - recvLoop never writes Conn.lastZxid: the wire hands it every reply
//     with a non-negative xid with its zxid zeroed (reader.hideZxid), and
//     recvLoop writes only a zxid > 0. go-zookeeper's other writer is
//     authenticate's reset on an expired session (conn.go:708), in
//     Conn.loop's goroutine, where both readers run: no goroutine of
//     go-zookeeper's races another on it, on any connection, whatever
//     setWatches comes first. A reply's zxid is of no other use to
//     go-zookeeper (Conn.request returns it, conn.go:935; every caller
//     drops it).
//   - What the server must get is restored on the way out (out): a
//     connect request that resumes the session carries the last zxid the
//     wire handed on in it (what recvLoop would have written last: Conn.loop
//     dials only after the previous connection's recvLoop has ended,
//     conn.go:485), one that asks for a new session 0, as go-zookeeper's
//     own after its reset; and every setWatches request the value its
//     connection's connect request carried, the zxid the client had seen
//     when the connection began, which is what an unraced sendSetWatches
//     reads on a resumed connection, so that the server notifies every
//     change made after it. It is never later than what go-zookeeper
//     would have read (it reads later, racing, on a connection where a
//     watch's reply beat its loop): at worst the server notifies a watch
//     set on the connection itself of a change made before it was set,
//     an event the engine takes as a wake-up. It can still be past a
//     change whose notice never came, as go-zookeeper's own would be:
//     replies read before the connection's setWatches were all answered
//     carry later zxids, and if the connection drops then, the next one
//     starts from them. Waiters decide again after every reconnect, and
//     the keeper checks every held node (sweep.go).
//
// A reply counts when the wire reads it whole: ZooKeeper sends a watch's
// event before any reply that follows the change on the connection, so
// every event up to its zxid was handed on before it.
//
// Tests: TestLastZxidRace (against ZooKeeper, under -race; with
// -race-repro=none it drives a bare zk.Conn the same way, which must report
// the race), zxid_test.go.
type zxidKeeper struct {
	mu   sync.Mutex
	last lastZxid
}

// lastZxid is a zxid and the session it is of.
type lastZxid struct{ session, zxid int64 }

// handshake takes a connect response that names session: a new session
// (0: expired) starts from 0, as go-zookeeper's own (a new Conn, or
// authenticate's reset).
func (z *zxidKeeper) handshake(session int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.last.session != session {
		z.last = lastZxid{session: session}
	}
}

// saw takes the zxid of a reply read whole in session, what recvLoop
// would write.
func (z *zxidKeeper) saw(session, zxid int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if session == z.last.session {
		z.last.zxid = zxid
	}
}

// out returns the packet p, about to be written on c, as the server must
// get it: a connect request with the LastZxidSeen of the session it names
// (and c starts from it), a setWatches request with the RelativeZxid c
// started from. It copies p to change it (a Write must not change its
// argument). go-zookeeper writes each packet in one Write, the connect
// request first (authenticate, Conn.sendData).
func (z *zxidKeeper) out(c *wireConn, p []byte, connect bool) []byte {
	switch {
	case connect && len(p) >= connectBytes:
		// length, protocol version, LastZxidSeen, timeout, session id
		session := int64(binary.BigEndian.Uint64(p[20:28]))
		z.mu.Lock()
		var v int64
		if session != 0 && session == z.last.session {
			v = z.last.zxid
		}
		c.start = v
		z.mu.Unlock()
		return withInt64(p, 8, v)
	case !connect && len(p) >= 20 && opcode(p) == opSetWatches:
		// length, xid, opcode, RelativeZxid
		z.mu.Lock()
		v := c.start
		z.mu.Unlock()
		return withInt64(p, 12, v)
	}
	return p
}

// connectBytes is the least length of go-zookeeper's connect request, up
// to its session id.
const connectBytes = 28

// withInt64 returns p with v at p[at:at+8], copied if that changes it.
func withInt64(p []byte, at int, v int64) []byte {
	if int64(binary.BigEndian.Uint64(p[at:at+8])) == v {
		return p
	}
	q := append([]byte(nil), p...)
	binary.BigEndian.PutUint64(q[at:], uint64(v))
	return q
}
