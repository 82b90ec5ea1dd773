package zklock_test

// One Curator process, many threads: Curator's usual setup is one
// CuratorFramework per process (one ZooKeeper session), shared by every
// thread, each with its own InterProcessSemaphoreV2, InterProcessMutex or
// LeaderLatch. The Java peer's shared mode (tools/peers/README.md) runs
// that, and prints `ACQ <thread> <recipe> <unix_nanos> <znode>` right after
// a thread's acquire returns (for a latch, once it leads) and `REL ...`
// right before it lets go. Every other interop test runs one session per
// acquirer; these put several acquirers in one session, next to zklock
// participants, for both Curator versions.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// startShared runs the Java peer java's `shared --recipe recipe --threads
// threads args...` on path: thread k's id is id-k.
func startShared(t *testing.T, java peerLang, id, path, recipe string, threads int, args ...string) *peer {
	t.Helper()
	return runPeer(t, id, java.argv, append([]string{"shared",
		"--servers", strings.Join(zktest.Servers(t), ","), "--path", path, "--recipe", recipe,
		"--threads", strconv.Itoa(threads), "--id", id}, args...))
}

// collectShared reads a shared peer's lines until DONE and returns its
// threads' holds; first is called at each ACQ.
func (p *peer) collectShared(first func()) ([]hold, error) {
	var (
		holds []hold
		open  = map[string]event{}
	)
	for {
		ev, err := p.recv(long)
		if err != nil {
			return holds, err
		}
		switch ev.kind {
		case "ACQ":
			if _, twice := open[ev.id]; twice {
				return holds, fmt.Errorf("peer %s: thread %s acquired twice", p.id, ev.id)
			}
			first()
			open[ev.id] = ev
		case "REL":
			acq, ok := open[ev.id]
			if !ok {
				return holds, fmt.Errorf("peer %s: thread %s released what it did not hold", p.id, ev.id)
			}
			holds = append(holds, hold{who: ev.id, lang: "java", recipe: acq.recipe, from: acq.at, to: ev.at})
			delete(open, ev.id)
		case "DONE":
			if len(open) > 0 || int(ev.at) != len(holds) {
				return holds, fmt.Errorf("peer %s: DONE %d after %d holds, %d still open", p.id, ev.at, len(holds), len(open))
			}
			return holds, nil
		}
	}
}

// campaigner takes part in contend as a Locker whose lease is leadership.
type campaigner struct{ e *zklock.Election }

func (c campaigner) Acquire(ctx context.Context) (*zklock.Lease, error) { return c.e.Campaign(ctx) }
func (c campaigner) TryAcquire(context.Context) (*zklock.Lease, error) {
	return nil, fmt.Errorf("campaigner: no TryAcquire")
}

// TestInteropSharedFramework: a Curator process whose 3 threads share one
// CuratorFramework contends with zklock participants (two Clients, the
// second shared by two goroutines) on one path: a semaphore of 2 leases
// (InterProcessSemaphoreV2, zklock's LayoutCurator), a mutex, a
// LeaderLatch (zklock's Election). Every hold is logged inside the real
// one; never more than 2 semaphore holders at once, and no two mutex
// holders or leaders at once.
func TestInteropSharedFramework(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			for _, recipe := range []string{"semaphore", "mutex", "latch"} {
				t.Run(recipe, func(t *testing.T) {
					t.Parallel()
					sharedContend(t, java, recipe)
				})
			}
		})
	}
}

func sharedContend(t *testing.T, java peerLang, recipe string) {
	const threads, rounds, minGo = 3, 15, 10
	ctx := ctxT(t)
	path := lockPath(t)
	c := connect(t)
	tidySemaphore(t, c, path)
	limit, peerHold, goHeld := 1, peerHoldMs, goHold
	args := []string{"--acquire-timeout-ms", peerTimeoutMs}
	if recipe == "semaphore" {
		limit, peerHold, goHeld = 2, semHoldMs, semHold
		args = append(args, "--leases", strconv.Itoa(limit))
	}
	args = append(args, "--count", strconv.Itoa(rounds), "--hold-ms", peerHold)

	clients := []*zklock.Client{connect(t), connect(t)}
	var gos []goRun
	for i, gc := range []*zklock.Client{clients[0], clients[1], clients[1]} {
		id := fmt.Sprintf("go-%d", i+1)
		var l zklock.Locker
		switch recipe {
		case "semaphore":
			s, err := zklock.NewSemaphore(gc, path, limit, zklock.WithSemaphoreLayout(zklock.LayoutCurator))
			require.NoError(t, err)
			l = s
		case "mutex":
			m, err := zklock.NewMutex(gc, path)
			require.NoError(t, err)
			l = m
		case "latch":
			e, err := zklock.NewElection(gc, path, zklock.WithNodeData([]byte(id)))
			require.NoError(t, err)
			l = campaigner{e}
		}
		gos = append(gos, goRun{id: id, pick: func(int) (zklock.Locker, string) { return l, recipe }})
	}

	var (
		log       holdLog
		started   = make(chan struct{})
		startOnce sync.Once
		peersDone = make(chan struct{})
		errs      = make(chan error, 1+len(gos))
		pwg, gwg  sync.WaitGroup
	)
	p := startShared(t, java, "java", path, recipe, threads, args...)
	pwg.Go(func() {
		holds, err := p.collectShared(func() { startOnce.Do(func() { close(started) }) })
		for _, h := range holds {
			log.add(h)
		}
		if err != nil {
			errs <- err
		}
	})
	runGos(ctx, &gwg, gos, minGo, goHeld, started, peersDone, &log, errs)
	pwg.Wait()
	close(peersDone)
	gwg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	holds := log.holds
	n := counts(holds)
	most := mostAtOnce(holds)
	t.Logf("%s %s: %d holds (%v), most at once %d, limit %d; %d handoffs between languages",
		java.lib, recipe, len(holds), n, most, limit, handoffs(holds))
	requireAtMost(t, holds, limit, recipe)
	if limit == 1 {
		requireNoOverlap(t, holds)
	}
	require.Equal(t, threads*rounds, n["java "+recipe])
	require.GreaterOrEqual(t, n["go "+recipe], len(gos)*minGo)
	require.GreaterOrEqual(t, handoffs(holds), 2, "the languages did not contend")
	if recipe == "semaphore" {
		queued(t, c, path+"/leases", 0)
		queued(t, c, path+"/locks", 0)
	} else {
		queued(t, c, path, 0) // Curator deletes a closed latch's node in the background
	}
}

// TestInteropSharedFrameworkHolders: a Curator process of 3 threads holds
// and waits on one path, and zklock reads exactly the holders that Curator
// says hold, at every point where both sides are still: Curator's lines
// name the holders, and the nodes show every other thread queued (a
// semaphore's waiter holding its inner mutex with its lease node, the rest
// on the mutex; a mutex's or a latch's waiters behind the holder). Then one
// holder lets go and acquires again at the back, rounds times. With one
// shared CuratorFramework, and, for the semaphore, with one session per
// thread too. For the semaphore, `zklock ls -json` must say the same, and
// the holders that `zklock observe -json` printed last must come to be
// those (observe prints each change as it sees it, so only where it ends
// up at a still point is asserted).
func TestInteropSharedFrameworkHolders(t *testing.T) {
	t.Parallel()
	z := newZklock(t) // built once: the subtests end before this test's TempDir goes
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				recipe   string
				separate bool
			}{
				{"semaphore", false},
				{"semaphore", true},
				{"mutex", false},
				{"latch", false},
			} {
				name := tc.recipe + "/shared-session"
				if tc.separate {
					name = tc.recipe + "/separate-sessions"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					sharedHolders(t, z, java, tc.recipe, tc.separate)
				})
			}
		})
	}
}

// sharedHolders runs the test for one recipe; z checks the semaphore's
// holders with zklock ls.
func sharedHolders(t *testing.T, z zklockCmd, java peerLang, recipe string, separate bool) {
	const threads, leases, rounds = 3, 2, 6
	path := lockPath(t)
	c := connect(t)
	tidySemaphore(t, c, path)
	want := 1 // holders at a still point
	args := []string{"--controlled"}
	if recipe == "semaphore" {
		want = leases
		args = append(args, "--leases", strconv.Itoa(leases))
	}
	if separate {
		args = append(args, "--separate-sessions")
	}
	p := startShared(t, java, "java", path, recipe, threads, args...)
	var obs *observer
	if recipe == "semaphore" {
		obs = startObserve(t, z, path)
	}

	holders := map[string]string{} // thread -> its node, as Curator's lines say
	var order []string             // holders, in the order they acquired
	acquired := 0
	take := func(ev event) {
		require.NotContains(t, holders, ev.id, "thread %s acquired twice", ev.id)
		require.True(t, strings.HasPrefix(ev.node, path+"/"), "thread %s's node %s", ev.id, ev.node)
		holders[ev.id] = ev.node
		order = append(order, ev.id)
		acquired++
	}
	for len(holders) < want {
		take(p.next(t, "ACQ"))
	}
	for round := 0; ; round++ {
		still(t, c, path, recipe, threads, want)
		p.silent(t)
		checkHolders(t, c, path, holders, threads)
		if recipe == "semaphore" {
			checkLs(t, z, path, holders, threads)
			obs.await(t, holders)
		}
		if round == rounds {
			break
		}
		// The first holder lets go; the next in line acquires; the first
		// queues again at the back.
		k := order[0]
		order = order[1:]
		_, err := fmt.Fprintf(p.stdin, "release %s\n", strings.TrimPrefix(k, "java-"))
		require.NoError(t, err)
		rel := p.next(t, "REL")
		require.Equal(t, k, rel.id)
		delete(holders, k)
		take(p.next(t, "ACQ"))
	}

	// The end: holders let go; the waiters acquire and let go at once.
	_, err := p.stdin.WriteString("end\n")
	require.NoError(t, err)
	for {
		ev, err := p.recv(long)
		require.NoError(t, err)
		if ev.kind == "DONE" {
			require.Equal(t, acquired, int(ev.at), "ACQ lines read")
			break
		}
		if ev.kind == "ACQ" {
			acquired++
		}
	}
	select {
	case <-p.exited:
		require.NoError(t, p.err, "peer %s exit; stderr:\n%s", p.id, p.stderr.String())
	case <-time.After(long):
		t.Fatalf("peer %s did not exit", p.id)
	}
}

// still waits until the nodes on path show every thread that does not
// hold queued: a Curator semaphore's leases/ has a node per holder and one
// for the waiter that holds the inner mutex (it created its lease node
// under the mutex and waits for the count), and locks/ one node per
// thread that neither holds nor has a lease node; a mutex or a latch has
// one node per thread.
func still(t *testing.T, c *zklock.Client, path, recipe string, threads, holders int) {
	t.Helper()
	if recipe != "semaphore" {
		queued(t, c, path, threads)
		return
	}
	require.Eventually(t, func() bool {
		return len(children(t, c, path+"/leases")) == holders+1 && len(children(t, c, path+"/locks")) == threads-holders
	}, long, 5*time.Millisecond, "want %d lease nodes and %d inner mutex nodes on %s", holders+1, threads-holders, path)
}

// checkHolders requires that zklock.Participants lists one participant per
// thread, and as holders exactly the nodes of holders.
func checkHolders(t *testing.T, c *zklock.Client, path string, holders map[string]string, threads int) {
	t.Helper()
	parts, err := zklock.Participants(ctxT(t), c, path)
	require.NoError(t, err)
	var got []string
	for _, p := range parts {
		if p.Holder {
			got = append(got, p.Node)
		}
	}
	want := slices.Sorted(maps.Values(holders))
	slices.Sort(got)
	require.Equal(t, want, got, "holders: Curator says %v; Participants:\n%s", holders, describe(parts))
	require.Len(t, parts, threads, "one participant per thread:\n%s", describe(parts))
}

// checkLs requires that `zklock ls -json path` says what checkHolders
// requires of Participants.
func checkLs(t *testing.T, z zklockCmd, path string, holders map[string]string, threads int) {
	t.Helper()
	code, stdout, stderr := z.run(nil, "ls", "-json", path)
	require.Equal(t, 0, code, "zklock ls -json %s; stderr:\n%s", path, stderr)
	var entries []lsEntry
	require.NoError(t, json.Unmarshal([]byte(stdout), &entries), stdout)
	var got []string
	for _, e := range entries {
		if e.Holder {
			got = append(got, e.Node)
		}
	}
	slices.Sort(got)
	require.Equal(t, slices.Sorted(maps.Values(holders)), got, "zklock ls holders; Curator says %v; ls:\n%s", holders, stdout)
	require.Len(t, entries, threads, stdout)
}

// observer is a `zklock observe -json` process and the holders of the
// last line it printed.
type observer struct {
	mu     sync.Mutex
	last   []string // the nodes of the last line's holders, sorted
	lines  int
	stderr lockedBuffer
}

// startObserve runs `zklock observe -json path` until the test ends (then
// SIGINT, as a user stops it).
func startObserve(t *testing.T, z zklockCmd, path string) *observer {
	t.Helper()
	o := &observer{}
	cmd := exec.Command(z.bin, "observe", "-json", path)
	cmd.Env = append(os.Environ(), "ZKLOCK_SERVERS="+z.servers)
	cmd.Stderr = &o.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct{ Holders []lsEntry }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue // await reports a line count that does not move
			}
			var nodes []string
			for _, h := range line.Holders {
				nodes = append(nodes, h.Node)
			}
			slices.Sort(nodes)
			o.mu.Lock()
			o.last, o.lines = nodes, o.lines+1
			o.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // by its own handle
		select {
		case <-done:
		case <-time.After(long):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("zklock observe did not end on SIGINT; stderr:\n%s", o.stderr.String())
		}
	})
	return o
}

// await waits until the last line observe printed names exactly the
// nodes of holders.
func (o *observer) await(t *testing.T, holders map[string]string) {
	t.Helper()
	want := slices.Sorted(maps.Values(holders))
	matches := func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return slices.Equal(o.last, want)
	}
	deadline := time.Now().Add(long)
	tick := time.NewTicker(5 * time.Millisecond) // polling, as require.Eventually does
	defer tick.Stop()
	for !matches() && time.Now().Before(deadline) {
		<-tick.C
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	require.True(t, slices.Equal(o.last, want), "zklock observe's last holders %v after %d lines; Curator says %v; stderr:\n%s",
		o.last, o.lines, holders, o.stderr.String())
}

func describe(parts []zklock.Participant) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "  %s holder=%v data=%q\n", p.Node, p.Holder, p.Data)
	}
	return b.String()
}
