package zktest

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// HandshakeDialer returns a dialer for go-zookeeper (zk.WithDialer) that
// gives a connection up when the server has sent nothing within timeout of
// its being established: go-zookeeper then dials again, or moves to the next server.
// ZooKeeper's Java client allows the session timeout over the number of
// servers; a timeout of zero or less bounds nothing.
//
// go-zookeeper alone waits ten times two-thirds of the session timeout for
// a connect response, and a server can keep a connection open without
// ever answering it: ZooKeeper 3.8 and 3.9 refuse a connect request that
// comes while they start, and then fail to close the socket
// (ZOOKEEPER-5051); a client that reconnects across [Container.Stop] and
// Start can meet that, and its session then expires before it tries again.
// A paused server ([Container.Pause]) answers no connection either, until
// it is unpaused. zklock's Client bounds its handshakes itself.
func HandshakeDialer(timeout time.Duration) zk.Dialer {
	return func(network, addr string, dialTimeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, dialTimeout)
		if err != nil || timeout <= 0 {
			return c, err
		}
		return &handshakeConn{Conn: c, by: time.Now().Add(timeout)}, nil
	}
}

// handshakeConn cuts the deadlines set before its first read returned
// data to the handshake's bound.
type handshakeConn struct {
	net.Conn
	by    time.Time
	heard atomic.Bool
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard.Store(true)
	}
	return n, err
}

func (c *handshakeConn) bound(t time.Time) time.Time {
	if !c.heard.Load() && (t.IsZero() || t.After(c.by)) {
		return c.by
	}
	return t
}

func (c *handshakeConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.bound(t)) }
func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.bound(t))
}
func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound(t))
}
