package session

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// wire wraps the dialer of a connection, to see what go-zookeeper does not
// tell: the session timeout the server granted (read off each connect
// response), when each of our packets went out (for the lease deadline,
// see [Session.Confirm]), and a way to drop the connection so that
// go-zookeeper moves to another server.
type wire struct {
	dial zk.Dialer
	// The session timeout asked for, for the handshake's bound
	// (handshakeTimeout); zero: no bound.
	requested time.Duration

	mu      sync.Mutex
	cur     *wireConn
	timeout time.Duration // granted by the last connect response
	dialErr error         // the last dial that failed, for Connect's error
	// The last lookup that failed, for Connect's error, and what each
	// name resolved to (hosts.go).
	lookupErr error
	names     names
	logger    *slog.Logger
	expects   []expectation // packets someone waits to see go out
	anchor    anchor        // a watch that keeps setWatches coming (anchor.go)
	last      lastZxid      // go-zookeeper's lastZxid, which the wire keeps (anchor.go)
	// The session in which the first-watch rule closed a connection after
	// the reply that registered a watch: its table holds one.
	registered int64
	hosts      *hosts // the current go-zookeeper connection's server list (hosts.go)

	// TLS (tls.go): the user's configuration, nil for none; the servers
	// whose TLS handshake failed since a connect response was last read;
	// the failure that made it every server, until reported; what to call
	// with it (set while Open waits); a context that ends when the
	// Session closes.
	tls        *tls.Config
	tlsFails   map[string]bool
	tlsVerdict *TLSError
	onTLSFail  func(error)
	life       context.Context

	// The credentials (auth.go), sent on every connection; under mu,
	// whether a connection had them all accepted, the last refusal, and a
	// channel closed when either changes.
	creds       credentials
	authed      bool
	authErr     error
	authChanged chan struct{}
}

// expectation is a wait for the packet that carries marker to go out.
type expectation struct {
	marker []byte
	sent   chan struct{}
}

// wireConn is one TCP connection of a wire.
type wireConn struct {
	net.Conn
	w  *wire
	in *bufio.Reader // go-zookeeper's one reader goroutine's, made on its first Read

	rd reader // go-zookeeper's one reader goroutine's own (see anchor.go)

	gate      chan struct{} // closed once replies may pass (see anchor.go)
	gateOnce  sync.Once
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	quit      chan struct{} // closed once the close request went out (see anchor.go)
	quitOnce  sync.Once

	// Under w.mu.
	first time.Time   // when the connect request went out
	sent  []time.Time // when packets went out, thinned to one per wireGrain, oldest first
	timer *time.Timer // opens the gate should no setWatches come

	// The handshake's bound (see handshakeTimeout): zero, or when the dial
	// returned plus the bound, until the connect response has been read.
	handshakeBy time.Time
	shaken      atomic.Bool
	addr        string // the server dialed

	// Under w.mu: the gate and the first-watch rule (anchor.go).
	session   int64      // named by the connect response
	watchful  bool       // the first-watch rule applies
	ordered   bool       // every later reply comes after any read of sendSetWatches
	shutting  bool       // closed by the first-watch rule: never ordered
	watchReqs []watchReq // requests for a watch in flight, while watchful and not ordered
	startZxid int64      // the LastZxidSeen its connect request carried (anchor.go)
	authLeft  int        // replies to its credentials still to come (auth.go)
}

// wireGrain thins the record of sent packets: one per wireGrain of the
// session timeout is kept, and what is kept errs early, which only makes
// deadlines earlier.
const wireGrain = 24

// dialer is the dialer go-zookeeper is given: it is handed a name as the
// user typed it (hosts.Next), resolves it now (hosts.go) and dials its
// addresses with the user's dialer, in turn until one connects; then TLS,
// under the handshake's bound, verifies the server against the name.
func (w *wire) dialer(network, name string, timeout time.Duration) (net.Conn, error) {
	addrs, err := w.resolve(name)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	for _, addr := range addrs {
		if c, err = w.dial(network, addr, timeout); err == nil {
			break
		}
		w.mu.Lock()
		w.dialErr = err
		w.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	var by time.Time // the handshake's bound, TLS's and ZooKeeper's together
	if d := w.handshakeTimeout(); d > 0 {
		by = time.Now().Add(d)
	}
	if w.tls != nil {
		if c, err = w.secure(c, name, by, timeout); err != nil {
			var te *TLSError
			if errors.As(err, &te) {
				w.tlsFailed(te)
			}
			return nil, err
		}
	}
	wc := newWireConn(c, w)
	wc.handshakeBy = by
	wc.addr = name
	w.mu.Lock()
	w.cur = wc
	w.mu.Unlock()
	return wc, nil
}

func newWireConn(c net.Conn, w *wire) *wireConn {
	return &wireConn{Conn: c, w: w, gate: make(chan struct{}), closed: make(chan struct{}), quit: make(chan struct{})}
}

// minHandshake is the least handshakeTimeout: go-zookeeper gives the TCP
// dial alone a second (zk.WithConnectTimeout's default).
const minHandshake = time.Second

// handshakeTimeout bounds a connection's handshake, from when its dial
// returned (the dial has go-zookeeper's own timeout, and a TLS dialer's
// handshake is the dialer's): the session timeout (granted, else asked
// for) over the number of servers (the addresses their names resolved to
// when last dialed, hosts.servers), and at least minHandshake; as
// ZooKeeper's Java client does (ClientCnxn: connectTimeout =
// sessionTimeout / hostProvider.size(), after which its SendThread moves
// to the next server).
//
// go-zookeeper waits ten times two-thirds of the session timeout for a
// connect response (Conn.authenticate), and a server can keep a connection
// open without ever answering it: ZooKeeper 3.8 and 3.9 refuse a connect
// request that comes while they start ("ZooKeeperServer not running"),
// and the close then throws before it closes the socket
// (ZooKeeperServer.removeCnxn reads a zkDb that startdata has not made
// yet; ZOOKEEPER-5051); a paused server's kernel accepts connections its
// process will not read. Waiting that out loses the session while other
// servers could take it: a client that reconnects during a rolling
// restart, to the server that just restarted, did.
//
// Giving a handshake up is safe: it only closes a connection on which no
// session was granted (or none go-zookeeper heard of), and nothing is
// held on it; go-zookeeper moves to the next server, where the session
// is taken up or found expired as after any other dropped connection.
func (w *wire) handshakeTimeout() time.Duration {
	if w.requested <= 0 {
		return 0
	}
	w.mu.Lock()
	t := w.timeout
	w.mu.Unlock()
	if t <= 0 {
		t = w.requested
	}
	return max(t/time.Duration(w.servers()), minHandshake)
}

// handshakeDeadline is t, or the handshake's bound if that comes first
// (a zero t, no deadline, comes last).
func (c *wireConn) handshakeDeadline(t time.Time) time.Time {
	if by := c.handshakeBy; !by.IsZero() && !c.shaken.Load() && (t.IsZero() || t.After(by)) {
		return by
	}
	return t
}

// SetDeadline, SetReadDeadline and SetWriteDeadline bound the handshake
// (see handshakeTimeout): go-zookeeper sets each deadline it wants before
// it reads or writes, and clears the read deadline before it reads the
// connect response's body.
func (c *wireConn) SetDeadline(t time.Time) error {
	return c.Conn.SetDeadline(c.handshakeDeadline(t))
}

func (c *wireConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.handshakeDeadline(t))
}

func (c *wireConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.handshakeDeadline(t))
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	connect := c.recordLocked(time.Now())
	c.w.mu.Unlock()
	if !connect {
		// Before the write: its reply may be read before this goroutine
		// runs again, and must be known for what it answers (anchor.go).
		c.sawRequest(p)
	}
	out := c.zxidOut(p, connect)
	if connect {
		out = c.withCredentials(out)
	}
	n, err := c.Conn.Write(out)
	switch {
	case err == nil:
		c.w.sawWrite(p)
		return len(p), nil
	case !connect && opcode(p) == opSetAuth:
		// go-zookeeper (v1.0.4) re-sends each credential after a
		// reconnect (resendZkAuth) through sendRequest, whose reply
		// channel holds one reply. A failed write makes sendData put
		// the error there and leave the request in the connection's
		// table; resendZkAuth returns without reading it, and
		// Conn.loop's flushRequests then sends the request a second
		// reply under the table's lock, and blocks for ever (its PR
		// #163, open): the connection never reconnects, and the
		// session is lost. So the write counts as made, and the
		// connection is closed: the read side fails, recvLoop ends
		// (closing closeChan, which resendZkAuth waits on), and
		// flushRequests gives the request its one reply. The request
		// is lost either way; the connection was broken either way.
		// Other requests are safe: queueRequest's channels hold two.
		// TestFailedCredentialWriteKeepsTheSession fails without this.
		_ = c.Close()
		return len(p), nil
	}
	return n, err
}

// opcode is the opcode of request packet p, 0 if p is too short to
// carry one.
func opcode(p []byte) int32 {
	if len(p) < 12 {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p[8:12]))
}

// recordLocked records that a packet went out at now, and reports
// whether it was the connection's first (the connect request). w.mu is
// held.
func (c *wireConn) recordLocked(now time.Time) (connect bool) {
	connect = c.first.IsZero()
	if connect {
		c.first = now
	}
	grain := c.w.timeout / wireGrain
	if n := len(c.sent); n == 0 || now.Sub(c.sent[n-1]) >= grain {
		c.sent = append(c.sent, now)
	}
	if c.w.timeout > 0 { // forget what no deadline will look at again
		for len(c.sent) > 1 && now.Sub(c.sent[0]) > 2*c.w.timeout {
			c.sent = c.sent[1:]
		}
	}
	return connect
}

// expect returns a channel that is closed once a packet that carries
// marker has been written to a connection, and a function that stops the
// wait. go-zookeeper writes each request in one Write, in the order the
// requests were made, from one goroutine (Conn.sendLoop, sendData), so a
// request made after the channel is closed goes out after that packet.
func (w *wire) expect(marker string) (sent <-chan struct{}, stop func()) {
	e := expectation{marker: []byte(marker), sent: make(chan struct{})}
	w.mu.Lock()
	w.expects = append(w.expects, e)
	w.mu.Unlock()
	return e.sent, func() { w.forget(e.sent) }
}

func (w *wire) forget(sent chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, e := range w.expects {
		if e.sent == sent {
			w.expects = append(w.expects[:i], w.expects[i+1:]...)
			return
		}
	}
}

// sawWrite closes the expectations that packet p meets.
func (w *wire) sawWrite(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 0; i < len(w.expects); {
		if e := w.expects[i]; bytes.Contains(p, e.marker) {
			close(e.sent)
			w.expects = append(w.expects[:i], w.expects[i+1:]...)
			continue
		}
		i++
	}
}

// wireReadBuffer is what one read off the socket may take in. go-zookeeper
// reads each reply with two reads, its length and then its body
// (Conn.recvLoop); with many requests in flight on one connection (many
// goroutines on one Client) the replies come back to back, and a buffer
// serves most of those reads with no system call.
const wireReadBuffer = 32 << 10

// Read reads for go-zookeeper's reader, through a buffer, and follows the
// packets it hands over: the connect response's timeout and session, and
// the replies the gate holds (see anchor.go). What the gate sees is what
// go-zookeeper gets, not what the buffer read ahead. A frame no server
// sends closes the connection with an error (see reader.length).
func (c *wireConn) Read(p []byte) (int, error) {
	if c.in == nil {
		c.in = bufio.NewReaderSize(c.Conn, wireReadBuffer)
	}
	if c.rd.dead {
		return 0, net.ErrClosed
	}
	if c.rd.shut && c.shut() {
		return 0, errShut
	}
	n, err := c.in.Read(p)
	if err != nil && c.w.tls != nil && !c.shaken.Load() && refusedTLS(err) {
		// The server refused us after TLS's handshake, as TLS 1.3 does
		// with a client certificate it does not accept: Connect's error
		// must say so, not that the handshake timed out.
		te := &TLSError{Addr: c.addr, Err: err}
		c.w.tlsFailed(te)
		err = te
	}
	if n > 0 {
		hold := c.observe(p[:n])
		if c.rd.bad != nil {
			_ = c.Close()
			c.rd.dead = true // nothing after a bad frame is a packet's start
			return 0, c.rd.bad
		}
		if hold && !c.wait() {
			c.rd.dead = true // what the buffer holds after the reply dropped is no packet's start
			return 0, net.ErrClosed
		}
	}
	return n, err
}

// lastDialError is the error of the last dial that failed, if any.
func (w *wire) lastDialError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dialErr
}

// whyNoSession adds to err, the error of a wait for a session that ended
// (the context's), why no session came: the last lookup of a name that
// failed and the last dial that failed ("no such host", "connection
// refused") are what the user needs to read, not only the deadline.
func (w *wire) whyNoSession(err error) error {
	w.mu.Lock()
	lerr, derr := w.lookupErr, w.dialErr
	w.mu.Unlock()
	if lerr != nil {
		err = fmt.Errorf("%w; last lookup error: %w", err, lerr)
	}
	if derr != nil {
		err = fmt.Errorf("%w; last dial error: %w", err, derr)
	}
	return err
}

// servers is the number of servers to spread the handshake's bound over:
// the addresses the names resolved to (hosts.servers), at least one.
func (w *wire) servers() int {
	w.mu.Lock()
	h := w.hosts
	w.mu.Unlock()
	if h == nil {
		return 1
	}
	return max(h.servers(), 1)
}

// log is the Session's logger, or a silent one.
func (w *wire) log() *slog.Logger {
	if w.logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return w.logger
}

// sessionTimeout is the timeout the server granted, 0 before it has.
func (w *wire) sessionTimeout() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timeout
}

// sentByOn returns when the latest packet that went out no later than t
// on the current connection went out (errs early by up to a grain), or, if
// none did, when the connection's connect request went out; if the current connection is the one a request
// sent at sent went out on (its connect request went out no later); else
// zero. A write acknowledged on an earlier connection says nothing of
// this one's packets, whose touches may never have reached the quorum: a
// process paused between a write's answer and Confirm, while a reconnect
// sent its connect request, would otherwise take that request as w (found
// by make model's authors, reading the code).
func (w *wire) sentByOn(sent, t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.cur; c == nil || c.first.After(sent) {
		return time.Time{}
	}
	return w.sentByLocked(t)
}

func (w *wire) sentByLocked(t time.Time) time.Time {
	c := w.cur
	if c == nil {
		return time.Time{}
	}
	at := c.first
	for _, s := range c.sent {
		if s.After(t) {
			break
		}
		at = s
	}
	return at
}

// drop closes the current connection: go-zookeeper notices, fails what is
// pending on it, and reconnects to the next server in its list.
func (w *wire) drop() {
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c != nil && c.Conn != nil { // a Connect'ed connection has no socket (connect.go)
		_ = c.Close()
	}
}
