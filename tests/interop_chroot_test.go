package zklock_test

// One chroot shared across languages: a Go service and a Curator (or kazoo)
// service configured with the same connect string, chroot and all, lock
// the same path and exclude each other; each sees the other's node
// relative to the chroot.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

func TestInteropChroot(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			root := strings.TrimSuffix(lockPath(t), "/lock") + "/apps/billing" // missing: zklock makes it
			connectString := strings.Join(zktest.Servers(t), ",") + root
			const path = "/locks/report"
			full := root + path

			gc, err := zklock.Connect(ctxT(t), []string{connectString})
			require.NoError(t, err)
			t.Cleanup(func() { _ = gc.Close() })
			outer := connect(t) // no chroot: sees the full paths
			tidy(t, outer, full)
			m, err := zklock.NewMutex(gc, path)
			require.NoError(t, err)

			// Go holds; the peer, under the same chroot, queues behind.
			ours, err := m.Acquire(ctxT(t))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(ours.Node(), path+"/"), "our node %s, relative to the chroot", ours.Node())
			p := runPeer(t, lang.name, lang.argv, []string{"hold", "--servers", connectString,
				"--path", path, "--recipe", "mutex", "--id", lang.name, "--once-then-wait"})
			theirs := newChild(t, outer, full, base(ours.Node()))
			require.Regexp(t, lang.nodes["mutex"], theirs)
			parts, err := m.Participants(ctxT(t))
			require.NoError(t, err)
			require.Len(t, parts, 2)
			require.Equal(t, ours.Node(), parts[0].Node)
			require.True(t, parts[0].Holder)
			require.Equal(t, path+"/"+theirs, parts[1].Node, "the peer's node, relative to the chroot")
			require.False(t, parts[1].Holder, "the peer waits behind us")
			p.silent(t)
			released := releaseAt(t, ours)
			acq := p.next(t, "ACQ")
			require.Greater(t, acq.at, released, "the peer acquired before we released")

			// The peer holds; Go is refused, then queues behind it.
			_, err = m.TryAcquire(ctxT(t))
			require.ErrorIs(t, err, zklock.ErrLocked)
			ch := acquireAt(ctxT(t), m.Acquire)
			queued(t, outer, full, 2)
			pendingAt(t, ch)
			p.letGo(t)
			rel := p.next(t, "REL")
			got := awaitAt(t, ch)
			require.Greater(t, got.at, rel.at, "we acquired before the peer released")
			p.finish(t, 1)
			release(t, got.lease)
		})
	}
}
