package session

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// wire sits between go-zookeeper and the socket: go-zookeeper dials with
// [wire.dialer], and every byte goes through a [wireConn]. Each field from
// res to made is one job, its type in a file of its own. docs/design.md,
// "What the wire relies on", lists what of go-zookeeper's (v1.0.4)
// behaviour below its API the wire relies on, each with its test.
//
// Locks: each of those types has its own mutex, and wire.mu guards cur. None
// is held while another is taken, except resolver.mu, under which hosts.mu
// is: the only lock order.
type wire struct {
	dial zk.Dialer
	log  *slog.Logger    // the Session's, or a silent one
	life context.Context // ends when the Session closes: a lookup or TLS handshake under way gives up

	res   resolver
	tls   tlsState
	hs    handshakes
	clock sendClock
	marks markers
	zxid  zxidKeeper
	creds credentials
	made  createdZxids

	mu  sync.Mutex
	cur *wireConn // the connection go-zookeeper uses now, for drop
}

func newWire(o Options) *wire {
	w := &wire{
		dial:  o.Dialer,
		log:   o.Logger,
		life:  context.Background(),
		res:   resolver{lookup: o.Lookup, known: make(map[string]*name)},
		tls:   tlsState{cfg: o.TLS, fails: make(map[string]bool)},
		hs:    handshakes{requested: o.SessionTimeout},
		creds: credentials{changed: make(chan struct{})},
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Connect == nil {
		w.creds.set(o.Auth) // the wire sends them (auth.go); the fake's connection gets them by AddAuth
	}
	return w
}

// wireConn is one connection of a wire, which go-zookeeper reads and writes.
type wireConn struct {
	net.Conn
	w     *wire
	addr  string      // the server dialed, as named
	sent  *sendRecord // when its packets went out (sent.go)
	bound bound       // its handshake's bound (handshake.go)

	// Its reader goroutine's own (Conn.authenticate, then Conn.recvLoop).
	in      *bufio.Reader // made on the first Read
	rd      reader
	session int64 // named by the connect response
	dead    bool  // a bad frame was read: no more reads

	start    int64 // under w.zxid.mu: the LastZxidSeen its connect request carried (zxid.go)
	authLeft int   // under w.creds.mu: replies to its credentials still to come (auth.go)
}

// dialer is go-zookeeper's: it resolves a name as the user typed it
// (hosts.Next) now (hosts.go), dials its addresses with the user's dialer
// until one connects, then TLS, under the handshake's bound, verifies the
// server against the name.
func (w *wire) dialer(network, name string, timeout time.Duration) (net.Conn, error) {
	addrs, err := w.res.resolve(w.life, name, w.log)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	for _, addr := range addrs {
		if c, err = w.dial(network, addr, timeout); err == nil {
			break
		}
		w.res.dialFailed(err)
	}
	if err != nil {
		return nil, err
	}
	var by time.Time // the handshake's bound, TLS's and ZooKeeper's together
	if d := w.hs.bound(w.res.servers()); d > 0 {
		by = time.Now().Add(d)
	}
	if w.tls.cfg != nil {
		var te *TLSError
		if c, te = w.tls.secure(w.life, c, name, by, timeout); te != nil {
			w.tlsFailed(te)
			return nil, te
		}
	}
	wc := w.newConn(c, name)
	wc.bound.by = by
	return wc, nil
}

// newConn makes the wire's current connection, over c to the server addr.
func (w *wire) newConn(c net.Conn, addr string) *wireConn {
	wc := &wireConn{Conn: c, w: w, addr: addr, sent: w.clock.begin()}
	w.mu.Lock()
	w.cur = wc
	w.mu.Unlock()
	return wc
}

// Write writes a packet: go-zookeeper writes each in one Write
// (Conn.authenticate, Conn.sendData, sendLoop's pings). The first is the
// connect request, which the credentials follow in the same write (auth.go).
func (c *wireConn) Write(p []byte) (int, error) {
	w := c.w
	connect := w.clock.record(c.sent, time.Now(), w.hs.timeout())
	out := w.zxid.out(c, p, connect)
	if connect {
		out = w.creds.behind(c, out)
	}
	n, err := c.Conn.Write(out)
	switch {
	case err == nil:
		w.marks.sawWrite(p)
		return len(p), nil
	case !connect && opcode(p) == opSetAuth:
		// go-zookeeper (v1.0.4) re-sends credentials on reconnect
		// (resendZkAuth) via sendRequest, whose reply channel holds one. A
		// failed write's error goes there (sendData), the request stays in
		// the connection's table, resendZkAuth returns without reading it,
		// and Conn.loop's flushRequests blocks for ever on a second reply
		// under the table's lock (its PR #163, open): no reconnect, the
		// session is lost. So the write counts as made and the connection
		// closes: the read fails, recvLoop ends (closing closeChan, which
		// resendZkAuth waits on), and flushRequests gives the one reply.
		// Request and connection were lost either way. Other requests are
		// safe: queueRequest's channels hold two. Without this,
		// TestFailedCredentialWriteKeepsTheSession fails.
		_ = c.Close()
		return len(p), nil
	}
	return n, err
}

// wireReadBuffer serves most of go-zookeeper's two reads per reply (length,
// body: Conn.recvLoop) with no syscall when replies come back to back.
const wireReadBuffer = 32 << 10

// Read reads through a buffer, following only the packets it hands to
// go-zookeeper (reader.go). A frame no server sends closes the connection
// with an error (reader.length).
func (c *wireConn) Read(p []byte) (int, error) {
	if c.in == nil {
		c.in = bufio.NewReaderSize(c.Conn, wireReadBuffer)
	}
	if c.dead {
		return 0, net.ErrClosed
	}
	n, err := c.in.Read(p)
	if err != nil && !c.bound.shaken.Load() {
		err = c.unanswered(err)
	}
	if n > 0 {
		c.rd.follow(p[:n], c.packet)
		if c.rd.bad != nil {
			_ = c.Close()
			c.dead = true // nothing after a bad frame is a packet's start
			return 0, c.rd.bad
		}
	}
	return n, err
}

// packet handles a whole packet's header: the connect response's, or a
// reply's.
func (c *wireConn) packet(hdr []byte, connect bool) {
	w := c.w
	if connect {
		c.bound.shaken.Store(true) // no more bound (handshake.go)
		ms := int32(binary.BigEndian.Uint32(hdr[4:8]))
		c.session = int64(binary.BigEndian.Uint64(hdr[8:16]))
		w.hs.answered(ms)
		w.tls.answered()
		w.zxid.handshake(c.session)
		return
	}
	xid := int32(binary.BigEndian.Uint32(hdr[0:4]))
	zxid := int64(binary.BigEndian.Uint64(hdr[4:12]))
	code := int32(binary.BigEndian.Uint32(hdr[12:16]))
	switch {
	case xid == authXid:
		w.creds.reply(c, code, w.log)
	case xid >= 0 && zxid > 0:
		w.zxid.saw(c.session, zxid)
	case xid == notificationXid:
		w.made.seen(zxid > 0)
		if zxid > 0 {
			w.made.event(hdr[replyHdrBytes:], zxid)
		}
	}
}

// unanswered returns err, read before a connect response, as Open must
// tell it.
func (c *wireConn) unanswered(err error) error {
	w := c.w
	switch {
	case w.tls.cfg != nil && refusedTLS(err):
		// The server refused us after TLS's handshake, as TLS 1.3 does a
		// client certificate it does not accept: Open's error must say so,
		// not that the handshake timed out.
		te := &TLSError{Addr: c.addr, Err: err}
		w.tlsFailed(te)
		return te
	case w.tls.cfg == nil && closedByServer(err):
		w.hs.closedUnanswered(c.addr)
	}
	return err
}

// opcode is the opcode of request packet p, 0 if p is too short to carry one.
func opcode(p []byte) int32 {
	if len(p) < 12 {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p[8:12]))
}

// ZooKeeper's opcodes the wire looks for.
const (
	opSetAuth     = 100
	opSetWatches  = 101
	replyHdrBytes = 16 // xid int32, zxid int64, err int32; or a connect response's protocol version, timeout and session id
	// keptBytes is how much of a packet the reader keeps: the header, and
	// a notification's event (type, state, path) for paths up to 500 bytes.
	keptBytes = replyHdrBytes + 12 + 500
)

// tlsFailed records a failed TLS handshake as the last dial error, and
// towards the verdict that every server failed one (tls.go).
func (w *wire) tlsFailed(te *TLSError) {
	w.res.dialFailed(te)
	w.tls.failed(te, w.res.names())
}

// whyNoSession adds to err, the context's error that ended a wait for a
// session, why none came, which the user needs more than the deadline: the
// last failed lookup and dial, and connections servers closed unanswered
// (handshake.go), as a TLS port does a plaintext client's.
func (w *wire) whyNoSession(err error) error {
	lerr, derr := w.res.errs()
	if lerr != nil {
		err = fmt.Errorf("%w; last lookup error: %w", err, lerr)
	}
	if derr != nil {
		err = fmt.Errorf("%w; last dial error: %w", err, derr)
	}
	if n, addr := w.hs.unanswered(); n > 0 && w.tls.cfg == nil {
		err = fmt.Errorf("%w; the server closed %d connection(s) before answering the connect request (last %s): "+
			"the port may be a TLS port (ZooKeeper's secureClientPort), which needs WithTLS, or the server may be refusing connections",
			err, n, addr)
	}
	return err
}

// sentByOn is [sendClock.sentByOn], for [Session.Confirm].
func (w *wire) sentByOn(sent, t time.Time) time.Time { return w.clock.sentByOn(sent, t) }

// drop closes the current connection: go-zookeeper fails what is pending
// on it and reconnects to the next server in its list.
func (w *wire) drop() {
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c != nil && c.Conn != nil { // a Connect'ed connection has no socket (conn.go: openConnect)
		_ = c.Close()
	}
}
