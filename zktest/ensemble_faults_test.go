package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

var acl = zk.WorldACL(zk.PermAll)

// mode asks c for its mode with srvr: "leader", "follower", "not serving"
// (an election is under way) or "unreachable".
func mode(ctx context.Context, c *zktest.Container) string {
	probe, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	out, err := c.FourLetter(probe, "srvr")
	if err != nil {
		return "unreachable"
	}
	_, m, ok := strings.Cut(out, "Mode: ")
	if !ok {
		return "not serving"
	}
	m, _, _ = strings.Cut(m, "\n")
	return m
}

// zxid returns the last zxid c has processed, from srvr.
func zxid(t *testing.T, c *zktest.Container) uint64 {
	t.Helper()
	out, err := c.FourLetter(t.Context(), "srvr")
	require.NoError(t, err)
	m := regexp.MustCompile(`Zxid: 0x([0-9a-f]+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "srvr: %q", out)
	z, err := strconv.ParseUint(m[1], 16, 64)
	require.NoError(t, err)
	return z
}

// created reports whether a create through conn has taken effect: a retry
// whose first attempt went through finds the node there.
func created(conn *zk.Conn, path string) bool {
	_, err := conn.Create(path, nil, 0, acl)
	return err == nil || errors.Is(err, zk.ErrNodeExists)
}

// An isolated follower keeps serving its client (reads, heartbeats) but
// commits nothing, while the other two carry on; once it gives up on the
// leader it drops the client; healed, it rejoins and the client is back.
func TestEnsembleIsolateFollower(t *testing.T) {
	t.Parallel()
	// 25 ticks: the isolated follower serves for 5s before it steps down, a
	// wide margin for the checks made meanwhile. (A user's syncLimit wins
	// over the ensemble's default.)
	e := zktest.StartEnsemble(t, zktest.WithConfig("syncLimit", "25"))
	ctx := t.Context()
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	i := (leader + 1) % zktest.EnsembleSize
	other := (leader + 2) % zktest.EnsembleSize
	conf, err := e.Node(i).FourLetter(ctx, "conf")
	require.NoError(t, err)
	require.Contains(t, conf, "syncLimit=25\n")

	cut, _, st := faultyConn(t, []string{e.Node(i).ClientEndpoint()}, 20*time.Second)
	whole := connect(t, []string{e.Node(other).ClientEndpoint()}, 20*time.Second)
	_, err = whole.Create("/before", []byte("x"), 0, acl)
	require.NoError(t, err)
	_, err = cut.Sync("/before")
	require.NoError(t, err)

	require.False(t, e.Isolated(i))
	isolated := time.Now()
	require.NoError(t, e.Isolate(ctx, i))
	require.True(t, e.Isolated(i))
	require.NoError(t, e.Isolate(ctx, i), "isolating twice changes nothing")

	// The isolated server still answers its client: reads are local.
	data, _, err := cut.Get("/before")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
	require.Equal(t, "follower", mode(ctx, e.Node(i)))

	// A write through it cannot commit; one through the others does.
	written := make(chan error, 1)
	go func() {
		_, err := cut.Create("/from-isolated", nil, 0, acl)
		written <- err
	}()
	_, err = whole.Create("/from-quorum", nil, 0, acl)
	require.NoError(t, err)

	// After syncLimit ticks without the leader it stops serving, closes its
	// client's connection, and the pending write fails.
	require.Eventually(t, func() bool { return mode(ctx, e.Node(i)) == "not serving" },
		30*time.Second, 50*time.Millisecond, "the isolated follower did not step down")
	t.Logf("the isolated follower stepped down after %v", time.Since(isolated).Round(time.Millisecond))
	require.Eventually(t, func() bool { return !st.first(zk.StateDisconnected, isolated).IsZero() },
		30*time.Second, 20*time.Millisecond, "the isolated follower kept its client")
	select {
	case err := <-written:
		require.Error(t, err, "a write through an isolated server committed")
	case <-time.After(30 * time.Second):
		t.Fatal("the write through the isolated server did not end when it stepped down")
	}
	_, err = whole.Sync("/")
	require.NoError(t, err)
	require.False(t, exists(t, whole, "/from-isolated"))
	require.Equal(t, "leader", mode(ctx, e.Node(leader)), "two of three keep their leader")

	require.NoError(t, e.Heal(ctx, i))
	require.False(t, e.Isolated(i))
	require.NoError(t, e.Heal(ctx, i), "healing twice changes nothing")
	require.Eventually(t, func() bool { return mode(ctx, e.Node(i)) == "follower" },
		30*time.Second, 50*time.Millisecond, "the healed server did not rejoin")
	require.Eventually(t, func() bool { return created(cut, "/after-heal") },
		30*time.Second, 50*time.Millisecond, "the healed server's client cannot write")
	require.True(t, exists(t, cut, "/from-quorum"), "the healed server caught up")

	require.Error(t, e.Isolate(ctx, zktest.EnsembleSize), "no such server")
	require.Error(t, e.Heal(ctx, -1), "no such server")
}

// An isolated leader steps down and the other two elect a new one, which
// clients of theirs write through; healed, the old leader rejoins as a
// follower and catches up.
func TestEnsembleIsolateLeader(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t)
	ctx := t.Context()
	old, err := e.Leader(ctx)
	require.NoError(t, err)
	f := (old + 1) % zktest.EnsembleSize
	conn := connect(t, []string{e.Node(f).ClientEndpoint()}, 20*time.Second)

	require.NoError(t, e.Isolate(ctx, old))
	require.True(t, e.Isolated(old))
	newLeader := func() int {
		for j := range zktest.EnsembleSize {
			if j != old && mode(ctx, e.Node(j)) == "leader" {
				return j
			}
		}
		return -1
	}
	require.Eventually(t, func() bool { return newLeader() >= 0 },
		30*time.Second, 50*time.Millisecond, "the other two elected no leader")
	require.Eventually(t, func() bool { return mode(ctx, e.Node(old)) == "not serving" },
		30*time.Second, 50*time.Millisecond, "the isolated leader did not step down")
	require.Eventually(t, func() bool { return created(conn, "/new-leader") },
		30*time.Second, 50*time.Millisecond, "no write through the new leader")

	require.NoError(t, e.Heal(ctx, old))
	require.False(t, e.Isolated(old))
	require.Eventually(t, func() bool { return mode(ctx, e.Node(old)) == "follower" },
		30*time.Second, 50*time.Millisecond, "the old leader did not rejoin")
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, newLeader(), leader)
	direct := connect(t, []string{e.Node(old).ClientEndpoint()}, 10*time.Second)
	_, err = direct.Sync("/new-leader")
	require.NoError(t, err)
	require.True(t, exists(t, direct, "/new-leader"), "the old leader caught up")
}

// Restart keeps a server's data, so a rolling restart keeps the ensemble's;
// Rebuild starts it over, empty, behind the same endpoints.
func TestEnsembleRestartAndRebuild(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t)
	ctx := t.Context()
	conn := connect(t, e.Servers(), 20*time.Second)
	_, err := conn.Create("/kept", []byte("x"), 0, acl)
	require.NoError(t, err)
	require.NoError(t, e.Isolate(ctx, 0))

	started := time.Now()
	for i := range e.Nodes() {
		require.NoError(t, e.Restart(ctx, i))
		require.Contains(t, []string{"leader", "follower"}, mode(ctx, e.Node(i)))
	}
	t.Logf("rolling restart in %v", time.Since(started).Round(time.Millisecond))
	require.False(t, e.Isolated(0), "a restart heals")
	require.Error(t, e.Restart(ctx, zktest.EnsembleSize), "no such server")
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	for i, s := range e.Servers() {
		direct := connect(t, []string{s}, 10*time.Second)
		_, err := direct.Sync("/kept")
		require.NoError(t, err)
		data, _, err := direct.Get("/kept")
		require.NoError(t, err, "server %d lost the node", i)
		require.Equal(t, "x", string(data))
	}
	seen := zxid(t, e.Node(leader))

	// The old client would be refused by every rebuilt server, forever.
	conn.Close()
	nodes := e.Nodes()
	servers := e.Servers()
	ids := make([]string, len(nodes))
	for i, c := range nodes {
		ids[i] = c.GetContainerID()
	}
	started = time.Now()
	require.NoError(t, e.Rebuild(ctx))
	t.Logf("rebuilt in %v", time.Since(started).Round(time.Millisecond))
	require.Equal(t, servers, e.Servers(), "same endpoints")
	for i, c := range e.Nodes() {
		require.Same(t, nodes[i], c, "the same *Container")
		require.NotEqual(t, ids[i], c.GetContainerID(), "a new container")
		require.Contains(t, []string{"leader", "follower"}, mode(ctx, c))
	}
	fresh := connect(t, servers, 10*time.Second)
	require.False(t, exists(t, fresh, "/kept"), "a rebuilt ensemble is empty")
	leader, err = e.Leader(ctx)
	require.NoError(t, err)
	require.Less(t, zxid(t, e.Node(leader)), seen,
		"an old client's last zxid is ahead of the rebuilt ensemble")
}

// An ensemble can run at ZooKeeper's own timing (zoo_sample.cfg), the
// user's options winning over the ensemble's defaults, and grant a session
// shorter than two ticks when minSessionTimeout allows it.
func TestEnsembleDefaultTiming(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t,
		zktest.WithTickTime(2*time.Second),
		zktest.WithConfig("initLimit", "10"),
		zktest.WithConfig("syncLimit", "5"),
		zktest.WithConfig("minSessionTimeout", "2000"),
	)
	ctx := t.Context()
	for i, c := range e.Nodes() {
		conf, err := c.FourLetter(ctx, "conf")
		require.NoError(t, err)
		for _, want := range []string{"tickTime=2000", "initLimit=10", "syncLimit=5",
			"minSessionTimeout=2000", "maxSessionTimeout=40000"} {
			require.Contains(t, conf, want+"\n", "server %d", i)
		}
	}

	c := e.Node(0)
	short := connect(t, c.Servers(), 2*time.Second)
	long := connect(t, c.Servers(), 20*time.Second)
	cons, err := c.FourLetter(ctx, "cons")
	require.NoError(t, err)
	for conn, want := range map[*zk.Conn]string{short: "to=2000,", long: "to=20000,"} {
		sid := fmt.Sprintf("sid=0x%x,", conn.SessionID())
		line := regexp.MustCompile(`.*` + regexp.QuoteMeta(sid) + `.*`).FindString(cons)
		require.NotEmpty(t, line, "no %s in cons: %q", sid, cons)
		require.Contains(t, line, want)
	}
}
