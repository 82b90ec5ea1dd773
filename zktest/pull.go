package zktest

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"
)

// The fixes a failed start names. Behind a private registry, or offline,
// the first start fails on a pull, of the ZooKeeper image or of
// testcontainers' reaper, and testcontainers' error does not say what to
// do about it.
const (
	imageFix = "set ZKLOCK_ZK_IMAGE to a ZooKeeper image this Docker engine has or can pull " +
		"(zktest.Image reads it; Start, Servers and StartEnsemble run it): one you built " +
		"(github.com/zkrecipes/zklock's scripts/setup.sh builds zklock-zookeeper:3.8 from Debian's " +
		"packages, offline) or one from a registry you can reach"
	reaperFix = "set TESTCONTAINERS_RYUK_DISABLED=true to run without the reaper " +
		"(zktest terminates the containers it starts itself; see \"Cleaning up\" in its doc), " +
		"or make its image pullable (TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX names a mirror of Docker Hub)"
)

// inspectTimeout bounds the look at the engine's images after a failure.
const inspectTimeout = 10 * time.Second

// explain returns err with the fix for what made a start fail, when it is
// a missing image or testcontainers' reaper: err itself when it is neither,
// or when ctx ended (then ctx is why). img is the ZooKeeper image the start
// ran, "" if none.
func explain(ctx context.Context, img string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var fixes []string
	if reaperFailed(err) {
		fixes = append(fixes, "testcontainers' reaper (Ryuk) could not start: "+reaperFix)
	} else if img != "" && missing(ctx, img) {
		fixes = append(fixes, fmt.Sprintf("the image %s is not on this Docker engine and could not be pulled: %s", img, imageFix))
	}
	if len(fixes) == 0 {
		return err
	}
	return fmt.Errorf("%s: %w", strings.Join(fixes, "; "), err)
}

// reaperFailed reports whether err is testcontainers' failure to start its
// reaper: the reaper is on, and testcontainers says its error is the
// reaper's ("reaper: ..." and "reaper connect: ...", in docker.go's
// connectReaper and CreateNetwork; TestRunSaysHowToDoWithoutTheReaper
// holds this to the testcontainers-go this module requires).
func reaperFailed(err error) bool {
	return !testcontainers.ReadConfig().Config.RyukDisabled && strings.Contains(err.Error(), "reaper")
}

// missing reports whether the Docker engine lacks img, under its own name
// and under the one testcontainers pulls when a Docker Hub prefix is set
// (TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX). A start that failed with its
// image missing failed to pull it: testcontainers pulls before it
// creates anything. When the engine cannot be asked, it says false: no
// fix is better than a wrong one.
func missing(ctx context.Context, img string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectTimeout)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return false
	}
	defer cli.Close()
	names := []string{img}
	if prefix := testcontainers.ReadConfig().Config.HubImageNamePrefix; prefix != "" {
		names = append(names, path.Join(prefix, img))
	}
	for _, name := range names {
		_, err := cli.ImageInspect(ctx, name)
		if !cerrdefs.IsNotFound(err) {
			return false // present, or the engine cannot say
		}
	}
	return true
}
