package zktest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// An ensemble elects one leader; killing it makes the other two elect
// another while clients carry on; the killed server comes back as a
// follower on the same endpoint.
func TestEnsembleSurvivesItsLeader(t *testing.T) {
	t.Parallel()
	started := time.Now()
	e := zktest.StartEnsemble(t)
	t.Logf("ensemble serving after %v", time.Since(started).Round(time.Millisecond))
	ctx := t.Context()

	servers := e.Servers()
	require.Len(t, servers, zktest.EnsembleSize)
	require.Len(t, e.Nodes(), zktest.EnsembleSize)
	require.Nil(t, e.Node(-1))
	require.Nil(t, e.Node(zktest.EnsembleSize))
	modes := map[string]int{}
	for i, s := range servers {
		require.Equal(t, s, e.Node(i).ClientEndpoint())
		out, err := e.Node(i).FourLetter(ctx, "srvr")
		require.NoError(t, err)
		switch {
		case strings.Contains(out, "Mode: leader"):
			modes["leader"]++
		case strings.Contains(out, "Mode: follower"):
			modes["follower"]++
		default:
			t.Fatalf("server %d: %q", i, out)
		}
	}
	require.Equal(t, map[string]int{"leader": 1, "follower": 2}, modes)

	conn := connect(t, servers, 10*time.Second)
	_, err := conn.Create("/replicated", []byte("x"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	session := conn.SessionID()

	// Sessions are the ensemble's: one killed through any server is over
	// everywhere.
	victim, f, _ := faultyConn(t, servers, 10*time.Second)
	node, _ := ephemeral(t, victim)
	require.NoError(t, f.ExpireSession(ctx))
	_, err = conn.Sync(node) // catch up with the leader
	require.NoError(t, err)
	require.False(t, exists(t, conn, node))

	killed := time.Now()
	old, err := e.KillLeader(ctx)
	require.NoError(t, err)
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	t.Logf("new leader after %v", time.Since(killed).Round(time.Millisecond))
	require.NotEqual(t, old, leader)
	require.Eventually(t, func() bool {
		_, _, err := conn.Get("/replicated")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "client did not move to a live server")
	require.Equal(t, session, conn.SessionID(), "the session survives a leader change")

	require.NoError(t, e.Node(old).Start(ctx))
	out, err := e.Node(old).FourLetter(ctx, "srvr")
	require.NoError(t, err)
	require.Contains(t, out, "Mode: follower")
	direct := connect(t, []string{servers[old]}, 10*time.Second)
	data, _, err := direct.Get("/replicated")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
}

// One server down leaves a quorum; pausing a second leaves none, and
// Leader reports that when its context ends.
func TestEnsembleQuorum(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t)
	ctx := t.Context()
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	follower := (leader + 1) % zktest.EnsembleSize
	other := (leader + 2) % zktest.EnsembleSize

	require.NoError(t, e.Node(follower).Stop(ctx, nil))
	conn := connect(t, []string{e.Node(other).ClientEndpoint()}, 10*time.Second)
	_, err = conn.Create("/quorum", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err, "two of three still write")

	// Alone, the leader steps down once it misses its followers' acks.
	require.NoError(t, e.Node(other).Pause(ctx))
	require.Eventually(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := e.Leader(short)
		if err != nil {
			require.ErrorIs(t, err, zktest.ErrNoLeader)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "one of three cannot lead")

	require.NoError(t, e.Node(other).Unpause(ctx))
	require.NoError(t, e.Node(follower).Start(ctx))
	_, err = e.Leader(ctx)
	require.NoError(t, err)
	require.Error(t, e.Kill(ctx, zktest.EnsembleSize), "no such server")
}

func TestEnsembleTerminateNil(t *testing.T) {
	var e *zktest.Ensemble
	require.NoError(t, e.Terminate(context.Background()))
}
