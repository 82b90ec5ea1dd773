package zktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// connect opens a zk session on servers and waits until it is established.
// Its handshakes are bounded (HandshakeDialer): a restarted server can
// leave a connection made while it started unanswered (ZOOKEEPER-5051),
// and go-zookeeper alone would wait out the session on it.
func connect(t *testing.T, servers []string, sessionTimeout time.Duration) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogInfo(false),
		zk.WithDialer(zktest.HandshakeDialer(5*time.Second)))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	require.Eventually(t, func() bool { return conn.State() == zk.StateHasSession },
		30*time.Second, 20*time.Millisecond, "no session with %v", servers)
	return conn
}

func TestRunRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]zktest.Option{
		"zero tick":         zktest.WithTickTime(0),
		"sub-ms tick":       zktest.WithTickTime(time.Microsecond),
		"empty key":         zktest.WithConfig("", "1"),
		"key with =":        zktest.WithConfig("a=b", "1"),
		"value with a line": zktest.WithConfig("a", "1\nb=2"),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := zktest.Run(t.Context(), zktest.Image(), opt)
			require.Error(t, err)
			require.Nil(t, c, "no container is created for invalid options")
		})
	}
}

func TestStartServesWithConfig(t *testing.T) {
	t.Parallel()
	c := zktest.Start(t,
		zktest.WithTickTime(100*time.Millisecond),
		zktest.WithConfig("maxSessionTimeout", "20000"),
		// A user's port bindings must not lose the fixed client port.
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = nil
		}),
		// The user's customizers apply after zktest's defaults.
		testcontainers.WithLabels(map[string]string{"org.zkrecipes.zktest": "user"}),
	)
	ctx := t.Context()

	require.Regexp(t, `^127\.0\.0\.1:\d+$`, c.ClientEndpoint())
	require.Equal(t, []string{c.ClientEndpoint()}, c.Servers())
	info, err := c.Inspect(ctx) // testcontainers' own methods
	require.NoError(t, err)
	require.Equal(t, "user", info.Config.Labels["org.zkrecipes.zktest"])

	out, err := c.FourLetter(ctx, "srvr")
	require.NoError(t, err)
	require.Contains(t, out, "Mode: standalone")

	out, err = c.FourLetter(ctx, "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", out)

	out, err = c.FourLetter(ctx, "conf")
	require.NoError(t, err)
	require.Contains(t, out, "tickTime=100\n")
	require.Contains(t, out, "minSessionTimeout=200\n")
	require.Contains(t, out, "maxSessionTimeout=20000\n")

	_, err = c.FourLetter(ctx, "toolong")
	require.Error(t, err)

	conn := connect(t, c.Servers(), 10*time.Second)
	_, err = conn.Create("/zktest", []byte("hello"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	data, _, err := conn.Get("/zktest")
	require.NoError(t, err)
	require.Equal(t, "hello", string(data))
}

func TestPauseTimesOutClientsAndUnpauseRecovers(t *testing.T) {
	t.Parallel()
	c := zktest.Start(t)
	ctx := t.Context()
	conn := connect(t, c.Servers(), 2*time.Second)
	_, err := conn.Create("/paused", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	require.NoError(t, c.Pause(ctx))

	probe, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = c.FourLetter(probe, "ruok")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused server must not answer")

	// The request gets no answer; the client gives up after two thirds of
	// the session timeout and fails it.
	errc := make(chan error, 1)
	go func() {
		_, _, err := conn.Get("/paused")
		errc <- err
	}()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, zk.ErrConnectionClosed)
	case <-time.After(20 * time.Second):
		t.Fatal("a request to a paused server did not fail")
	}

	require.NoError(t, c.Unpause(ctx))
	out, err := c.FourLetter(ctx, "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", out)
	require.Eventually(t, func() bool {
		_, _, err := conn.Get("/paused")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "client did not recover after unpause")
}

func TestStopStartKeepsEndpointAndSession(t *testing.T) {
	t.Parallel()
	c := zktest.Start(t)
	ctx := t.Context()
	endpoint := c.ClientEndpoint()
	conn := connect(t, c.Servers(), 20*time.Second)
	session := conn.SessionID()
	_, err := conn.Create("/restarted", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	require.NoError(t, c.Stop(ctx, nil))
	_, err = c.FourLetter(ctx, "ruok")
	require.Error(t, err, "a stopped server must refuse connections")

	require.NoError(t, c.Start(ctx))
	require.Equal(t, endpoint, c.ClientEndpoint())
	out, err := c.FourLetter(ctx, "srvr")
	require.NoError(t, err)
	require.Contains(t, out, "Mode: standalone")

	// The same client reconnects to the same address and finds its data and
	// its session.
	require.Eventually(t, func() bool {
		_, _, err := conn.Get("/restarted")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "client did not reconnect after restart")
	require.Equal(t, session, conn.SessionID())
}

func TestServersSharesOneContainer(t *testing.T) {
	if zktest.External() {
		t.Skip("ZKLOCK_TEST_SERVERS is set: no shared container")
	}
	t.Parallel()
	servers := zktest.Servers(t)
	require.Len(t, servers, 1)
	require.Equal(t, servers, zktest.Servers(t))

	// Ephemeral: the shared server outlives this test (and -count runs).
	conn := connect(t, servers, 10*time.Second)
	_, err := conn.Create("/shared", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
}

func TestServersHonoursExternalServers(t *testing.T) {
	t.Setenv("ZKLOCK_TEST_SERVERS", " 127.0.0.1:1, 127.0.0.1:2 ,")
	require.True(t, zktest.External())
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, zktest.Servers(t))

	// Start still makes a container of its own, for tests that break it.
	c := zktest.Start(t)
	out, err := c.FourLetter(t.Context(), "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", out)

	t.Setenv("ZKLOCK_TEST_SERVERS", "")
	require.False(t, zktest.External())
}

// A container that fails to start comes back with the error, so that
// testcontainers' cleanup helpers can remove it.
func TestRunReturnsAPartiallyStartedContainer(t *testing.T) {
	t.Parallel()
	c, err := zktest.Run(t.Context(), zktest.Image(),
		testcontainers.WithEntrypoint("/bin/false"), // exits before serving
	)
	testcontainers.CleanupContainer(t, c)
	require.Error(t, err)
	require.ErrorContains(t, err, "before serving")
	require.NotNil(t, c, "the container that failed is returned")
	require.NotEmpty(t, c.GetContainerID())
	require.NoError(t, testcontainers.TerminateContainer(c))
	_, err = c.State(t.Context())
	require.Error(t, err, "the container is gone")
}

func TestTerminateNil(t *testing.T) {
	var c *zktest.Container
	require.NoError(t, c.Terminate(context.Background()))
	require.NoError(t, testcontainers.TerminateContainer(c))
}
