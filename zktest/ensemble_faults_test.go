package zktest_test

import (
	"context"
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

// Restart keeps a server's data, so a rolling restart keeps the ensemble's;
// Rebuild starts it over, empty, behind the same endpoints.
func TestEnsembleRestartAndRebuild(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t)
	ctx := t.Context()
	conn := connect(t, e.Servers(), 20*time.Second)
	_, err := conn.Create("/kept", []byte("x"), 0, acl)
	require.NoError(t, err)

	started := time.Now()
	for i := range e.Nodes() {
		require.NoError(t, e.Restart(ctx, i))
		require.Contains(t, []string{"leader", "follower"}, mode(ctx, e.Node(i)))
	}
	t.Logf("rolling restart in %v", time.Since(started).Round(time.Millisecond))
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
