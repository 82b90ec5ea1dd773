package zklock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/faults"
)

// testClient connects to ZKLOCK_TEST_SERVERS with opts.
func testClient(t *testing.T, ctx context.Context, opts ...Option) *Client {
	t.Helper()
	env := os.Getenv("ZKLOCK_TEST_SERVERS")
	if env == "" {
		t.Fatal("ZKLOCK_TEST_SERVERS is not set: run `make test`")
	}
	c, err := Connect(ctx, strings.Split(env, ","), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// When the Client replaces its connection (no server took the session for
// twice its timeout), a request in flight on the old one fails; the Client
// is still open, so it is retried on the new connection.
func TestReplaceRetriesRequestsInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := faults.New(nil)
	defer f.Close()
	c := testClient(t, ctx, WithDialer(f.Dialer()), WithSessionTimeout(4*time.Second))

	path := "/" + t.Name() + "/lock"
	sent, stop := c.wire.expect(path)
	defer stop()
	f.Partition() // the read below goes out, and its reply is held back
	res := make(chan error, 1)
	go func() {
		_, err := Participants(ctx, c, path)
		res <- err
	}()
	select {
	case <-sent:
	case <-ctx.Done():
		t.Fatal("the read never went out")
	}
	replaced := make(chan struct{})
	go func() { c.replace(); close(replaced) }()
	select {
	case err := <-res:
		t.Fatalf("the read returned during the partition: %v", err)
	case <-replaced:
	}
	// The old connection is closing: Drop ends its socket now, and Heal
	// lets the new connection in.
	f.Drop()
	f.Heal()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("a read in flight during a replace: %v; want it retried on the new connection", err)
		}
	case <-ctx.Done():
		t.Fatal("the read never returned")
	}
}

// go-zookeeper fails a request in flight on a connection being closed with
// zk.ErrConnectionClosed or, when its request select finds the flushed
// reply first, zk.ErrClosing (Conn.request and Conn.loop:
// flushRequests(ErrClosing) once shouldQuit is closed). When the Client
// closed that connection to replace it, the Client is still open: the
// request must be retried on the new connection, not reported as
// ErrClientClosed. The first attempt here replaces the connection and
// fails as go-zookeeper may; the retry must read on the new one.
func TestRetryAfterErrClosingOnReplace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testClient(t, ctx, WithSessionTimeout(4*time.Second))
	first := c.conn()
	var conns []conn
	err := c.retry(ctx, func(zc conn) error {
		conns = append(conns, zc)
		if len(conns) == 1 {
			c.replace()
			return zk.ErrClosing
		}
		_, err := zc.children("/")
		return err
	})
	if err != nil {
		t.Fatalf("a request failed with zk.ErrClosing by a replace: %v; want it retried on the new connection", err)
	}
	if last := conns[len(conns)-1]; last == first {
		t.Fatal("the retry read on the replaced connection")
	}
}
