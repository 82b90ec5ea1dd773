package zklock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A server that takes a connection and never answers it must not hold a
// Client for go-zookeeper's ten times two-thirds of the session timeout (30s
// here): the Client gives the handshake up after the session timeout over
// the number of servers (4.5s here, one server) and dials again, as
// ZooKeeper's Java client does. A paused server is such a server (its
// kernel completes the TCP handshake, and Docker's proxy forwards the
// connect request, which no process reads); so is ZooKeeper 3.8 or 3.9
// refusing a connection while it starts (ZOOKEEPER-5051: the close throws
// before it closes the socket), which zktest's TestStopStartKeepsEndpointAndSession
// met in CI. Without the bound only the first dial happens within 15s.
func TestHandshakeWithSilentServerIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("handshake: skipped in -short mode")
	}
	if zktest.External() {
		t.Skip("handshake: pauses its server, and ZKLOCK_TEST_SERVERS is set: no containers")
	}
	t.Parallel()
	c := zktest.Start(t)
	ctx := ctxT(t)
	require.NoError(t, c.Pause(ctx))
	t.Cleanup(func() { _ = c.Unpause(context.Background()) }) // before Start's cleanup removes it

	var dials atomic.Int32
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := zklock.Connect(cctx, c.Servers(),
		zklock.WithSessionTimeout(4500*time.Millisecond), zklock.WithDialer(dial))
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused server grants no session")
	require.GreaterOrEqual(t, dials.Load(), int32(2),
		"the Client waited on the first connection's handshake instead of dialing again")
}
