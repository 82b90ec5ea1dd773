package session

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// authFailer is a dialer whose connections fail the write of a credential
// (a setAuth request) while fail is above zero, as a connection that
// breaks right after its handshake does: the write errs, and the socket
// is closed.
type authFailer struct {
	fail   atomic.Int32
	failed chan struct{} // closed at the first failed write
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
}

func (d *authFailer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns = append(d.conns, c)
	return &authFailConn{Conn: c, d: d}, nil
}

// last is the connection dialed last.
func (d *authFailer) last() net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[len(d.conns)-1]
}

type authFailConn struct {
	net.Conn
	d *authFailer
}

func (c *authFailConn) Write(p []byte) (int, error) {
	if len(p) >= 12 && opcode(p) == opSetAuth && c.d.fail.Add(-1) >= 0 {
		_ = c.Conn.Close()
		c.d.once.Do(func() { close(c.d.failed) })
		return 0, errors.New("test: the write of a credential failed")
	}
	return c.Conn.Write(p)
}

// go-zookeeper v1.0.4 re-sends the credentials after each reconnect
// (resendZkAuth), through sendRequest, whose reply channel holds one
// reply. When that write fails, sendData puts the error in the channel
// and leaves the request in the connection's table; resendZkAuth returns
// without reading it; then Conn.loop's flushRequests sends the request a
// second reply, under the table's lock, and blocks for ever (go-zookeeper
// PR #163, open). The connection never reconnects, and every request
// after it hangs, until the keeper replaces the connection (twice the
// session timeout), and so loses the session and every lease on it. The
// wire reports such a write as made and closes the connection instead:
// the request then gets one reply, from flushRequests, and the loop goes
// on to the next connection, which takes the session up.
func TestFailedCredentialWriteKeepsTheSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &authFailer{failed: make(chan struct{})}
	c := testSession(t, ctx, d.dial, func(o *Options) {
		o.Auth = []Auth{{Scheme: "digest", Auth: []byte("zklock:authresend")}}
		o.SessionTimeout = 20 * time.Second // so that only a wedged connection loses it
	})
	id := c.ID()
	d.fail.Store(1)
	_ = d.last().Close() // go-zookeeper reconnects, and re-sends the credential
	select {
	case <-d.failed:
	case <-ctx.Done():
		t.Fatal("the credential was never re-sent")
	}
	err := c.Retry(ctx, func(zc Conn) error {
		_, err := zc.Exists("/")
		return err
	})
	if err != nil {
		t.Fatalf("a request after the failed write of a credential: %v", err)
	}
	if got := c.ID(); got != id {
		t.Fatalf("the session %#x was replaced by %#x: the connection did not take it up again", id, got)
	}
}
