package session

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/faults"
)

// testSession opens a session on ZKLOCK_TEST_SERVERS, with a session
// timeout of 4s and dial as its transport (net.DialTimeout if nil), and
// the options as edit changes them.
func testSession(t *testing.T, ctx context.Context, dial zk.Dialer, edit ...func(*Options)) *Session {
	t.Helper()
	if os.Getenv("ZKLOCK_TEST_SERVERS") == "" {
		t.Fatal("ZKLOCK_TEST_SERVERS is not set: run `make test`")
	}
	if dial == nil {
		dial = net.DialTimeout
	}
	c, err := openSession(ctx, append([]func(*Options){func(o *Options) { o.Dialer = dial }}, edit...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openSession opens a session on ZKLOCK_TEST_SERVERS as testSession does,
// and returns Open's result.
func openSession(ctx context.Context, edit ...func(*Options)) (*Session, error) {
	env := os.Getenv("ZKLOCK_TEST_SERVERS")
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := Options{
		Servers:        strings.Split(env, ","),
		SessionTimeout: 4 * time.Second,
		ACL:            func(string) []zk.ACL { return zk.WorldACL(zk.PermAll) },
		Dialer:         net.DialTimeout,
		Logger:         discard,
		NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) },
		Hooks: Hooks{
			Lost:     func(*Hold, error) {},
			Released: func(*Hold) {},
			State:    func(State, int64, string) {},
		},
	}
	for _, e := range edit {
		e(&o)
	}
	return Open(ctx, o)
}

// When the Client replaces its connection (no server took the session for
// twice its timeout), a request in flight on the old one fails; the Client
// is still open, so it is retried on the new connection.
func TestReplaceRetriesRequestsInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := faults.New(nil)
	defer f.Close()
	c := testSession(t, ctx, f.Dialer())

	path := "/" + t.Name() + "/lock"
	sent, stop := c.wire.marks.expect(path)
	defer stop()
	f.Partition() // the read below goes out, and its reply is held back
	res := make(chan error, 1)
	go func() {
		res <- c.Retry(ctx, func(zc Conn) error {
			_, err := zc.Children(path)
			if classify(err) == Gone {
				return nil
			}
			return err
		})
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
	c := testSession(t, ctx, nil)
	first := c.Conn()
	var conns []Conn
	err := c.Retry(ctx, func(zc Conn) error {
		conns = append(conns, zc)
		if len(conns) == 1 {
			c.replace()
			return zk.ErrClosing
		}
		_, err := zc.Children("/")
		return err
	})
	if err != nil {
		t.Fatalf("a request failed with zk.ErrClosing by a replace: %v; want it retried on the new connection", err)
	}
	if last := conns[len(conns)-1]; last == first {
		t.Fatal("the retry read on the replaced connection")
	}
}
