package zklock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// connectRequests is the server's count of connect requests received
// (mntr's zk_connection_request_count).
func connectRequests(t *testing.T, ctx context.Context, srv *zktest.Container) int {
	t.Helper()
	out, err := srv.FourLetter(ctx, "mntr")
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_connection_request_count"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err, "mntr: %q", line)
			return n
		}
	}
	t.Fatalf("mntr has no zk_connection_request_count:\n%s", out)
	return 0
}

// A Connect opens one connection to the server, the session's, and the
// Client's first requests go on it: the server counts one connect request
// more, after Connect and a lock taken and released. On a server of the
// test's own, so that no other Client's connections count.
func TestConnectOpensOneConnection(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	ctx := ctxT(t)
	before := connectRequests(t, ctx, srv)
	c, err := zklock.Connect(ctx, srv.Servers())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m, err := zklock.NewMutex(c, lockPath(t))
	require.NoError(t, err)
	l, err := m.Acquire(ctx)
	require.NoError(t, err)
	release(t, l)
	require.Equal(t, before+1, connectRequests(t, ctx, srv), "connect requests the server received for one Connect")
}

// A Client without WithTLS pointed at a TLS-only port gets no session (the
// server reads the connect request as a TLS record that is none, and
// closes: Netty's NotSslRecordException); when Connect gives up, its error
// says that the port may be a TLS port and needs WithTLS, beside the
// context's error.
func TestPlaintextOnTLSPortHints(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, srv.Servers())
	if c != nil {
		_ = c.Close()
	}
	t.Log(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "before answering the connect request")
	require.ErrorContains(t, err, "may be a TLS port")
	require.ErrorContains(t, err, "WithTLS")
}
