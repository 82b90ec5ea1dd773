package zklock_test

// Semaphores shared across languages: zklock's Semaphore in Curator's
// layout with Curator's InterProcessSemaphoreV2 (a constant size, and a
// SharedCount), and in kazoo's layout with kazoo's Semaphore, on one path,
// each test once per peer version (5.4 and 5.7.1, 2.8 and 2.9.0), with the peers of tools/peers (hold --recipe semaphore). Every
// holder, Go or peer, logs its hold inside the real one (ACQ after the
// acquire returned, REL before the release), so the most holds that
// overlap at any instant can only be fewer than the real holders then, and
// must never exceed the limit.

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// mostAtOnce returns the largest number of holds that overlap at one
// instant. A hold is [from, to); at one instant, an end comes before a
// start.
func mostAtOnce(holds []hold) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, h := range holds {
		edges = append(edges, edge{h.from, 1}, edge{h.to, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// requireAtMost fails the test if more than limit holds overlap at one
// instant, naming the holds live at the first such instant (who, from
// when to when, in Unix nanoseconds), so that a failure says which
// participants and which handoff to look at.
func requireAtMost(t *testing.T, holds []hold, limit int, what string) {
	t.Helper()
	byStart := slices.Clone(holds)
	slices.SortFunc(byStart, func(a, b hold) int { return cmp.Compare(a.from, b.from) })
	for i, h := range byStart {
		var live []hold
		for _, o := range byStart[:i+1] {
			if o.from <= h.from && h.from < o.to {
				live = append(live, o)
			}
		}
		if len(live) > limit {
			var b strings.Builder
			for _, o := range live {
				fmt.Fprintf(&b, "\n\t%s (%s %s) from %d to %d", o.who, o.lang, o.recipe, o.from, o.to)
			}
			t.Fatalf("more holders at once than the %s allows (%d): %d live at %d:%s", what, limit, len(live), h.from, b.String())
		}
	}
}

// tidySemaphore removes, at the end of the test, the persistent nodes that
// kazoo's layout leaves (the path and <path>-__lock__), once empty, and the
// test's own parent.
func tidySemaphore(t *testing.T, c *zklock.Client, path string, extra ...string) {
	t.Cleanup(func() {
		for _, p := range append(extra, path+"-__lock__", path, filepath.Dir(path)) {
			_ = c.Conn().Delete(p, -1)
		}
	})
}

// semHold is how long every holder, Go or peer, holds a lease: long next
// to an acquire's handoff through the inner lock, so that leases are held
// together and an extra holder would overlap two others.
const (
	semHold   = 60 * time.Millisecond
	semHoldMs = "60"
)

// contendSemaphore runs peers and Go semaphores on one path, as contend
// does, every participant holding semHold, each Go hold logged from the
// acquire's return to the release, and returns every hold.
func contendSemaphore(t *testing.T, lang peerLang, path string, peers []peerRun, sems []*zklock.Semaphore, minGo int) []hold {
	t.Helper()
	gos := make([]goRun, len(sems))
	for i, s := range sems {
		gos[i] = goRun{id: fmt.Sprintf("go-%d", i+1), pick: func(int) (zklock.Locker, string) { return s, "semaphore" }}
	}
	return contendHolding(t, lang, path, peers, gos, minGo, semHoldMs, semHold)
}

// semaphorePeer is a peer language with the arguments of its semaphore.
func semaphorePeer(l peerLang, args ...string) peerLang {
	l.args = args
	return l
}

// TestInteropSemaphoreMixed runs Go and peer processes on one semaphore
// path, many cycles each, and checks that never more than the limit held
// at once: Curator with a constant size, Curator with a SharedCount, and
// kazoo.
func TestInteropSemaphoreMixed(t *testing.T) {
	t.Parallel()
	const limit, goClients, minGo, peerClients, peerCount = 2, 3, 20, 2, 30
	type semCase struct {
		name   string
		lang   peerLang
		shared bool
		layout zklock.SemaphoreLayout
	}
	var cases []semCase
	for _, java := range javaPeers {
		cases = append(cases, semCase{java.lib, java, false, zklock.LayoutCurator},
			semCase{java.lib + "-sharedcount", java, true, zklock.LayoutCurator})
	}
	for _, python := range pythonPeers {
		cases = append(cases, semCase{python.lib, python, false, zklock.LayoutKazoo})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			countPath := path + "-count"
			c := connect(t)
			tidySemaphore(t, c, path, countPath)
			opts := []zklock.LockOption{zklock.WithSemaphoreLayout(tc.layout)}
			args := []string{"--leases", fmt.Sprint(limit)}
			if tc.shared {
				opts = append(opts, zklock.WithSharedCount(countPath))
				args = append(args, "--shared-count", countPath)
			}
			var sems []*zklock.Semaphore
			for i := 1; i <= goClients; i++ {
				s, err := zklock.NewSemaphore(connect(t), path, limit, opts...)
				require.NoError(t, err)
				sems = append(sems, s)
			}
			var peers []peerRun
			for i := 1; i <= peerClients; i++ {
				peers = append(peers, peerRun{id: fmt.Sprintf("%s-%d", tc.lang.name, i), recipe: "semaphore", count: peerCount})
			}
			holds := contendSemaphore(t, semaphorePeer(tc.lang, args...), path, peers, sems, minGo)
			n := counts(holds)
			most := mostAtOnce(holds)
			t.Logf("%s: %d cycles (%v), most holders seen at once %d, limit %d; %d handoffs between languages",
				tc.name, len(holds), n, most, limit, handoffs(holds))
			requireAtMost(t, holds, limit, "semaphore")
			require.Equal(t, peerClients*peerCount, n[tc.lang.name+" semaphore"])
			require.GreaterOrEqual(t, n["go semaphore"], goClients*minGo)
			if tc.layout == zklock.LayoutKazoo {
				require.Empty(t, children(t, c, path), "leases left behind")
			} else {
				require.Empty(t, children(t, c, path+"/leases"), "leases left behind")
				require.Empty(t, children(t, c, path+"/locks"), "inner lock nodes left behind")
			}
		})
	}
}

// A Curator process holds the only lease of a SharedCount semaphore; a Go
// acquire waits; Curator's SharedCount.setCount raises the count to 2, and
// the Go acquire gets through while the Curator lease is still held. The
// other way, a Curator acquire waiting behind a Go holder gets through
// when the count is raised again.
func TestInteropSemaphoreSharedCountRaised(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			sharedCountRaised(t, java)
		})
	}
}

func sharedCountRaised(t *testing.T, java peerLang) {
	path := lockPath(t)
	countPath := path + "-count"
	c := connect(t)
	tidySemaphore(t, c, path, countPath)
	args := []string{"--leases", "1", "--shared-count", countPath}
	p := startPeer(t, java, "java-1", path, "semaphore", append([]string{"--once-then-wait"}, args...)...)
	p.next(t, "ACQ")
	count, _, err := c.Conn().Get(countPath)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 0, 1}, count, "Curator's SharedCount: 4-byte big-endian")

	s, err := zklock.NewSemaphore(connect(t), path, 1,
		zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount(countPath))
	require.NoError(t, err)
	_, err = s.TryAcquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrLocked)
	waiting := acquireAt(ctxT(t), s.Acquire)
	queued(t, c, path+"/leases", 2)
	pendingAt(t, waiting)

	setCount(t, java, countPath, 2)
	got := awaitAt(t, waiting)
	p.silent(t) // the Curator lease is still held: two at once, as the count allows
	parts, err := s.Participants(ctxT(t))
	require.NoError(t, err)
	require.Len(t, parts, 2)

	// Full again at 2; a second Curator process waits until the count is 3.
	p2 := startPeer(t, java, "java-2", path, "semaphore", append([]string{"--count", "1", "--hold-ms", "0"}, args...)...)
	queued(t, c, path+"/leases", 3)
	p2.silent(t)
	setCount(t, java, countPath, 3)
	acq := p2.next(t, "ACQ")
	require.Nil(t, got.lease.Err(), "our lease still holds")
	require.Greater(t, acq.at, got.at)
	p2.next(t, "REL")
	p2.finish(t, 1)

	p.letGo(t)
	p.next(t, "REL")
	p.finish(t, 1)
	release(t, got.lease)
	queued(t, c, path+"/leases", 0)
}

// setCount runs Curator's SharedCount.setCount(n) on countPath in a process
// of its own, with the Curator of java.
func setCount(t *testing.T, java peerLang, countPath string, n int) {
	t.Helper()
	p := runPeer(t, "java-set", java.argv, []string{"setcount",
		"--servers", strings.Join(zktest.Servers(t), ","), "--path", countPath,
		"--count", fmt.Sprint(n), "--id", "java-set"})
	p.finish(t, 1)
}

// Each zklock layout refuses a path where a real Curator or kazoo
// semaphore holds a lease, with ErrUnknownNode, and leaves the path's
// nodes as they were; the peer's lease is untouched.
func TestInteropSemaphoreRefusals(t *testing.T) {
	t.Parallel()
	type refusal struct {
		lang   peerLang
		theirs zklock.SemaphoreLayout
	}
	var cases []refusal
	for _, lang := range peerLangs {
		layout := zklock.LayoutCurator
		if lang.name == "python" {
			layout = zklock.LayoutKazoo
		}
		cases = append(cases, refusal{lang, layout})
	}
	for _, tc := range cases {
		t.Run(tc.lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			c := connect(t)
			tidySemaphore(t, c, path)
			p := startPeer(t, tc.lang, tc.lang.name, path, "semaphore", "--once-then-wait", "--leases", "2")
			p.next(t, "ACQ")
			before := subtree(t, c, path)
			for _, ours := range []zklock.SemaphoreLayout{zklock.LayoutZklock, zklock.LayoutCurator, zklock.LayoutKazoo} {
				if ours == tc.theirs {
					continue
				}
				s, err := zklock.NewSemaphore(connect(t), path, 2, zklock.WithSemaphoreLayout(ours))
				require.NoError(t, err)
				_, err = s.Acquire(ctxT(t))
				require.ErrorIs(t, err, zklock.ErrUnknownNode, "%v on a path of %s", ours, tc.lang.lib)
				require.Eventually(t, func() bool { return slices.Equal(subtree(t, c, path), before) }, long, 5*time.Millisecond,
					"%v on a path of %s: want the nodes as they were, %v", ours, tc.lang.lib, before)
			}
			p.letGo(t)
			p.next(t, "REL")
			p.finish(t, 1)
		})
	}
}

// subtree lists the paths under path and under <path>-__lock__, sorted.
func subtree(t *testing.T, c *zklock.Client, path string) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		kids, _, err := c.Conn().Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		require.NoError(t, err)
		out = append(out, p)
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	walk(path)
	walk(path + "-__lock__")
	slices.Sort(out)
	return out
}
