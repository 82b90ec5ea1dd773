package session

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// The setWatches gate: a fix, from outside, for a data race in go-zookeeper
// v1.0.4 (go-zookeeper/zk PR #35): when a connection resumes a session,
// Conn.sendSetWatches reads Conn.lastZxid while the new connection's
// recvLoop writes it for every reply that carries a zxid. On such a
// connection, if the session's watch table holds a watch, the wire holds
// the replies with a zxid (xid >= 0, zxid > 0) until the first setWatches
// request (opcode 101) has been written, which sendSetWatches queues only
// after its reads; everything else passes (pings, events, and the replies
// to re-sent credentials, which ZooKeeper sends with zxid 0,
// ZooKeeperServer.processPacket). The table never empties within a
// session: each session keeps an exists watch on a path nobody creates
// (the anchor). A connection whose table may start empty (a session's
// first, before the anchor) can still race, if a reply that registers a
// watch reaches recvLoop before sendSetWatches looks at the table; so the
// wire closes such a connection right after that reply, unless a
// setWatches went out first (the first-watch rule, shut below). Why each
// step holds, and what happens when one fails (the gate opens by itself
// after a third of the session timeout), is in docs/design.md, "The
// setWatches gate". Tests: anchor_test.go, TestReconnectWithWatchesUnderRace,
// TestOpenClosesTheFirstWatchConnection.
//
// The gate cannot tell a setWatches that an earlier connection queued and
// left from the connection's own, and opens early on it. What closes the
// race whatever comes first is the wire's keeping of go-zookeeper's
// lastZxid (see lastZxid): go-zookeeper's reader never writes it.
type anchor struct {
	path   string // exists-watched, never created
	marker []byte // the path as it appears in the request

	// Under wire.mu.
	armed   int64     // the session whose watch table holds the anchor, 0: none
	given   int64     // the session in which the keeper gave up arming it
	xid     int32     // the anchor's exists request in flight...
	on      *wireConn // ...on this connection
	changed chan struct{}
}

func newAnchor() anchor {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on the systems Go supports
	p := AnchorPrefix + hex.EncodeToString(b[:])
	return anchor{path: p, marker: []byte(p), changed: make(chan struct{})}
}

// AnchorPrefix begins the path of every Session's anchor: a path nobody
// creates, which each Session exists-watches (see anchor.go). A count of
// a server's watches that must not see the Sessions' own leaves these
// paths out.
const AnchorPrefix = "/zklock-anchor-"

// ZooKeeper's opcodes the wire looks for.
const (
	opExists       = 3
	opGetData      = 4
	opGetChildren  = 8
	opGetChildren2 = 12
	opSetAuth      = 100
	opSetWatches   = 101
	opCloseSession = -11
	replyHdrBytes  = 16 // xid int32, zxid int64, err int32; or a connect response's protocol version, timeout and session id
)

// anchorState reports whether the anchor is armed in session, whether
// that is settled (armed, or given up), and a channel closed when either
// may have changed.
func (w *wire) anchorState(session int64) (armed, settled bool, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.anchor.changed == nil {
		w.anchor.changed = make(chan struct{})
	}
	armed = session != 0 && w.anchor.armed == session
	return armed, armed || session != 0 && w.anchor.given == session, w.anchor.changed
}

// setArmedLocked records the session whose table holds the anchor.
func (w *wire) setArmedLocked(session int64) {
	if w.anchor.armed != session {
		w.anchor.armed = session
		w.anchorChangedLocked()
	}
}

// giveUpAnchor records that the anchor cannot be armed in session.
func (w *wire) giveUpAnchor(session int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.anchor.given = session
	w.anchorChangedLocked()
}

func (w *wire) anchorChangedLocked() {
	if w.anchor.changed != nil {
		close(w.anchor.changed)
	}
	w.anchor.changed = make(chan struct{})
}

// sawEvent disarms the anchor when its watch fires (someone created the
// path), so that no connection waits for a setWatches that may not come.
func (w *wire) sawEvent(ev Event) {
	if w.anchor.path == "" || ev.Path != w.anchor.path {
		return
	}
	w.mu.Lock()
	w.setArmedLocked(0)
	w.mu.Unlock()
}

// sawRequest notes, for a request packet p about to be written on c, a
// setWatches (the gate opens: sendSetWatches read lastZxid before it
// queued the request, so before this), a close request, the anchor's
// exists request and other requests for a watch (their xids, to recognise
// the replies, which may be read before the write returns). go-zookeeper
// writes one request per Write (Conn.sendData).
func (c *wireConn) sawRequest(p []byte) {
	if len(p) < 12 {
		return
	}
	xid := int32(binary.BigEndian.Uint32(p[4:8]))
	op := int32(binary.BigEndian.Uint32(p[8:12]))
	switch op {
	case opSetWatches:
		c.openGate()
		return
	case opCloseSession:
		c.quitOnce.Do(func() { close(c.quit) })
		return
	case opExists:
		if len(c.w.anchor.marker) > 0 && containsPath(p[12:], c.w.anchor.marker) {
			c.w.mu.Lock()
			c.w.anchor.xid, c.w.anchor.on = xid, c
			c.w.mu.Unlock()
		}
	}
	if watches(op, p[12:]) {
		c.w.mu.Lock()
		if c.watchful && !c.ordered {
			c.watchReqs = append(c.watchReqs, watchReq{xid, op})
		}
		c.w.mu.Unlock()
	}
}

// watches reports whether a request of opcode op, whose body (after the
// header) is body, asks for a watch: go-zookeeper's ExistsW, GetW and
// ChildrenW write a path and then a watch flag of 1 (existsRequest,
// getDataRequest, getChildren2Request), and only their replies register a
// watch in its table (Conn.addWatcher).
func watches(op int32, body []byte) bool {
	switch op {
	case opExists, opGetData, opGetChildren, opGetChildren2:
	default:
		return false
	}
	if len(body) < 5 {
		return false
	}
	n := int(binary.BigEndian.Uint32(body[:4]))
	return n >= 0 && len(body) == 4+n+1 && body[4+n] == 1
}

// containsPath reports whether an exists request's body (a length-prefixed
// path, then the watch flag) names path.
func containsPath(body, path []byte) bool {
	if len(body) < 4+len(path) {
		return false
	}
	n := int(binary.BigEndian.Uint32(body[:4]))
	return n == len(path) && string(body[4:4+n]) == string(path)
}

// reader follows the packets a connection reads, as go-zookeeper reads
// them (a 4-byte length, then the body), without reading ahead: it only
// looks at the bytes as they pass.
type reader struct {
	nlen  int // bytes of the length read
	len   [4]byte
	left  int // bytes of the body still to come
	nhdr  int
	hdr   [replyHdrBytes]byte
	shook bool // the connect response has passed

	session int64 // named by the connect response
	gated   bool  // replies with a zxid wait for wireConn.gate
	shut    bool  // a watch may have come first: the next read closes (shut)
	dead    bool  // a held reply was dropped as the connection closed: no more reads
	bad     error // a frame no server sends was read: the connection closes (Read)
}

// observe follows b, just read, and reports whether it ends a reply that
// must wait for the gate. A reply that registers a connection's first
// watch sets rd.shut (see shut).
func (c *wireConn) observe(b []byte) (hold bool) {
	r := &c.rd
	for len(b) > 0 && r.bad == nil {
		if r.nlen < 4 {
			b = r.length(b)
			continue
		}
		var end bool
		if b, end = r.body(b); end && c.packetEnd() {
			hold = true
		}
	}
	return hold
}

// length takes what b has of a packet's 4-byte length, and returns the
// rest. A length no server sends sets r.bad: every reply and the connect
// response start with a 16-byte header (ReplyHeader; the protocol
// version, timeout and session), and the length is a jute int, so never
// negative (the Java client refuses both: ClientCnxnSocket.readLength).
// go-zookeeper would decode a shorter packet's header from the bytes of
// an earlier one (Conn.recvLoop), out of the gate's sight, and allocate
// a longer one whole.
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
// returns the rest and whether the packet ended. A reply's zxid goes on to
// go-zookeeper as zero (see lastZxid).
func (r *reader) body(b []byte) ([]byte, bool) {
	k := min(len(b), r.left)
	from := r.nhdr
	r.nhdr += copy(r.hdr[r.nhdr:], b[:k])
	r.hideZxid(b[:k], from)
	r.hideAuthXid(b[:k], from)
	r.left -= k
	if r.left > 0 {
		return b[k:], false
	}
	r.nlen = 0
	return b[k:], true
}

// packetEnd handles a packet read whole: the connect response, or a
// reply.
func (c *wireConn) packetEnd() (hold bool) {
	r := &c.rd
	if !r.shook {
		r.shook = true
		if r.nhdr >= replyHdrBytes {
			c.handshake()
		}
		return false
	}
	if r.nhdr < replyHdrBytes {
		return false
	}
	return c.reply()
}

// handshake reads the connect response: the granted timeout, the session,
// and whether the connection is gated or watchful.
func (c *wireConn) handshake() {
	r, w := &c.rd, c.w
	c.shaken.Store(true) // no more bound (handshakeTimeout)
	ms := int32(binary.BigEndian.Uint32(r.hdr[4:8]))
	r.session = int64(binary.BigEndian.Uint64(r.hdr[8:16]))
	w.mu.Lock()
	w.tlsFails, w.tlsVerdict = nil, nil // a server answered (see tlsFailed)
	if ms > 0 {
		w.timeout = time.Duration(ms) * time.Millisecond
	}
	if w.last.session != r.session { // a new session (0: expired) starts from 0, as authenticate's
		w.last = lastZxid{session: r.session}
	}
	// The table holds a watch: the anchor, or one a watchful connection
	// of this session registered before it closed (shut) or sent
	// setWatches for (openGate).
	gated := r.session != 0 && (r.session == w.anchor.armed || r.session == w.registered)
	// Neither: the table is empty, and the first watch registered on this
	// connection may come before sendSetWatches looks (see shut); unless
	// the anchor was given up, which turns the rule off.
	c.watchful = !gated && r.session != 0 && r.session != w.anchor.given
	c.session, c.ordered = r.session, gated
	if unguardedGate.Load() { // a test's: replies pass, no connection is closed
		gated, c.watchful, c.ordered = false, false, true
	}
	if c.ordered {
		w.anchorChangedLocked() // see anchorReady
	}
	w.mu.Unlock()
	if gated {
		r.gated = true
		c.gateTimer(time.Duration(ms) * time.Millisecond / 3)
	}
}

// reply handles a reply: the anchor's (armed on NONODE), one that
// registers a watch on a watchful connection (the next read closes it),
// and whether it must wait for the gate.
func (c *wireConn) reply() (hold bool) {
	r, w := &c.rd, c.w
	xid := int32(binary.BigEndian.Uint32(r.hdr[0:4]))
	zxid := int64(binary.BigEndian.Uint64(r.hdr[4:12]))
	code := int32(binary.BigEndian.Uint32(r.hdr[12:16]))
	w.mu.Lock()
	defer w.mu.Unlock()
	if xid == authXid {
		c.authReplyLocked(code)
		return false
	}
	if xid >= 0 && zxid > 0 && r.session == w.last.session {
		w.last.zxid = zxid // what recvLoop would write (see lastZxid)
	}
	if w.anchor.on == c && w.anchor.xid == xid {
		w.anchor.on = nil
		if code == zkNoNodeCode {
			w.setArmedLocked(r.session) // go-zookeeper sets an exists watch on ErrNoNode
		}
	}
	if c.watchful && !c.ordered {
		if op, ok := takeWatchReq(&c.watchReqs, xid); ok && registers(op, code) {
			r.shut = true
			w.registered = r.session // the next connection is gated
		}
	}
	return r.gated && xid >= 0 && zxid > 0
}

// lastZxid is go-zookeeper's Conn.lastZxid as the wire keeps it: the
// session it is for, and the zxid of the last reply in that session that
// carried one (xid >= 0, zxid > 0) and that the wire handed on.
//
// go-zookeeper v1.0.4 writes Conn.lastZxid in recvLoop's goroutine (for
// every such reply, conn.go:848) and reads it in Conn.loop's, for the
// setWatches requests of a new connection (sendSetWatches, conn.go:614)
// and its connect request (authenticate, conn.go:664), with nothing to
// order the write after the read when a reply beats the new connection's
// setWatches (go-zookeeper/zk PR #35). The setWatches gate orders them
// only if the first setWatches written on a connection is that
// connection's own; it may be one that an earlier connection queued and
// closed before writing (Conn.loop leaves the queue to the next
// connection; Open's first-watch rule closes such a connection whenever
// the loop goroutine lost the race it is for), which cannot be told from
// the connection's own on the wire. So the wire keeps the value itself:
//
//   - recvLoop never writes Conn.lastZxid: the wire hands it every reply
//     with a non-negative xid with its zxid zeroed (hideZxid), and recvLoop
//     writes only a zxid > 0. go-zookeeper's other writer is
//     authenticate's reset on an expired session (conn.go:708), in
//     Conn.loop's goroutine, where both readers run: no goroutine of
//     go-zookeeper's races another on it, on any connection, whatever
//     setWatches comes first. A reply's zxid is of no other use to
//     go-zookeeper (Conn.request returns it, conn.go:935; every caller
//     drops it).
//   - What the server must get is restored on the way out (zxidOut): a
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
// A reply counts when the wire reads it whole, even one the gate then
// drops with its connection: ZooKeeper sends a watch's event before any
// reply that follows the change on the connection, so every event up to
// its zxid was handed on before it. Tests:
// TestLastZxidRace (against ZooKeeper, under -race), zxid_test.go.
type lastZxid struct{ session, zxid int64 }

// unguardedZxid turns the wire's keeping of lastZxid off, for the tests
// that show the race without it (see unguardedGate): replies reach
// go-zookeeper as the server sent them, requests the server as
// go-zookeeper wrote them.
var unguardedZxid atomic.Bool

// hideZxid zeroes, in b (the bytes of a packet's body from header offset
// from on, as they go to go-zookeeper), the zxid of a reply whose xid is
// not negative (see lastZxid). The xid comes before it, so it is known.
func (r *reader) hideZxid(b []byte, from int) {
	if !r.shook || r.nhdr < 4 || int32(binary.BigEndian.Uint32(r.hdr[0:4])) < 0 || unguardedZxid.Load() {
		return
	}
	for i := max(from, 4); i < min(r.nhdr, 12); i++ {
		b[i-from] = 0
	}
}

// zxidOut returns the packet p, about to be written on c, as the server
// must get it (see lastZxid): a connect request with the LastZxidSeen of
// the session it names, a setWatches request with the RelativeZxid its
// connection started from. It copies p to change it (a Write must not
// change its argument). go-zookeeper writes each packet in one Write, the
// connect request first (authenticate, Conn.sendData).
func (c *wireConn) zxidOut(p []byte, connect bool) []byte {
	if unguardedZxid.Load() {
		return p
	}
	switch {
	case connect && len(p) >= connectBytes:
		// length, protocol version, LastZxidSeen, timeout, session id
		session := int64(binary.BigEndian.Uint64(p[20:28]))
		c.w.mu.Lock()
		var z int64
		if session != 0 && session == c.w.last.session {
			z = c.w.last.zxid
		}
		c.startZxid = z
		c.w.mu.Unlock()
		return withInt64(p, 8, z)
	case !connect && len(p) >= 20 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches:
		// length, xid, opcode, RelativeZxid
		c.w.mu.Lock()
		z := c.startZxid
		c.w.mu.Unlock()
		return withInt64(p, 12, z)
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

// watchReq is a request for a watch in flight.
type watchReq struct{ xid, op int32 }

// takeWatchReq removes the request of xid from reqs, and returns its
// opcode.
func takeWatchReq(reqs *[]watchReq, xid int32) (int32, bool) {
	for i, q := range *reqs {
		if q.xid == xid {
			*reqs = append((*reqs)[:i], (*reqs)[i+1:]...)
			return q.op, true
		}
	}
	return 0, false
}

// registers reports whether go-zookeeper puts a watch in its table on a
// reply with error code to a watch request of opcode op: GetW and
// ChildrenW on success, ExistsW on success or NONODE (Conn.GetW,
// ChildrenW, ExistsW). Counting one it does not put there would gate the
// next connection for a setWatches that never comes (until the timer);
// missing one would leave a race.
func registers(op, code int32) bool {
	return code == 0 || op == opExists && code == zkNoNodeCode
}

// errBadFrame is what go-zookeeper's reader gets from a connection on
// which the server sent a frame no ZooKeeper server sends (reader.length);
// the wire closes it, and go-zookeeper reconnects.
var errBadFrame = errors.New("zklock: closing a connection that read a malformed ZooKeeper frame")

// errShut is what go-zookeeper's reader gets from a connection the wire
// closes under the first-watch rule; it reconnects at once.
var errShut = errors.New("zklock: closing the connection that registered the session's first watch, to reconnect in order (see internal/session/anchor.go)")

// shut applies the first-watch rule before the read that follows a reply
// registering a watch on a watchful connection. recvLoop has handed that
// reply on and may have put the watch in go-zookeeper's table; if it did
// so before this connection's sendSetWatches took the table's lock,
// sendSetWatches reads lastZxid, and nothing orders that read before
// recvLoop's next write of it. Unless the setWatches request has gone out
// (the gate is open: the read came before it, as on a gated connection),
// the wire closes the connection instead of reading on: recvLoop writes
// nothing more, and Conn.loop waits for it to end before the next
// connection, which starts with the watch in its table and so sends
// setWatches. It reports whether the connection was closed.
//
// The decision is made under w.mu against openGate's: a connection that
// counts as ordered (and may have let Open return) is never closed here,
// and one that is closing never counts as ordered.
func (c *wireConn) shut() bool {
	c.rd.shut = false
	c.w.mu.Lock()
	if c.ordered {
		c.w.mu.Unlock()
		return false
	}
	c.shutting = true
	hosts := c.w.hosts
	c.w.mu.Unlock()
	if hosts != nil {
		hosts.now.Store(true) // a reconnect, not a retry round: no second's wait
	}
	_ = c.Close()
	return true
}

// unguardedGate turns the gate and the first-watch rule off, for the tests
// that show the race without them (race_repro_test.go sets it through
// race_export_test.go; nothing else does): no reply waits, no connection
// is closed, and every connection counts as ordered, so Open returns on
// its first.
var unguardedGate atomic.Bool

// zkNoNodeCode is ZooKeeper's NONODE error code, as a reply header carries
// it.
const zkNoNodeCode = int32(-101)

// gateTimer opens the gate after d, should no setWatches come.
func (c *wireConn) gateTimer(d time.Duration) {
	t := time.AfterFunc(d, c.openGate)
	c.w.mu.Lock()
	c.timer = t
	c.w.mu.Unlock()
}

// openGate lets the held replies through. It is idempotent, and safe from
// any goroutine.
func (c *wireConn) openGate() {
	c.gateOnce.Do(func() {
		c.w.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		if !c.shutting {
			c.ordered, c.watchReqs = true, nil
			if c.watchful {
				// setWatches goes out only for a table with a watch in
				// it, and the rule is off from here on: the session's
				// next connection must be gated.
				c.w.registered = c.session
			}
			c.w.anchorChangedLocked()
		}
		c.w.mu.Unlock()
		close(c.gate)
	})
}

// wait blocks until the gate is open or the connection is closed, and
// reports whether the gate opened. A reply held when the connection closes
// is never handed on: nothing would order recvLoop's write of lastZxid
// after sendSetWatches's read (a Close of the Client's queues its close
// request ahead of setWatches, the server answers it and hangs up, the
// write of setWatches fails and go-zookeeper closes the connection: CI's
// race detector found this once the first-watch rule made a reconnect
// part of every Open). Its request fails with the connection, as every
// request in flight does.
//
// Nor is one held once the close request has gone out: go-zookeeper's
// Close shuts Conn.shouldQuit first, after which Conn.queueRequest no
// longer queues setWatches, so none may come; the reply waits for the
// session's end on the server, and is then dropped with the connection
// (Close gets ErrClosing from Conn.loop's flushRequests).
func (c *wireConn) wait() bool {
	select {
	case <-c.gate:
		return true
	default:
	}
	select {
	case <-c.gate:
		return true
	case <-c.closed:
		return false
	case <-c.quit:
		_ = c.Close()
		return false
	}
}

// Close closes the connection, and lets a held read return (with no
// data).
func (c *wireConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// anchoring arms the anchor in each new session: one exists request, which
// leaves a watch that never fires. The wire sees the reply and counts the
// anchor armed. A path someone created cannot serve (its watch would
// fire): the keeper gives up for that session, as it does if the wire did
// not see the reply, rather than ask again and again.
func (k *keeper) anchoring(v keeperView, t time.Duration) (time.Time, func()) {
	if !v.connected || v.session == 0 || v.anchored {
		return time.Time{}, nil
	}
	return k.anchorAt, func() {
		c := k.c
		exists, _, err := unrooted(c.Conn()).ExistsW(c.wire.anchor.path)
		switch {
		case err != nil:
			k.anchorAt = time.Now().Add(t / 12)
		case exists:
			c.log.Warn("zklock: the anchor path exists; the session goes on without it", "path", c.wire.anchor.path)
			c.wire.giveUpAnchor(v.session)
		default:
			if armed, _, _ := c.wire.anchorState(v.session); !armed {
				c.wire.giveUpAnchor(v.session)
			}
		}
	}
}

// anchorReady reports whether the anchor is settled in session and, if
// armed, the current connection orders every later reply after any read of
// sendSetWatches (gated, or its setWatches has gone out): so the
// connection the anchor's reply came on, closed by the first-watch rule,
// is behind. It returns a channel closed when that may have changed.
func (w *wire) anchorReady(session int64) (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.anchor.changed == nil {
		w.anchor.changed = make(chan struct{})
	}
	c := w.cur
	ready := session != 0 && (w.anchor.given == session ||
		w.anchor.armed == session && c != nil && c.session == session && c.ordered)
	return ready, w.anchor.changed
}

// awaitAnchor waits until the anchor is ready (anchorReady) in the current
// session, or ctx ends. Open calls it so that a new Client makes no request
// of its own after it returns, and that its user's first requests do not
// go out on the connection the first-watch rule closes.
func (c *Session) awaitAnchor(ctx context.Context) error {
	for {
		st := c.State()
		ready, changed := c.wire.anchorReady(c.Conn().SessionID())
		// Connected too: the wire sees a connection ready from its connect
		// response, before go-zookeeper reports the session.
		if ready && st.Connected || st.Closed {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-st.Changed:
		}
	}
}
