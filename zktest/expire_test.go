package zktest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// states records a connection's session states, in order, with when each
// came.
type states struct {
	mu  sync.Mutex
	seq []zk.State
	at  []time.Time
}

func (s *states) callback(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = append(s.seq, ev.State)
	s.at = append(s.at, time.Now())
}

// first returns when state first came after since (zero if it has not).
func (s *states) first(state zk.State, since time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, st := range s.seq {
		if st == state && !s.at[i].Before(since) {
			return s.at[i]
		}
	}
	return time.Time{}
}

// faultyConn connects through a fresh Faults and waits for the session.
func faultyConn(t *testing.T, servers []string, timeout time.Duration) (*zk.Conn, *zktest.Faults, *states) {
	t.Helper()
	f := zktest.NewFaults(nil)
	st := &states{}
	conn, _, err := zk.Connect(servers, timeout, zk.WithDialer(f.Dialer()),
		zk.WithEventCallback(st.callback), zk.WithLogger(log.New(io.Discard, "", 0)))
	require.NoError(t, err)
	t.Cleanup(f.Close)
	t.Cleanup(conn.Close) // before f.Close: cleanups run last-in first-out
	require.Eventually(t, func() bool { return conn.State() == zk.StateHasSession },
		30*time.Second, 10*time.Millisecond, "no session with %v", servers)
	return conn, f, st
}

// ephemeral creates an ephemeral node of conn's current session and
// returns its path and that session. A short session's connection can drop
// under load (its reads time out after two-thirds of the timeout), and the
// session can even expire and be replaced: a create or check that fails
// with the connection is made again under a new name once a session is
// back, and the node returned is checked to be that session's.
func ephemeral(t *testing.T, conn *zk.Conn) (string, int64) {
	t.Helper()
	for range 10 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		path, err := conn.Create("/"+t.Name()+"-"+hex.EncodeToString(b[:]), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if connectionLost(err) {
			awaitSession(t, conn)
			continue
		}
		require.NoError(t, err)
		ok, st, err := conn.Exists(path)
		if connectionLost(err) {
			awaitSession(t, conn)
			continue
		}
		require.NoError(t, err)
		if ok && st.EphemeralOwner == conn.SessionID() {
			return path, st.EphemeralOwner
		}
	}
	require.FailNow(t, "no ephemeral node of the current session in 10 tries")
	return "", 0
}

// connectionLost reports an error after which a request may succeed on the
// next connection or session.
func connectionLost(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

func awaitSession(t *testing.T, conn *zk.Conn) {
	t.Helper()
	require.Eventually(t, func() bool { return conn.State() == zk.StateHasSession },
		30*time.Second, 10*time.Millisecond, "no session again")
}

func exists(t *testing.T, conn *zk.Conn, path string) bool {
	t.Helper()
	ok, _, err := conn.Exists(path)
	require.NoError(t, err)
	return ok
}

// ExpireSession ends the session on the server, and returns once the
// client has been told; the client then gets a new session.
func TestExpireSession(t *testing.T) {
	t.Parallel()
	servers := zktest.Servers(t)
	conn, f, st := faultyConn(t, servers, 10*time.Second)
	observer := connect(t, servers, 10*time.Second)
	node, id := ephemeral(t, conn)
	require.Equal(t, id, f.SessionID(), "Faults reads the session from the handshake")

	start := time.Now()
	require.NoError(t, f.ExpireSession(t.Context()))
	told := time.Since(start)
	require.False(t, exists(t, observer, node), "the server deleted the session's ephemeral node")
	require.Eventually(t, func() bool { return !st.first(zk.StateExpired, start).IsZero() },
		5*time.Second, 5*time.Millisecond, "the client reports StateExpired")
	require.Eventually(t, func() bool { s := conn.SessionID(); return s != 0 && s != id },
		10*time.Second, 5*time.Millisecond, "the client gets a new session")
	renewed := time.Since(start)
	require.Equal(t, conn.SessionID(), f.SessionID())
	// How soon is logged, not asserted (about a second with go-zookeeper):
	// the client was connected throughout, so its session could not have
	// expired but by ExpireSession, and the node gone at its return shows
	// that the server had ended it by then.
	t.Logf("told after %v, new session after %v", told.Round(time.Millisecond), renewed.Round(time.Millisecond))

	// The new session works and can be expired in turn.
	node, _ = ephemeral(t, conn)
	require.NoError(t, f.ExpireSession(t.Context()))
	require.False(t, exists(t, observer, node))
}

// KillSession needs no path through the client's own transport: it works
// while the client is partitioned, and the client hears after the heal.
func TestKillSessionWhilePartitioned(t *testing.T) {
	t.Parallel()
	servers := zktest.Servers(t)
	conn, f, st := faultyConn(t, servers, 10*time.Second)
	observer := connect(t, servers, 10*time.Second)
	node, id := ephemeral(t, conn)

	f.Partition()
	f.Drop()
	require.Eventually(t, func() bool { return conn.State() != zk.StateHasSession },
		5*time.Second, 5*time.Millisecond, "the client noticed the drop")
	start := time.Now()
	require.NoError(t, f.KillSession(t.Context()))
	require.False(t, exists(t, observer, node), "gone as soon as KillSession returns")
	require.True(t, st.first(zk.StateExpired, start).IsZero(), "the client cannot hear it yet")

	f.Heal()
	require.Eventually(t, func() bool { s := conn.SessionID(); return s != 0 && s != id },
		10*time.Second, 5*time.Millisecond, "the client gets a new session after the heal")
	require.False(t, st.first(zk.StateExpired, start).IsZero())
	require.NoError(t, f.KillSession(t.Context()), "the new session can be killed too")
}

// PartitionUntilExpired makes the client live through a real expiry: it
// disconnects before the server expires the session, and is told after.
func TestPartitionUntilExpired(t *testing.T) {
	t.Parallel()
	servers := zktest.Servers(t)
	// What is checked is what PartitionUntilExpired does, not how fast a
	// client notices silence: a session of a few seconds outlives the
	// bursts of CPU starvation of a busy machine, which a 1 s one did not.
	conn, f, st := faultyConn(t, servers, 4*time.Second)
	observer := connect(t, servers, 10*time.Second)
	node, id := ephemeral(t, conn)

	start := time.Now()
	require.NoError(t, f.PartitionUntilExpired(t.Context()))
	took := time.Since(start)
	require.False(t, f.Partitioned())
	require.False(t, exists(t, observer, node))
	require.Eventually(t, func() bool { return !st.first(zk.StateExpired, start).IsZero() },
		5*time.Second, 5*time.Millisecond, "the client reports StateExpired")
	disconnected := st.first(zk.StateDisconnected, start)
	require.False(t, disconnected.IsZero())
	require.True(t, disconnected.Before(st.first(zk.StateExpired, start)), "disconnected first")
	require.Eventually(t, func() bool { s := conn.SessionID(); return s != 0 && s != id },
		10*time.Second, 5*time.Millisecond, "the client gets a new session")
	t.Logf("expired and told after %v", took.Round(time.Millisecond))
}

// A partition healed early leaves the session alive, and
// PartitionUntilExpired says so rather than pretend.
func TestPartitionUntilExpiredReportsSurvival(t *testing.T) {
	t.Parallel()
	conn, f, _ := faultyConn(t, zktest.Servers(t), 2*time.Second)
	id := conn.SessionID()
	done := make(chan error, 1)
	go func() { done <- f.PartitionUntilExpired(t.Context()) }()
	require.Eventually(t, f.Partitioned, 5*time.Second, time.Millisecond)
	f.Heal() // long before the server expires anything
	select {
	case err := <-done:
		require.ErrorContains(t, err, "healed early")
	case <-time.After(30 * time.Second):
		t.Fatal("PartitionUntilExpired did not return")
	}
	require.Equal(t, id, conn.SessionID())
}

func TestExpireSessionWithoutSession(t *testing.T) {
	t.Parallel()
	f := zktest.NewFaults(nil)
	defer f.Close()
	require.Zero(t, f.SessionID())
	require.ErrorContains(t, f.ExpireSession(t.Context()), "no session")
	require.ErrorContains(t, f.KillSession(t.Context()), "no session")
	require.ErrorContains(t, f.PartitionUntilExpired(t.Context()), "no session")
}

// A server that does not answer (paused here; electing or restarting in an
// ensemble) does not make KillSession give up at once: it tries again.
func TestKillSessionRetriesAServerThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	zkc := zktest.Start(t)
	conn, f, _ := faultyConn(t, zkc.Servers(), 20*time.Second)
	id := conn.SessionID()
	require.NoError(t, zkc.Pause(t.Context()))
	unpaused := make(chan error, 1)
	go func() {
		time.Sleep(3 * time.Second)
		unpaused <- zkc.Unpause(context.Background())
	}()
	require.NoError(t, f.KillSession(t.Context()))
	require.NoError(t, <-unpaused)
	require.Eventually(t, func() bool { s := conn.SessionID(); return s != 0 && s != id },
		30*time.Second, 10*time.Millisecond, "the killed session is over")
}
