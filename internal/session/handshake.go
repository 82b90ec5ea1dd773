package session

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// handshakes is what the wire knows of its connections' handshakes: the
// session timeout asked for and the one the last connect response granted,
// from which each handshake's bound is made; and the connections a server
// closed before it answered the connect request.
type handshakes struct {
	requested time.Duration // zero: no bound (a wire made in a test)

	mu      sync.Mutex
	granted time.Duration // by the last connect response that granted one
	// Connections closed by their server before a connect response came,
	// since one last came, and the last such server.
	closed     int
	closedAddr string
}

// minHandshake is the least handshake bound: go-zookeeper gives the TCP
// dial alone a second (zk.WithConnectTimeout's default).
const minHandshake = time.Second

// bound is how long a connection's handshake may take, from when its dial
// returned (the dial has go-zookeeper's own timeout, and a TLS dialer's
// handshake is the dialer's): the session timeout (granted, else asked
// for) over the number of servers (the addresses their names resolved to
// when last dialed, hosts.servers), and at least minHandshake; as
// ZooKeeper's Java client does (ClientCnxn: connectTimeout =
// sessionTimeout / hostProvider.size(), after which its SendThread moves
// to the next server). Zero: no bound.
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
func (h *handshakes) bound(servers int) time.Duration {
	if h.requested <= 0 {
		return 0
	}
	t := h.timeout()
	if t <= 0 {
		t = h.requested
	}
	return max(t/time.Duration(max(servers, 1)), minHandshake)
}

// timeout is the session timeout the server granted, 0 before it has.
func (h *handshakes) timeout() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.granted
}

// grant records t as the granted timeout (a connection with no connect
// response to read it from: [Session.openConnect]).
func (h *handshakes) grant(t time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.granted = t
}

// answered records a connect response that granted ms milliseconds; one
// of 0 or less leaves the granted timeout as it was.
func (h *handshakes) answered(ms int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ms > 0 {
		h.granted = time.Duration(ms) * time.Millisecond
	}
	h.closed, h.closedAddr = 0, ""
}

// closedUnanswered records that the server named addr closed a connection
// before it answered the connect request. A TLS port does that to a
// plaintext client: it reads the connect request as a TLS record that is
// none, and closes (Netty's SslHandler: NotSslRecordException); so do a
// server over its connection limit (maxClientCnxns), one shutting down,
// and Docker's port proxy when the container behind it does not accept
// (seen under heavy load, in TestLastZxidRace's runs).
func (h *handshakes) closedUnanswered(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed++
	h.closedAddr = addr
}

// unanswered is how many connections servers closed before a connect
// response since one was last read, and the last such server.
func (h *handshakes) unanswered() (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed, h.closedAddr
}

// closedByServer reports a read error that is the server's close: the
// end of the stream, or a reset.
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// bound is one connection's handshake bound: zero, or when the dial returned
// plus [handshakes.bound], until the connect response has been read (shaken).
type bound struct {
	by     time.Time
	shaken atomic.Bool
}

// deadline is t, or the bound if that comes first (a zero t, no
// deadline, comes last).
func (b *bound) deadline(t time.Time) time.Time {
	if by := b.by; !by.IsZero() && !b.shaken.Load() && (t.IsZero() || t.After(by)) {
		return by
	}
	return t
}

// SetDeadline, SetReadDeadline and SetWriteDeadline bound the handshake
// (see handshakes.bound): go-zookeeper sets each deadline it wants before
// it reads or writes, and clears the read deadline before it reads the
// connect response's body (Conn.authenticate).
func (c *wireConn) SetDeadline(t time.Time) error {
	return c.Conn.SetDeadline(c.bound.deadline(t))
}

func (c *wireConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.bound.deadline(t))
}

func (c *wireConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound.deadline(t))
}
