package zktest_test

import (
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// A Forwarder that swaps sessions answers a client's reconnect with a new
// session, with no expiry on the way, and the old session lives on with
// its ephemeral node; Drop alone makes the client resume its session; a
// first packet that is no connect request passes as it is.
func TestForwarderSwapSessions(t *testing.T) {
	t.Parallel()
	fw := zktest.Forward(t, zktest.Servers(t)[0])
	st := &states{}
	conn, _, err := zk.Connect([]string{fw.Addr()}, 10*time.Second, zk.WithEventCallback(st.callback),
		zk.WithLogger(log.New(io.Discard, "", 0)))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	awaitSession(t, conn)
	node, first := ephemeral(t, conn)
	t.Cleanup(func() { _ = conn.Delete(node, -1) })

	// Off: a reconnect resumes the session.
	since := time.Now()
	fw.Drop()
	require.Eventually(t, func() bool { return !st.first(zk.StateHasSession, since).IsZero() },
		30*time.Second, 10*time.Millisecond, "no reconnect after Drop")
	require.Equal(t, first, conn.SessionID(), "a reconnect resumes the session")
	require.Zero(t, fw.Swapped())

	// On: a reconnect gets another session, and no word of an expiry.
	fw.SwapSessions(true)
	since = time.Now()
	fw.Drop()
	require.Eventually(t, func() bool { return !st.first(zk.StateHasSession, since).IsZero() },
		30*time.Second, 10*time.Millisecond, "no reconnect after Drop")
	swapped := conn.SessionID()
	require.NotEqual(t, first, swapped, "the reconnect got a new session")
	require.NotZero(t, swapped)
	require.True(t, st.first(zk.StateExpired, since).IsZero(), "the client heard of an expiry")
	require.Equal(t, 1, fw.Swapped())
	ok, stat, err := conn.Exists(node)
	require.NoError(t, err)
	require.True(t, ok, "the old session's node lives on")
	require.Equal(t, first, stat.EphemeralOwner)

	// Bytes that are no ZooKeeper client's pass as they are.
	target, _ := echo(t)
	efw := zktest.Forward(t, target)
	efw.SwapSessions(true)
	c, err := net.Dial("tcp", efw.Addr())
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, "not a connect request\n")
	require.Zero(t, efw.Swapped())
}
