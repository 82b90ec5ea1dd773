package session

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
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

// go-zookeeper v1.0.4 re-sends the credentials added through its own
// Conn.AddAuth (a user may, through Client.Conn) after each reconnect
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
		o.SessionTimeout = 20 * time.Second // so that only a wedged connection loses it
	})
	if err := c.Conn().AddAuth("digest", []byte("zklock:authresend")); err != nil {
		t.Fatal(err)
	}
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

// A connection the Session opens to replace one that no server took (twice
// the session timeout) carries the credentials too: a node that only the
// credentials' identity may read is still read after the replace.
func TestReplacedConnectionKeepsTheCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testSession(t, ctx, nil, func(o *Options) {
		o.Auth = []Auth{{Scheme: "digest", Auth: []byte("zklock:replaced")}}
	})
	read := ownNode(t, ctx, c, "replaced")
	id := c.ID()
	c.replace()
	if err := read(); err != nil {
		t.Fatalf("a read of a node of the credentials' identity after the connection was replaced: %v", err)
	}
	if c.ID() == id {
		t.Fatal("the session was not replaced")
	}
}

// Credentials go out with every connect request: on a connection that
// took the session up after a drop, the first request is made with them.
// And a credential the server refuses (a scheme it has no provider for)
// fails Open with zk.ErrAuthFailed, naming the scheme, rather than
// letting it wait for its context.
func TestCredentialsOnEveryConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &authFailer{failed: make(chan struct{})}
	c := testSession(t, ctx, d.dial, func(o *Options) {
		o.Auth = []Auth{{Scheme: "digest", Auth: []byte("zklock:every")}, {Scheme: "digest", Auth: []byte("zklock:other")}}
		o.SessionTimeout = 20 * time.Second
	})
	read := ownNode(t, ctx, c, "other")
	id := c.ID()
	_ = d.last().Close()
	if err := read(); err != nil {
		t.Fatalf("a read of a node of the credentials' identity after a reconnect: %v", err)
	}
	if c.ID() != id {
		t.Fatal("the session was not taken up again")
	}

	start := time.Now()
	_, err := openSession(ctx, func(o *Options) { o.Auth = []Auth{{Scheme: "no-such-scheme", Auth: []byte("x")}} })
	if !errors.Is(err, zk.ErrAuthFailed) || !strings.Contains(err.Error(), "no-such-scheme") || ctx.Err() != nil {
		t.Fatalf("Open with a credential the server refuses: %v after %v; want zk.ErrAuthFailed naming the scheme", err, time.Since(start))
	}
}

// ownNode makes a node that only the digest identity zklock:password may
// touch (deleted when the test ends), and returns a read of it through c.
func ownNode(t *testing.T, ctx context.Context, c *Session, password string) (read func() error) {
	t.Helper()
	node := "/" + t.Name()
	err := c.Retry(ctx, func(zc Conn) error {
		return zc.CreatePersistent(node, nil, zk.DigestACL(zk.PermAll, "zklock", password))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Retry(ctx, func(zc Conn) error { return zc.Delete(node) }) })
	return func() error {
		return c.Retry(ctx, func(zc Conn) error { _, _, err := zc.Get(node); return err })
	}
}
