package session

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// handshakes is what the wire knows of its handshakes: the session timeout
// asked for and granted, which make each one's bound, and the connections
// servers closed unanswered.
type handshakes struct {
	requested time.Duration // zero: no bound (a wire made in a test)

	mu      sync.Mutex
	granted time.Duration // by the last connect response that granted one
	// Connections closed unanswered since a connect response last came, and
	// the last such server.
	closed     int
	closedAddr string
}

// minHandshake is the least handshake bound: go-zookeeper gives the TCP
// dial alone a second (zk.WithConnectTimeout's default).
const minHandshake = time.Second

// bound is how long a handshake may take from when its dial returned (the
// dial has go-zookeeper's timeout; a TLS dialer's handshake is its own):
// the session timeout (granted, else asked for) over the servers (the
// addresses names last resolved to, hosts.servers), at least minHandshake,
// as in ZooKeeper's Java client (ClientCnxn: connectTimeout =
// sessionTimeout / hostProvider.size(), then SendThread moves on). Zero:
// no bound.
//
// go-zookeeper waits ten times two-thirds of the session timeout for a
// connect response (Conn.authenticate), but a server may never answer:
// ZooKeeper 3.8 and 3.9 refuse a connect request while starting
// ("ZooKeeperServer not running") and the close throws before closing the
// socket (ZooKeeperServer.removeCnxn reads a zkDb startdata has not made
// yet; ZOOKEEPER-5051); a paused server's kernel accepts connections its
// process will not read. Waiting that out lost, in a rolling restart, the
// session of a client reconnecting to the just-restarted server, though
// other servers could take it.
//
// Giving up is safe: the connection has no session go-zookeeper heard of,
// and nothing held on it; go-zookeeper moves to the next server, where the
// session is taken up or found expired as after any dropped connection.
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

// grant records t as granted, for a connection with no connect response
// ([Session.openConnect]).
func (h *handshakes) grant(t time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.granted = t
}

// answered records a connect response that granted ms milliseconds (if
// positive).
func (h *handshakes) answered(ms int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ms > 0 {
		h.granted = time.Duration(ms) * time.Millisecond
	}
	h.closed, h.closedAddr = 0, ""
}

// closedUnanswered records that server addr closed a connection before
// answering the connect request, as a TLS port does to a plaintext client
// (Netty's SslHandler: NotSslRecordException), a server over maxClientCnxns
// or shutting down, and Docker's port proxy when its container does not
// accept (seen under heavy load, in TestLastZxidRace's runs).
func (h *handshakes) closedUnanswered(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed++
	h.closedAddr = addr
}

func (h *handshakes) unanswered() (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed, h.closedAddr
}

// closedByServer reports a read error that is the server's close.
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// bound is one connection's handshake bound: zero, or when the dial
// returned plus [handshakes.bound], until the connect response is read.
type bound struct {
	by     time.Time
	shaken atomic.Bool
}

// deadline is t, or the bound if that comes first (a zero t comes last).
func (b *bound) deadline(t time.Time) time.Time {
	if by := b.by; !by.IsZero() && !b.shaken.Load() && (t.IsZero() || t.After(by)) {
		return by
	}
	return t
}

// SetDeadline, SetReadDeadline and SetWriteDeadline bound the handshake
// (handshakes.bound): go-zookeeper sets each deadline before it reads or
// writes, and clears the read one before the connect response's body
// (Conn.authenticate).
func (c *wireConn) SetDeadline(t time.Time) error {
	return c.Conn.SetDeadline(c.bound.deadline(t))
}

func (c *wireConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.bound.deadline(t))
}

func (c *wireConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound.deadline(t))
}
