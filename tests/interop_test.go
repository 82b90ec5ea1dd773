package zklock_test

// Cross-language tests: zklock against Apache Curator 5.4 and 5.7.1 (Java)
// and kazoo 2.8 and 2.9.0 (Python) on the same lock paths, with the holder
// programs of tools/peers (see tools/peers/README.md) and a real ZooKeeper.
// Every peer is a process of its own with its own session (but for the
// shared peer of interop_shared_framework_test.go); it prints `ACQ <id>
// <recipe> <unix_nanos>` right after its acquire returns and `REL ...`
// right before it releases, on the same wall clock that the Go side reads
// with time.Now().UnixNano().
//
// Curator and kazoo never share a path here: Curator ignores kazoo's nodes
// (docs/interop.md), so they do not exclude each other. Go+Curator and
// Go+kazoo are what zklock promises.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A lock library on the other side of the wire, at one version, and the
// names of the nodes it writes, by recipe.
type peerLang struct {
	name string // "java" or "python", also the prefix of peer ids
	// lib names the library and its version ("curator-5.4", "kazoo-2.9.0"):
	// the subtests' name. version is what the peer's `version` line must
	// start with.
	lib, version string
	argv         []string // the peer program, relative to this directory
	nodes        map[string]*regexp.Regexp
	// args are extra arguments for the peers of the mixed contention tests.
	args []string
}

const uuidRE = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

var (
	// Curator's (and zklock's) protected nodes.
	curatorNodes = map[string]*regexp.Regexp{
		"mutex": regexp.MustCompile(`^_c_` + uuidRE + `-lock-\d{10}$`),
		"read":  regexp.MustCompile(`^_c_` + uuidRE + `-__READ__\d{10}$`),
		"write": regexp.MustCompile(`^_c_` + uuidRE + `-__WRIT__\d{10}$`),
	}
	// kazoo's: uuid4().hex, then the lock name. WriteLock writes __lock__.
	kazooNodes = map[string]*regexp.Regexp{
		"mutex": regexp.MustCompile(`^[0-9a-f]{32}__lock__\d{10}$`),
		"read":  regexp.MustCompile(`^[0-9a-f]{32}__rlock__\d{10}$`),
		"write": regexp.MustCompile(`^[0-9a-f]{32}__lock__\d{10}$`),
	}

	// Two sets of peers, one per Debian release, both built by
	// tools/peers/build-peers.sh: bookworm's Curator 5.4 and kazoo 2.8 (this
	// machine's packages), and trixie's Curator 5.7.1 (with its ZooKeeper
	// 3.9.3 client) and kazoo 2.9.0 (unpacked by scripts/peers-trixie.sh).
	// Every interop test runs once per peer of the kind it needs, as
	// subtests named by lib; a missing peer fails the test (buildPeers),
	// never skips it.
	javaPeer = peerLang{
		name:    "java",
		lib:     "curator-5.4",
		version: "curator 5.4.",
		argv:    []string{"../tools/peers/java/build/zkpeer"},
		nodes:   curatorNodes,
	}
	// kazoo 2.8's ReadLock may wait for a writer queued after it, which
	// then waits for the reader: a deadlock with any writer, of any library
	// (kazoo #649, fixed in 2.9). Where several participants of an RW lock
	// queue at once, the 2.8 peer applies the fixed rule (--kazoo-rw-fix).
	// The stock recipes are what the one-peer tests use, and what 2.9 runs
	// everywhere.
	pythonPeer = peerLang{
		name:    "python",
		lib:     "kazoo-2.8",
		version: "kazoo 2.8.",
		argv:    []string{"/usr/bin/python3", "../tools/peers/python/zkpeer.py"},
		nodes:   kazooNodes,
		args:    []string{"--kazoo-rw-fix"},
	}
	javaPeer57 = peerLang{
		name:    "java",
		lib:     "curator-5.7.1",
		version: "curator 5.7.1 zookeeper 3.9.3",
		argv:    []string{"../tools/peers/build/curator-5.7.1/zkpeer"},
		nodes:   curatorNodes,
	}
	pythonPeer29 = peerLang{
		name:    "python",
		lib:     "kazoo-2.9.0",
		version: "kazoo 2.9.0",
		argv:    []string{"../tools/peers/build/kazoo-2.9.0/zkpeer"},
		nodes:   kazooNodes,
	}
	javaPeers   = []peerLang{javaPeer, javaPeer57}
	pythonPeers = []peerLang{pythonPeer, pythonPeer29}
	peerLangs   = []peerLang{javaPeer, pythonPeer, javaPeer57, pythonPeer29}
)

var peerBuild struct {
	once sync.Once
	out  []byte
	err  error
}

// buildPeers compiles the Curator peers and checks that each kazoo peer
// imports its kazoo, once per test binary. It fails the test (never skips
// it) when Java, a Curator or a kazoo is missing, here and in CI alike.
func buildPeers(t *testing.T) {
	t.Helper()
	peerBuild.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		peerBuild.out, peerBuild.err = exec.CommandContext(ctx, "bash", "../tools/peers/build-peers.sh").CombinedOutput()
	})
	if peerBuild.err != nil {
		t.Fatalf("interop: tools/peers/build-peers.sh failed (%v): the interop tests need a JDK, "+
			"Curator (Debian libcurator-recipes-java, libslf4j-java) and kazoo for /usr/bin/python3 "+
			"(python3-kazoo), which scripts/setup.sh installs, and trixie's Curator 5.7.1 and kazoo 2.9.0, "+
			"which scripts/peers-trixie.sh fetches into /opt/zklock-peers/trixie.\n%s", peerBuild.err, peerBuild.out)
	}
}

// peer is one running holder program.
type peer struct {
	id     string
	cmd    *exec.Cmd
	stdin  *os.File
	lines  chan string // its stdout, closed at EOF
	quit   chan struct{}
	exited chan struct{} // closed once the process is reaped; err is then set
	err    error
	stderr lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startPeer runs `<peer> hold --path path --recipe recipe --id id args...`
// against the test's ZooKeeper. The process is killed when the test ends,
// unless it has exited by then.
func startPeer(t *testing.T, l peerLang, id, path, recipe string, args ...string) *peer {
	t.Helper()
	return runPeer(t, id, l.argv, append([]string{"hold",
		"--servers", strings.Join(zktest.Servers(t), ","),
		"--path", path, "--recipe", recipe, "--id", id}, args...))
}

// runPeer starts the peer program peerArgv with args: its stdout lines on
// p.lines, its stdin for letGo. The process is killed when the test ends,
// unless it has exited by then.
func runPeer(t *testing.T, id string, peerArgv, args []string) *peer {
	t.Helper()
	buildPeers(t)
	argv := append(slices.Clone(peerArgv), args...)
	p := &peer{
		id:     id,
		cmd:    exec.Command(argv[0], argv[1:]...),
		lines:  make(chan string, 1024),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	stdin, w, err := os.Pipe()
	require.NoError(t, err)
	p.cmd.Stdin, p.stdin = stdin, w
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start(), "start peer %s", id)
	_ = stdin.Close() // the child has its own copy
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.quit:
			}
		}
		close(p.lines)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		close(p.quit)
		_ = p.cmd.Process.Kill() // by its own handle; a no-op once it has exited
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(long):
			t.Errorf("peer %s: not reaped after kill", id)
		}
	})
	return p
}

// event is one line of a peer: ACQ, REL, DONE or ERR.
type event struct {
	kind, id, recipe string
	at               int64  // ACQ, REL: unix nanos; DONE: the count
	node             string // ACQ of a shared peer: the acquisition's znode
}

func parseEvent(line string) (event, error) {
	f := strings.Fields(line)
	if len(f) >= 2 && f[0] == "ERR" {
		return event{kind: "ERR", id: f[1]}, fmt.Errorf("peer error: %s", line)
	}
	var (
		ev  = event{}
		err error
	)
	switch {
	case len(f) == 4 && (f[0] == "ACQ" || f[0] == "REL"), len(f) == 5 && f[0] == "ACQ":
		ev = event{kind: f[0], id: f[1], recipe: f[2]}
		ev.at, err = strconv.ParseInt(f[3], 10, 64)
		if len(f) == 5 {
			ev.node = f[4]
		}
	case len(f) == 3 && f[0] == "DONE":
		ev = event{kind: f[0], id: f[1]}
		ev.at, err = strconv.ParseInt(f[2], 10, 64)
	default:
		err = errors.New("malformed")
	}
	if err != nil {
		return event{}, fmt.Errorf("peer line %q: %w", line, err)
	}
	return ev, nil
}

// recv returns the peer's next line, or an error if it printed ERR, exited
// or said nothing for too long.
func (p *peer) recv(wait time.Duration) (event, error) { return recvParsed(p, wait, parseEvent) }

// recvParsed returns the peer's next line as parse reads it, or an error if
// the line is malformed or ERR, the peer exited or said nothing for wait.
func recvParsed[E any](p *peer, wait time.Duration, parse func(string) (E, error)) (E, error) {
	var zero E
	select {
	case line, ok := <-p.lines:
		if !ok {
			return zero, fmt.Errorf("peer %s exited early; stderr:\n%s", p.id, p.stderr.String())
		}
		ev, err := parse(line)
		if err != nil {
			return ev, fmt.Errorf("%w; stderr:\n%s", err, p.stderr.String())
		}
		return ev, nil
	case <-time.After(wait):
		return zero, fmt.Errorf("peer %s said nothing for %v; stderr:\n%s", p.id, wait, p.stderr.String())
	}
}

// next waits for the peer's next line and requires it to be of kind.
func (p *peer) next(t *testing.T, kind string) event {
	t.Helper()
	ev, err := p.recv(long)
	require.NoError(t, err)
	require.Equal(t, kind, ev.kind, "peer %s: unexpected line", p.id)
	return ev
}

// silent requires that the peer has printed nothing more yet.
func (p *peer) silent(t *testing.T) {
	t.Helper()
	select {
	case line := <-p.lines:
		t.Fatalf("peer %s: unexpected %q", p.id, line)
	default:
	}
}

// letGo tells a --once-then-wait peer to release.
func (p *peer) letGo(t *testing.T) {
	t.Helper()
	_, err := p.stdin.WriteString("release\n")
	require.NoError(t, err)
}

// finish waits for DONE and a clean exit.
func (p *peer) finish(t *testing.T, count int) {
	t.Helper()
	done := p.next(t, "DONE")
	require.EqualValues(t, count, done.at)
	select {
	case <-p.exited:
		require.NoError(t, p.err, "peer %s exit; stderr:\n%s", p.id, p.stderr.String())
	case <-time.After(long):
		t.Fatalf("peer %s did not exit", p.id)
	}
}

// tidy removes, at the end of the test, the lock path and its parent if they
// are empty: kazoo creates them as persistent nodes when it comes first.
func tidy(t *testing.T, c *zklock.Client, path string) {
	t.Cleanup(func() {
		_ = c.Conn().Delete(path, -1)
		_ = c.Conn().Delete(filepath.Dir(path), -1)
	})
}

// newChild waits until the lock path has exactly one child that is not in
// known, and returns its name.
func newChild(t *testing.T, c *zklock.Client, path string, known ...string) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		var fresh []string
		for _, k := range children(t, c, path) {
			if !slices.Contains(known, k) {
				fresh = append(fresh, k)
			}
		}
		if len(fresh) == 1 {
			name = fresh[0]
		}
		return len(fresh) == 1
	}, long, 5*time.Millisecond, "want one new child on %s besides %v", path, known)
	return name
}

// base returns a znode's name.
func base(node string) string { return node[strings.LastIndexByte(node, '/')+1:] }

type timedResult struct {
	lease *zklock.Lease
	at    int64 // unix nanos right after the acquire returned
	err   error
}

// acquireAt runs an acquire in the background and notes when it returned.
func acquireAt(ctx context.Context, acquire func(context.Context) (*zklock.Lease, error)) <-chan timedResult {
	ch := make(chan timedResult, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- timedResult{l, time.Now().UnixNano(), err}
	}()
	return ch
}

func awaitAt(t *testing.T, ch <-chan timedResult) timedResult {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r
	case <-time.After(long):
		t.Fatal("acquire did not return")
		return timedResult{}
	}
}

func pendingAt(t *testing.T, ch <-chan timedResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("acquire returned early: %v %v", r.lease, r.err)
	default:
	}
}

// releaseAt releases l and returns the wall clock right before the release.
func releaseAt(t *testing.T, l *zklock.Lease) int64 {
	t.Helper()
	at := time.Now().UnixNano()
	release(t, l)
	return at
}

// TestInteropPeerVersions: each peer runs the library and version its
// subtests are named for (Curator's from its jar, with the ZooKeeper client
// it loads; kazoo's from the module it imports), so that a classpath or
// module path that picks the other release's jar cannot pass unseen.
func TestInteropPeerVersions(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			p := runPeer(t, lang.name, lang.argv, []string{"version", "--id", lang.name})
			line, ok := <-p.lines
			require.True(t, ok, "peer %s printed nothing; stderr:\n%s", lang.lib, p.stderr.String())
			got, found := strings.CutPrefix(line, "VERSION "+lang.name+" ")
			require.True(t, found, "peer %s: %q", lang.lib, line)
			require.True(t, strings.HasPrefix(got, lang.version), "peer %s runs %q, want %q...", lang.lib, got, lang.version)
			t.Logf("%s: %s", lang.lib, got)
		})
	}
}

// --- one peer against Go ----------------------------------------------------

func TestInteropMutex(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			t.Run("GoHoldsPeerWaits", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				m, err := zklock.NewMutex(c, path)
				require.NoError(t, err)
				held, err := m.Acquire(ctxT(t))
				require.NoError(t, err)
				require.Regexp(t, curatorNodes["mutex"], base(held.Node()))

				p := startPeer(t, lang, lang.name, path, "mutex", "--count", "1", "--hold-ms", "0")
				theirs := newChild(t, c, path, base(held.Node()))
				require.Regexp(t, lang.nodes["mutex"], theirs)
				parts, err := m.Participants(ctxT(t))
				require.NoError(t, err)
				require.Len(t, parts, 2)
				require.Equal(t, held.Node(), parts[0].Node)
				require.True(t, parts[0].Holder)
				require.Equal(t, path+"/"+theirs, parts[1].Node)
				require.False(t, parts[1].Holder, "the peer queues behind us")
				p.silent(t)

				released := releaseAt(t, held)
				acq := p.next(t, "ACQ")
				require.Greater(t, acq.at, released, "the peer acquired before we released")
				p.next(t, "REL")
				p.finish(t, 1)
			})
			t.Run("PeerHoldsGoWaits", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				p := startPeer(t, lang, lang.name, path, "mutex", "--once-then-wait")
				p.next(t, "ACQ")
				theirs := newChild(t, c, path)
				require.Regexp(t, lang.nodes["mutex"], theirs)

				m, err := zklock.NewMutex(c, path)
				require.NoError(t, err)
				_, err = m.TryAcquire(ctxT(t))
				require.ErrorIs(t, err, zklock.ErrLocked)
				require.Equal(t, []string{theirs}, children(t, c, path), "a failed TryAcquire leaves no node")
				parts, err := m.Participants(ctxT(t))
				require.NoError(t, err)
				require.Len(t, parts, 1)
				require.True(t, parts[0].Holder, "the peer holds")

				ch := acquireAt(ctxT(t), m.Acquire)
				queued(t, c, path, 2)
				pendingAt(t, ch)
				p.letGo(t)
				rel := p.next(t, "REL")
				got := awaitAt(t, ch)
				require.Greater(t, got.at, rel.at, "we acquired before the peer released")
				p.finish(t, 1)
				release(t, got.lease)
			})
		})
	}
}

func TestInteropRWMutex(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			// A peer reader holds: a Go reader shares, a Go writer waits.
			t.Run("PeerReadsGoReadsAndWrites", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				p := startPeer(t, lang, lang.name, path, "read", "--once-then-wait")
				p.next(t, "ACQ")
				theirs := newChild(t, c, path)
				require.Regexp(t, lang.nodes["read"], theirs)

				rw, err := zklock.NewRWMutex(c, path)
				require.NoError(t, err)
				r, err := rw.ReadLock().TryAcquire(ctxT(t))
				require.NoError(t, err, "readers of both languages share")
				require.Regexp(t, curatorNodes["read"], base(r.Node()))
				_, err = rw.WriteLock().TryAcquire(ctxT(t))
				require.ErrorIs(t, err, zklock.ErrLocked)
				release(t, r)

				w := acquireAt(ctxT(t), rw.WriteLock().Acquire)
				queued(t, c, path, 2)
				pendingAt(t, w)
				p.letGo(t)
				rel := p.next(t, "REL")
				got := awaitAt(t, w)
				require.Greater(t, got.at, rel.at, "our writer acquired before the peer's reader released")
				require.Regexp(t, curatorNodes["write"], base(got.lease.Node()))
				p.finish(t, 1)
				release(t, got.lease)
			})
			// A Go reader holds: a peer reader shares, a peer writer waits.
			t.Run("GoReadsPeerReadsAndWrites", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				rw, err := zklock.NewRWMutex(c, path)
				require.NoError(t, err)
				r, err := rw.ReadLock().Acquire(ctxT(t))
				require.NoError(t, err)

				reader := startPeer(t, lang, lang.name+"-r", path, "read", "--count", "1", "--hold-ms", "0")
				reader.next(t, "ACQ") // while we hold: r is not released before the end
				reader.next(t, "REL")
				reader.finish(t, 1)
				require.Nil(t, r.Err(), "our reader still holds")

				writer := startPeer(t, lang, lang.name+"-w", path, "write", "--count", "1", "--hold-ms", "0")
				theirs := newChild(t, c, path, base(r.Node()))
				require.Regexp(t, lang.nodes["write"], theirs)
				writer.silent(t)
				released := releaseAt(t, r)
				acq := writer.next(t, "ACQ")
				require.Greater(t, acq.at, released, "the peer's writer acquired before our reader released")
				writer.next(t, "REL")
				writer.finish(t, 1)
			})
			// A peer writer holds: Go readers and writers wait.
			t.Run("PeerWritesGoWaits", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				p := startPeer(t, lang, lang.name, path, "write", "--once-then-wait")
				p.next(t, "ACQ")
				theirs := newChild(t, c, path)
				require.Regexp(t, lang.nodes["write"], theirs)

				rw, err := zklock.NewRWMutex(c, path)
				require.NoError(t, err)
				_, err = rw.ReadLock().TryAcquire(ctxT(t))
				require.ErrorIs(t, err, zklock.ErrLocked, "a writer of either language excludes readers")
				_, err = rw.WriteLock().TryAcquire(ctxT(t))
				require.ErrorIs(t, err, zklock.ErrLocked)
				require.Equal(t, []string{theirs}, children(t, c, path), "failed TryAcquires leave no node")

				r := acquireAt(ctxT(t), rw.ReadLock().Acquire)
				queued(t, c, path, 2)
				pendingAt(t, r)
				p.letGo(t)
				rel := p.next(t, "REL")
				got := awaitAt(t, r)
				require.Greater(t, got.at, rel.at, "our reader acquired before the peer's writer released")
				p.finish(t, 1)
				release(t, got.lease)
			})
			// A Go writer holds: a peer reader waits.
			t.Run("GoWritesPeerWaits", func(t *testing.T) {
				t.Parallel()
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				rw, err := zklock.NewRWMutex(c, path)
				require.NoError(t, err)
				w, err := rw.WriteLock().Acquire(ctxT(t))
				require.NoError(t, err)

				p := startPeer(t, lang, lang.name, path, "read", "--count", "1", "--hold-ms", "0")
				theirs := newChild(t, c, path, base(w.Node()))
				require.Regexp(t, lang.nodes["read"], theirs)
				parts, err := rw.Participants(ctxT(t))
				require.NoError(t, err)
				require.Len(t, parts, 2)
				require.True(t, parts[0].Holder)
				require.False(t, parts[0].Read)
				require.False(t, parts[1].Holder, "the peer's reader waits for our writer")
				require.True(t, parts[1].Read)
				p.silent(t)
				released := releaseAt(t, w)
				acq := p.next(t, "ACQ")
				require.Greater(t, acq.at, released, "the peer's reader acquired before our writer released")
				p.next(t, "REL")
				p.finish(t, 1)
			})
		})
	}
}

// --- mixed contention --------------------------------------------------------

// hold is one participant's time holding the lock, on the wall clock.
type hold struct {
	who      string // participant id: go-1, java-r2, ...
	lang     string // go, java, python
	recipe   string // mutex, read, write
	from, to int64
}

func (h hold) exclusive() bool { return h.recipe != "read" }

type holdLog struct {
	mu    sync.Mutex
	holds []hold
}

func (l *holdLog) add(h hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds = append(l.holds, h)
}

// overlaps lists the pairs of holds that broke exclusion: two holds overlap
// when each began before the other ended, and that is allowed only between
// two readers. A logged hold lies inside the real one (ACQ after the
// acquire, REL before the release), so correct holders never overlap here.
func overlaps(holds []hold) []string {
	hs := slices.Clone(holds)
	sort.Slice(hs, func(i, j int) bool { return hs[i].from < hs[j].from })
	var bad []string
	for i := range hs {
		for j := i + 1; j < len(hs) && hs[j].from < hs[i].to; j++ {
			if hs[i].exclusive() || hs[j].exclusive() {
				bad = append(bad, fmt.Sprintf("%s %s [%d, %d] overlaps %s %s [%d, %d] by %v",
					hs[i].who, hs[i].recipe, hs[i].from, hs[i].to, hs[j].who, hs[j].recipe, hs[j].from, hs[j].to,
					time.Duration(min(hs[i].to, hs[j].to)-hs[j].from)))
			}
		}
	}
	return bad
}

func requireNoOverlap(t *testing.T, holds []hold) {
	t.Helper()
	bad := overlaps(holds)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
	}
	require.Empty(t, bad, "exclusion broken across languages")
}

// counts tallies holds by language and recipe: "go read" -> n.
func counts(holds []hold) map[string]int {
	n := map[string]int{}
	for _, h := range holds {
		n[h.lang+" "+h.recipe]++
	}
	return n
}

// handoffs counts the times the lock passed between languages, in time
// order: proof that the participants really contended.
func handoffs(holds []hold) int {
	hs := slices.Clone(holds)
	sort.Slice(hs, func(i, j int) bool { return hs[i].from < hs[j].from })
	n := 0
	for i := 1; i < len(hs); i++ {
		if hs[i].lang != hs[i-1].lang {
			n++
		}
	}
	return n
}

// crossReads reports whether a Go reader and a peer reader ever held at once.
func crossReads(holds []hold) bool {
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if a.recipe == "read" && b.recipe == "read" && (a.lang == "go") != (b.lang == "go") &&
				a.from < b.to && b.from < a.to {
				return true
			}
		}
	}
	return false
}

// collect reads a hold peer's lines until DONE and returns its holds.
func (p *peer) collect(lang string, first func()) ([]hold, error) {
	var (
		holds []hold
		open  *event
	)
	for {
		ev, err := p.recv(long)
		if err != nil {
			return holds, err
		}
		switch {
		case ev.kind == "ACQ" && open == nil:
			first()
			open = &ev
		case ev.kind == "REL" && open != nil:
			holds = append(holds, hold{who: p.id, lang: lang, recipe: open.recipe, from: open.at, to: ev.at})
			open = nil
		case ev.kind == "DONE" && open == nil:
			if int(ev.at) != len(holds) {
				return holds, fmt.Errorf("peer %s: DONE %d after %d holds", p.id, ev.at, len(holds))
			}
			return holds, nil
		default:
			return holds, fmt.Errorf("peer %s: %s out of turn", p.id, ev.kind)
		}
	}
}

type peerRun struct {
	id, recipe string
	count      int
}

// goRun is a Go participant: its own Client, and the lock it takes on its
// n-th acquisition.
type goRun struct {
	id   string
	pick func(n int) (zklock.Locker, string)
}

const (
	goHold        = time.Millisecond
	peerHoldMs    = "1"
	peerTimeoutMs = "20000" // a stuck peer fails with ERR instead of hanging
)

// contend runs peers and Go participants on one lock path and returns every
// hold. The Go participants start with the first peer acquisition and keep
// going, at least minGo times each, until every peer is done, so every peer
// acquisition contends with Go.
func contend(t *testing.T, lang peerLang, path string, peers []peerRun, gos []goRun, minGo int) []hold {
	t.Helper()
	return contendHolding(t, lang, path, peers, gos, minGo, peerHoldMs, goHold)
}

// contendHolding is contend with the peers holding peerHold (milliseconds,
// as the peers' --hold-ms takes it) and the Go participants goHeld.
func contendHolding(t *testing.T, lang peerLang, path string, peers []peerRun, gos []goRun, minGo int,
	peerHold string, goHeld time.Duration) []hold {
	t.Helper()
	ctx := ctxT(t)
	var (
		log       holdLog
		started   = make(chan struct{})
		startOnce sync.Once
		peersDone = make(chan struct{})
		errs      = make(chan error, len(peers)+len(gos))
		pwg, gwg  sync.WaitGroup
	)
	for _, pr := range peers {
		args := append([]string{"--count", strconv.Itoa(pr.count), "--hold-ms", peerHold,
			"--acquire-timeout-ms", peerTimeoutMs}, lang.args...)
		p := startPeer(t, lang, pr.id, path, pr.recipe, args...)
		pwg.Go(func() {
			holds, err := p.collect(lang.name, func() { startOnce.Do(func() { close(started) }) })
			for _, h := range holds {
				log.add(h)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	runGos(ctx, &gwg, gos, minGo, goHeld, started, peersDone, &log, errs)
	pwg.Wait()
	close(peersDone)
	gwg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return log.holds
}

// runGos runs each Go participant of gos on wg, from started (or
// peersDone) on, at least minGo times and until peersDone is closed, each
// hold goHeld, logged in log from the acquire's return to the release;
// the first error of each goes to errs.
func runGos(ctx context.Context, wg *sync.WaitGroup, gos []goRun, minGo int, goHeld time.Duration,
	started, peersDone <-chan struct{}, log *holdLog, errs chan<- error) {
	for _, g := range gos {
		wg.Go(func() {
			select {
			case <-started:
			case <-peersDone:
			case <-ctx.Done():
			}
			for n := 0; n < minGo || !closed(peersDone); n++ {
				l, recipe := g.pick(n)
				lease, err := l.Acquire(ctx)
				if err != nil {
					errs <- fmt.Errorf("%s: acquire %s: %w", g.id, recipe, err)
					return
				}
				h := hold{who: g.id, lang: "go", recipe: recipe, from: time.Now().UnixNano()}
				time.Sleep(goHeld) // the critical section's work, not synchronisation
				h.to = time.Now().UnixNano()
				err = lease.Release(ctx)
				log.add(h)
				if err != nil {
					errs <- fmt.Errorf("%s: release: %w", g.id, err)
					return
				}
			}
		})
	}
}

func TestInteropMixedMutex(t *testing.T) {
	t.Parallel()
	const goClients, minGo, peerClients, peerCount = 3, 40, 2, 50
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			tidy(t, connect(t), path)
			var gos []goRun
			for i := 1; i <= goClients; i++ {
				m, err := zklock.NewMutex(connect(t), path)
				require.NoError(t, err)
				gos = append(gos, goRun{id: fmt.Sprintf("go-%d", i), pick: func(int) (zklock.Locker, string) { return m, "mutex" }})
			}
			var peers []peerRun
			for i := 1; i <= peerClients; i++ {
				peers = append(peers, peerRun{id: fmt.Sprintf("%s-%d", lang.name, i), recipe: "mutex", count: peerCount})
			}
			holds := contend(t, lang, path, peers, gos, minGo)
			n := counts(holds)
			t.Logf("%d acquisitions: %v; %d handoffs between languages", len(holds), n, handoffs(holds))
			requireNoOverlap(t, holds)
			require.Equal(t, peerClients*peerCount, n[lang.name+" mutex"])
			require.GreaterOrEqual(t, n["go mutex"], goClients*minGo)
			require.GreaterOrEqual(t, len(holds), 200)
			require.GreaterOrEqual(t, handoffs(holds), 10, "the languages did not contend")
		})
	}
}

func TestInteropMixedRWMutex(t *testing.T) {
	t.Parallel()
	const goClients, minGo, peerCount = 4, 30, 30
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			tidy(t, connect(t), path)
			var gos []goRun
			for i := 1; i <= goClients; i++ {
				rw, err := zklock.NewRWMutex(connect(t), path)
				require.NoError(t, err)
				gos = append(gos, goRun{id: fmt.Sprintf("go-%d", i), pick: func(n int) (zklock.Locker, string) {
					if (n+i)%3 == 0 { // a third of the time a writer
						return rw.WriteLock(), "write"
					}
					return rw.ReadLock(), "read"
				}})
			}
			peers := []peerRun{
				{id: lang.name + "-r1", recipe: "read", count: peerCount},
				{id: lang.name + "-r2", recipe: "read", count: peerCount},
				{id: lang.name + "-w1", recipe: "write", count: peerCount},
				{id: lang.name + "-w2", recipe: "write", count: peerCount},
			}
			holds := contend(t, lang, path, peers, gos, minGo)
			n := counts(holds)
			t.Logf("%d acquisitions: %v; %d handoffs between languages; Go and %s readers shared: %v",
				len(holds), n, handoffs(holds), lang.name, crossReads(holds))
			requireNoOverlap(t, holds)
			require.Equal(t, 2*peerCount, n[lang.name+" read"])
			require.Equal(t, 2*peerCount, n[lang.name+" write"])
			require.GreaterOrEqual(t, n["go read"]+n["go write"], goClients*minGo)
			require.NotZero(t, n["go write"])
			require.GreaterOrEqual(t, len(holds), 200)
			require.GreaterOrEqual(t, handoffs(holds), 10, "the languages did not contend")
		})
	}
}

// --- FIFO across languages ---------------------------------------------------

// TestInteropFIFO queues Go and peer participants alternately behind a Go
// holder, each visible in the children before the next one starts, and
// checks that they acquire in queue order.
func TestInteropFIFO(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			c := connect(t)
			tidy(t, c, path)
			m, err := zklock.NewMutex(c, path)
			require.NoError(t, err)
			first, err := m.Acquire(ctxT(t))
			require.NoError(t, err)

			var (
				log   holdLog
				queue []string
				known = []string{base(first.Node())}
				peers []*peer
				gwg   sync.WaitGroup
				errs  = make(chan error, 8)
			)
			for i := 1; i <= 6; i++ {
				var want *regexp.Regexp
				if i%2 == 1 {
					id := fmt.Sprintf("%s-%d", lang.name, (i+1)/2)
					peers = append(peers, startPeer(t, lang, id, path, "mutex", "--count", "1", "--hold-ms", "0"))
					queue, want = append(queue, id), lang.nodes["mutex"]
				} else {
					id := fmt.Sprintf("go-%d", i/2)
					gm, err := zklock.NewMutex(connect(t), path)
					require.NoError(t, err)
					ch := acquireAt(ctxT(t), gm.Acquire)
					gwg.Go(func() {
						r := <-ch
						if r.err != nil {
							errs <- fmt.Errorf("%s: %w", id, r.err)
							return
						}
						h := hold{who: id, lang: "go", recipe: "mutex", from: r.at, to: time.Now().UnixNano()}
						if err := r.lease.Release(context.Background()); err != nil {
							errs <- fmt.Errorf("%s: release: %w", id, err)
						}
						log.add(h)
					})
					queue, want = append(queue, id), curatorNodes["mutex"]
				}
				node := newChild(t, c, path, known...) // queued before the next one starts
				require.Regexp(t, want, node, "node of %s", queue[len(queue)-1])
				known = append(known, node)
			}
			parts, err := m.Participants(ctxT(t))
			require.NoError(t, err)
			var inOrder []string
			for _, p := range parts {
				inOrder = append(inOrder, base(p.Node))
			}
			require.Equal(t, known, inOrder, "Participants lists the queue in order")
			for _, p := range peers {
				p.silent(t)
			}

			release(t, first)
			for _, p := range peers {
				holds, err := p.collect(lang.name, func() {})
				require.NoError(t, err)
				for _, h := range holds {
					log.add(h)
				}
			}
			gwg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			requireNoOverlap(t, log.holds)
			sort.Slice(log.holds, func(i, j int) bool { return log.holds[i].from < log.holds[j].from })
			var got []string
			for _, h := range log.holds {
				got = append(got, h.who)
			}
			require.Equal(t, queue, got, "acquisition order")
		})
	}
}
