package session

import (
	"encoding/binary"
	"sync"
)

// zxidKeeper keeps go-zookeeper's Conn.lastZxid for it: the session, and
// the zxid of its last reply with xid >= 0, zxid > 0 the wire handed on.
//
// go-zookeeper v1.0.4 writes lastZxid in recvLoop (conn.go:848-849) and
// reads it in Conn.loop, in sendSetWatches (conn.go:614) and authenticate
// (conn.go:664), with nothing ordering the write after the read when a
// reply beats a new connection's setWatches, or an earlier connection's
// queued setWatches goes first (go-zookeeper/zk PR #35): a data race, which
// the race detector reports and the Go memory model leaves undefined. So:
//
//   - recvLoop never writes lastZxid: it gets replies with xid >= 0 with
//     the zxid zeroed (reader.hideZxid) and writes only a zxid > 0. The
//     other writer, authenticate's reset on expiry (conn.go:708), runs in
//     Conn.loop with both readers: no goroutine races another, on any
//     connection. A reply's zxid has no other use (Conn.request returns
//     it, conn.go:935; every caller drops it).
//   - out restores what the server must get. A connect request resuming
//     the session carries the last zxid handed on, what recvLoop would
//     have written last (Conn.loop dials only after the last recvLoop
//     ended, conn.go:485); one for a new session 0, as after the reset. A
//     setWatches carries its connection's connect-request value, as an
//     unraced sendSetWatches reads on a resumed connection, so the server
//     notifies every later change. It is never later than go-zookeeper's
//     read (later, racing, where a watch's reply beat its loop): at worst a
//     watch set on this connection hears of an earlier change, a wake-up
//     to the engine. Like go-zookeeper's, it can pass a change whose
//     notice never came (replies read before the setWatches is answered
//     carry later zxids, and a drop then hands them on): waiters decide
//     again after every reconnect, and the keeper checks every held node
//     (sweep.go).
//
// A reply counts once read whole: ZooKeeper sends a watch's event before
// any later reply on the connection, so every event up to its zxid went
// first.
//
// Tests: TestLastZxidRace (against ZooKeeper, -race; with -race-repro=none
// it drives a bare zk.Conn, which must report the race), zxid_test.go.
type zxidKeeper struct {
	mu   sync.Mutex
	last lastZxid
}

type lastZxid struct{ session, zxid int64 }

// handshake takes a connect response naming session: a new one (0:
// expired) starts from 0, as in a new Conn or after authenticate's reset.
func (z *zxidKeeper) handshake(session int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.last.session != session {
		z.last = lastZxid{session: session}
	}
}

// saw takes a whole reply's zxid in session, what recvLoop would write.
func (z *zxidKeeper) saw(session, zxid int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if session == z.last.session {
		z.last.zxid = zxid
	}
}

// out returns p, about to be written on c, as the server must get it: a
// connect request with the LastZxidSeen of the session it names (c starts
// from it), a setWatches with the RelativeZxid c started from; copied if
// changed, as a Write must not change its argument. It relies on one packet
// per Write, the connect request first (see [wireConn.Write]).
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

// connectBytes is the length of go-zookeeper's connect request up to its
// session id.
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
