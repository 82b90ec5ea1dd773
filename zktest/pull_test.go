package zktest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock/zktest"
)

// closedRegistry is a registry address where nothing listens: a pull from
// it fails at once, and nothing leaves the machine.
const closedRegistry = "127.0.0.1:1"

func randomTag(t *testing.T) string {
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// An image the engine does not have and cannot pull: Run says which
// variable chooses another, what it does, and how this repository builds
// one offline; testcontainers' own error is still wrapped.
func TestRunSaysWhichImageToUse(t *testing.T) {
	img := closedRegistry + "/zktest-no-such-image:" + randomTag(t)
	t.Setenv("ZKLOCK_ZK_IMAGE", img)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := zktest.Run(ctx, zktest.Image())
	testcontainers.CleanupContainer(t, c)
	require.Error(t, err)
	require.Nil(t, c, "nothing to create without the image")
	msg := err.Error()
	require.Contains(t, msg, "the image "+img+" is not on this Docker engine and could not be pulled")
	require.Contains(t, msg, "set ZKLOCK_ZK_IMAGE to a ZooKeeper image this Docker engine has or can pull")
	require.Contains(t, msg, "scripts/setup.sh builds zklock-zookeeper:3.8")
	require.Contains(t, msg, closedRegistry, "testcontainers' error is wrapped")
	require.NotContains(t, msg, "TESTCONTAINERS_RYUK_DISABLED", "the reaper is not what failed")
}

// A start that fails with its image present is not blamed on the image.
func TestRunBlamesNoImageItHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := zktest.Run(ctx, zktest.Image(), testcontainers.WithEntrypoint("/zktest/no/such/entrypoint"))
	testcontainers.CleanupContainer(t, c)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "ZKLOCK_ZK_IMAGE")
	require.NotContains(t, err.Error(), "TESTCONTAINERS_RYUK_DISABLED")
}

// reaperChild marks the process that TestRunSaysHowToDoWithoutTheReaper
// runs: testcontainers reads its settings once per process, so a test of
// other settings needs a process of its own.
const reaperChild = "ZKTEST_REAPER_CHILD"

// With testcontainers' reaper on and its image impossible to pull (Docker
// Hub images come from a registry where nothing listens), Run and
// RunEnsemble say that TESTCONTAINERS_RYUK_DISABLED=true does without it,
// and what that means.
func TestRunSaysHowToDoWithoutTheReaper(t *testing.T) {
	if os.Getenv(reaperChild) != "" {
		reaperCannotStart(t)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunSaysHowToDoWithoutTheReaper$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TESTCONTAINERS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, reaperChild+"=1",
		"TESTCONTAINERS_RYUK_DISABLED=false",
		"TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX="+closedRegistry)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the test, with the reaper on, in a process of its own:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestRunSaysHowToDoWithoutTheReaper", "the child ran the test:\n%s", out)
}

// reaperCannotStart is the child's test: the reaper is on, and its image
// comes from the closed registry.
func reaperCannotStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The ZooKeeper image must come from elsewhere than Docker Hub, or the
	// prefix would send its pull to the closed registry too: a name of its
	// own with a registry in it, on the same image.
	img := tagged(ctx, t, zktest.Image(), closedRegistry+"/zktest-reaper-probe:"+randomTag(t))
	c, err := zktest.Run(ctx, img)
	testcontainers.CleanupContainer(t, c)
	require.Error(t, err)
	for _, want := range []string{
		"testcontainers' reaper (Ryuk) could not start",
		"set TESTCONTAINERS_RYUK_DISABLED=true to run without the reaper",
		"zktest terminates the containers it starts itself",
		"reaper: new reaper: run container: ", // testcontainers' error is wrapped
		closedRegistry + ": connect: connection refused",
	} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "ZKLOCK_ZK_IMAGE", "the image is there")

	// An ensemble meets the reaper first, on its network.
	e, err := zktest.RunEnsemble(ctx, img)
	if e != nil {
		require.NoError(t, e.Terminate(context.WithoutCancel(ctx)))
	}
	require.ErrorContains(t, err, "zktest: ensemble network: testcontainers' reaper (Ryuk) could not start: "+
		"set TESTCONTAINERS_RYUK_DISABLED=true to run without the reaper")
}

// tagged gives the engine's image img the name name too, until the test
// ends, and returns name.
func tagged(ctx context.Context, t *testing.T, img, name string) string {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	_, err = cli.ImageTag(ctx, client.ImageTagOptions{Source: img, Target: name})
	require.NoError(t, err, "tag %s as %s", img, name)
	t.Cleanup(func() {
		_, err := cli.ImageRemove(context.Background(), name, client.ImageRemoveOptions{})
		require.NoError(t, err, "untag %s", name)
	})
	return name
}
