package zktest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// TestRunSaysDockerIsUnreachable: with DOCKER_HOST naming an engine that
// does not answer (a unix socket nobody listens on), Run and RunEnsemble
// fail at once, create nothing, and say so plainly, with the fix and the
// engine client's own error; not testcontainers' "rootless Docker not
// found", and not by falling back to another engine. It needs no Docker.
func TestRunSaysDockerIsUnreachable(t *testing.T) {
	host := "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")
	t.Setenv("DOCKER_HOST", host)
	ctx := context.Background()

	c, err := zktest.Run(ctx, zktest.Image())
	require.Error(t, err)
	require.Nil(t, c, "Run created a container without Docker")
	msg := err.Error()
	require.Contains(t, msg, "zktest: Docker is not reachable at DOCKER_HOST="+host)
	require.Contains(t, msg, "start the Docker engine there, or set DOCKER_HOST to an engine that runs")
	require.Contains(t, msg, "no-docker.sock: connect", "the engine client's error is not wrapped")
	require.NotContains(t, msg, "rootless")

	e, err := zktest.RunEnsemble(ctx, zktest.Image())
	require.Nil(t, e, "RunEnsemble created an ensemble without Docker")
	require.ErrorContains(t, err, "zktest: Docker is not reachable at DOCKER_HOST="+host)
}
