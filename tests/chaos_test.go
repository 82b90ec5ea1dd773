package zklock_test

// TestChaos: clients contend on one Mutex, one RWMutex (some of whose write
// leases are downgraded to read leases), four Semaphores (one of each
// layout: zklock's, Curator's with a constant size and with a SharedCount,
// kazoo's; AcquireN among their acquires) and three MultiLocks over
// overlapping paths (with plain Mutexes on those paths), and some of them
// campaign in one Election, while a fault schedule breaks their
// connections, their sessions and their servers, and a checker proves from
// the recorded holds and leaderships that there were never two holders of
// an exclusive lock (on any path of a MultiLock), a reader with a writer
// (no writer slipped into a downgrade), more than K leases of a semaphore
// of K, or two leaders, that fencing tokens only grew, that every lock and
// the election kept working after every fault, and that nothing was left
// behind. An observer (Election.Observe) runs throughout on a client that
// is faulted too; its reports must come in the order of the leaders' nodes,
// and never name a candidate while one ahead of it in the queue has yet to
// finish leading.
//
// A hold runs from Acquire returning to the earlier of Release being called
// and the end of the lease: for a lease that was lost, the deadline it
// reports ([zklock.Lease.ValidUntil], read once the lease has ended), which is
// the latest moment its holder was entitled to rely on it, however late the
// loss was noticed. Everything runs in one process, so the monotonic clock
// orders all holds.
//
// Half the clients keep the default policy (a lease rides out a disconnect
// and ends only at its deadline), half use zklock.WithLossOnDisconnect (a
// lease ends at the first disconnect); the figures count each policy's
// acquisitions and losses. A leadership is a hold like any other (Campaign
// returning to Release being called, or to the lost lease's ValidUntil), on
// a lock of its own, "election".
//
// A downgrade's read lease is held, without a gap, from the moment the
// write lease was last seen live before Downgrade was called, if the read
// lease is live when Downgrade returns: Downgrade's contract is that no
// writer gets in between (the read node is created at the writer's place,
// in the writer's session, before the write node is deleted; a session
// that is live at the return was live throughout, so both nodes were there
// when they should be). A writer overlapping that span is a writer that
// slipped in.
//
// Some clients (chaosShared) take the RWMutex's read side through an
// RWMutex made zklock.WithSharedReads, from several goroutines at once, so
// that their leases share one read node: each shared lease is a reader's
// hold like any other (from its Acquire's return to its Release, or to the
// ValidUntil it reports once it has ended), and the checker holds it
// against every writer. Their writes and downgrades go through that
// RWMutex too. A writer must also make progress after every fault: shared
// readers must not starve it.
//
// The clients reach the servers through names that move
// (zktest.Movable): each server behind a forwarder at a loopback address,
// its name resolved by the clients' lookup (zklock.WithHostResolver) at
// every connection attempt. The fault "move" moves every server in turn to
// a new address, as a StatefulSet's rolling update replaces its pods: its
// name stops resolving and its connections are reset, it is away for up to
// half a second, then it answers at a new address and its name follows.
// After a move, every client must hold a lock again: a client that kept
// the addresses it first resolved would have none left that answers. The
// observer and the test's own connection (a plain go-zookeeper client,
// which resolves once) use the servers' fixed endpoints.
//
// Knobs: ZKLOCK_CHAOS_DURATION (faults per phase, default 40s),
// ZKLOCK_CHAOS_SEED (replay a schedule), ZKLOCK_CHAOS_LOG (the clients' debug
// logs on stderr), ZKLOCK_CHAOS_DEBUG (describe a lock nobody could take
// for five seconds). Run it with -v to see its figures.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

const (
	chaosClients = 8               // each with its own session and its own Faults
	chaosSession = 2 * time.Second // short, so that partitions expire sessions
	// chaosFaulted bounds the clients under a client fault at once, so the
	// others keep the locks busy.
	chaosFaulted = 3
	// chaosRecovery bounds how long after a fault heals the locks may take
	// to be acquired again (by the victim, for a client fault).
	chaosRecovery = 20 * time.Second
	// chaosDrain bounds the wait for cleanups and watches after the run.
	chaosDrain = 20 * time.Second
	// chaosCandidates are the clients (the first ones, of both policies)
	// that also campaign in the election.
	chaosCandidates = 4
	// chaosObserver is the client whose Election.Observe runs through the
	// chaos. It is not a candidate, and it works on the locks like every
	// client, so that the client faults and their recovery checks apply.
	chaosObserver = chaosClients - 1
	// chaosSemSize is every semaphore's size, K: small, so that its four
	// clients' workers, some asking for K leases at once, queue for it.
	chaosSemSize = 2
	// chaosEnsemblePause is how long the ensemble's fault "pause" freezes a
	// server on ZooKeeper before 3.9.3 (chaosPausePastSyncLimit): longer
	// than its clients' read timeout (two thirds of chaosSession), shorter
	// than chaosSyncLimit, past which the leader drops a silent follower.
	// ZooKeeper 3.8, which the offline image zklock-zookeeper:3.8 runs,
	// loses acknowledged transactions on a follower so dropped that wakes
	// up with requests in flight (a NullPointerException in
	// SendAckRequestProcessor.flush kills its SyncThread, ZOOKEEPER-4409,
	// and its shutdown leaves the sync processor half running,
	// ZOOKEEPER-4712; both fixed in 3.9.3): nodes that their owners
	// deleted come back, in live sessions, and block their locks. That is
	// the server's bug, not a schedule a client library can survive.
	chaosEnsemblePause = 1500 * time.Millisecond
	// chaosSyncLimit is zktest's ensemble's syncLimit (10 ticks of 200ms):
	// how long the leader waits on a silent follower before dropping it.
	chaosSyncLimit = 2 * time.Second
	// chaosSharedReaders is how many goroutines of a shared client
	// (chaosShared) read through its shared RWMutex at once: its RWMutex
	// worker and chaosSharedReaders-1 that only read.
	chaosSharedReaders = 3
	// chaosDepth is how many workers of each client take the RWMutex and
	// each of its semaphores: 8 clients make queues of up to 24 on each.
	chaosDepth = 3
	// chaosMutexDepth is how many workers of each client take the mutex:
	// 8 clients make a queue of up to 40, deeper than the handoff's
	// deepQueue (32 nodes). Every chaos lease asks for its token, and on
	// ZooKeeper 3.8, whose notifications carry no zxid, a lock whose
	// tokens are asked for hands off only in a queue that deep (handoff.go,
	// participant.handsOff): so the mutex runs that handoff, with its
	// token read at the grant, under the faults, and the RWMutex's shorter
	// queue runs the read of the queue at each wake.
	chaosMutexDepth = 5
)

// chaosShared reports whether client i takes the RWMutex through one made
// WithSharedReads: clients 2, 3, 6 and 7, of both policies, candidates and
// the observer among them.
func chaosShared(i int) bool { return i%4 >= 2 }

// chaosDuration is how long faults are injected in each phase: 40s, or
// ZKLOCK_CHAOS_DURATION (a Go duration) for a longer soak.
func chaosDuration(t *testing.T) time.Duration {
	if s := os.Getenv("ZKLOCK_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "ZKLOCK_CHAOS_DURATION")
		return d
	}
	return 40 * time.Second
}

// TestChaos runs two phases: eight clients on a standalone server, with
// partitions, forced session expiries, connection drops, server pauses and
// moves of the server to a new address; then eight clients on a 3-node
// ensemble, with the same client faults, paused servers, killed leaders, a
// follower or the leader cut off from the other two while its clients still
// reach it, rolling restarts, and the ensemble moving to new addresses one
// server at a time. It logs
// one line of figures per phase and one for the whole run, each followed by
// a line per recipe (acquisitions, overlaps or over-K, orphans).
//
// It breaks its servers, so it starts its own containers, and it is skipped
// when ZKLOCK_TEST_SERVERS says that tests must not start any, and in -short.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: skipped in -short mode")
	}
	if zktest.External() {
		t.Skip("chaos: breaks its servers, and ZKLOCK_TEST_SERVERS is set: no containers")
	}
	began := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ZKLOCK_CHAOS_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "ZKLOCK_CHAOS_SEED")
	}
	t.Logf("chaos: seed %d (ZKLOCK_CHAOS_SEED to replay the schedule)", seed)

	// Both phases' servers start together: one JVM start instead of two.
	ctx := t.Context()
	var (
		single    *zktest.Container
		ensemble  *zktest.Ensemble
		singleErr error
		ensErr    error
		wg        sync.WaitGroup
	)
	wg.Go(func() { single, singleErr = zktest.Run(ctx, zktest.Image()) })
	wg.Go(func() { ensemble, ensErr = zktest.RunEnsemble(ctx, zktest.Image()) })
	wg.Wait()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, errors.Join(single.Terminate(ctx), ensemble.Terminate(ctx)))
	})
	require.NoError(t, singleErr, "standalone server")
	require.NoError(t, ensErr, "ensemble")
	t.Logf("chaos: servers up after %v", time.Since(began).Round(time.Millisecond))

	// Everything started from here on must be gone at the end.
	leaks := goleak.IgnoreCurrent()
	total := newChaosFigures()

	t.Run("standalone", func(t *testing.T) {
		node := chaosNode{name: "server", fourLetter: single.FourLetter}
		runChaos(t, chaosPlan{
			name:    "standalone",
			seed:    seed,
			servers: single.Servers(),
			movable: zktest.MovableServers(t, single.Servers()),
			nodes:   []chaosNode{node},
			serverFaults: []chaosServerFault{{
				kind: "pause",
				inject: func(ctx context.Context, _ *rand.Rand) (func(context.Context) error, error) {
					return single.Unpause, single.Pause(ctx)
				},
			}},
		}, total)
	})
	t.Run("ensemble", func(t *testing.T) {
		version, pastSyncLimit := chaosPausePastSyncLimit(ctx, t, ensemble.Node(0))
		pause := "less than syncLimit (ZOOKEEPER-4409/4712, fixed in 3.9.3)"
		if pastSyncLimit {
			pause = "past syncLimit"
		}
		t.Logf("chaos: ZooKeeper %s: the ensemble's pause lasts %s", version, pause)
		var nodes []chaosNode
		for i, c := range ensemble.Nodes() {
			nodes = append(nodes, chaosNode{name: fmt.Sprintf("server %d", i+1), fourLetter: c.FourLetter})
		}
		runChaos(t, chaosPlan{
			name:    "ensemble",
			seed:    seed + 1,
			servers: ensemble.Servers(),
			movable: zktest.MovableServers(t, ensemble.Servers()),
			nodes:   nodes,
			serverFaults: []chaosServerFault{
				{
					kind: "leader-kill",
					inject: func(ctx context.Context, _ *rand.Rand) (func(context.Context) error, error) {
						i, err := ensemble.KillLeader(ctx)
						if err != nil {
							return nil, err
						}
						return ensemble.Node(i).Start, nil
					},
				},
				{
					// One server frozen: its clients' reads time out and
					// they move to another server. On 3.9.3 and later, for
					// syncLimit plus the fault's drawn duration, so that
					// the leader drops it every time and it wakes up to
					// resync with requests in flight; before, for less
					// than syncLimit (see chaosEnsemblePause).
					kind: "pause",
					inject: func(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
						c := ensemble.Node(rng.IntN(zktest.EnsembleSize))
						if err := c.Pause(ctx); err != nil {
							return nil, err
						}
						if pastSyncLimit {
							chaosSleep(ctx, chaosSyncLimit)
							return c.Unpause, nil
						}
						chaosSleep(ctx, chaosEnsemblePause)
						return nil, c.Unpause(ctx)
					},
				},
				{
					// Cut off from the quorum while its clients still reach
					// it: it answers their heartbeats but commits nothing,
					// and steps down after syncLimit (2s here).
					kind: "isolate-follower",
					inject: func(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
						leader, err := ensemble.Leader(ctx)
						if err != nil {
							return nil, err
						}
						return chaosIsolate(ctx, ensemble, (leader+1+rng.IntN(zktest.EnsembleSize-1))%zktest.EnsembleSize)
					},
				},
				{
					// The other two elect a new leader after syncLimit, and
					// the old one steps down.
					kind: "isolate-leader",
					inject: func(ctx context.Context, _ *rand.Rand) (func(context.Context) error, error) {
						leader, err := ensemble.Leader(ctx)
						if err != nil {
							return nil, err
						}
						return chaosIsolate(ctx, ensemble, leader)
					},
				},
				{
					// Every server stopped and started again in turn, each
					// back in the ensemble before the next goes: a quorum
					// throughout, and sessions kept.
					kind: "rolling-restart",
					inject: func(ctx context.Context, _ *rand.Rand) (func(context.Context) error, error) {
						for i := range zktest.EnsembleSize {
							if err := ensemble.Restart(ctx, i); err != nil {
								return nil, err
							}
						}
						return nil, nil
					},
				},
			},
		}, total)
	})

	t.Logf("chaos: %s; %v in all", total, time.Since(began).Round(time.Second))
	for _, line := range total.recipeLines() {
		t.Logf("chaos: %s", line)
	}
	goleak.VerifyNone(t, leaks)
}

// chaosPausePastSyncLimit reports the ZooKeeper version c runs, from its
// srvr, and whether the ensemble's fault "pause" may freeze a server past
// syncLimit: only on 3.9.3 and later, which no longer lose a dropped
// follower's acknowledged transactions (see chaosEnsemblePause). A version
// that cannot be read counts as before 3.9.3.
func chaosPausePastSyncLimit(ctx context.Context, t *testing.T, c *zktest.Container) (string, bool) {
	t.Helper()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := c.FourLetter(qctx, "srvr")
	require.NoError(t, err, "srvr")
	version, ok := chaosParseVersion(out)
	if !ok {
		return "of unknown version", false
	}
	return fmt.Sprintf("%d.%d.%d", version[0], version[1], version[2]), chaosAtLeast(version, chaosPauseFixedIn)
}

// chaosPauseFixedIn is the first ZooKeeper release with ZOOKEEPER-4409 and
// ZOOKEEPER-4712 fixed (see chaosEnsemblePause).
var chaosPauseFixedIn = [3]int{3, 9, 3}

// chaosAtLeast reports whether version v is want or later.
func chaosAtLeast(v, want [3]int) bool { return slices.Compare(v[:], want[:]) >= 0 }

// chaosVersionLine is srvr's first line: "Zookeeper version: 3.9.3-<commit>,
// built on <date>".
var chaosVersionLine = regexp.MustCompile(`(?m)^Zookeeper version: (\d+)\.(\d+)\.(\d+)`)

// chaosParseVersion reads the server's major, minor and patch version from
// srvr's output.
func chaosParseVersion(srvr string) ([3]int, bool) {
	var v [3]int
	m := chaosVersionLine.FindStringSubmatch(srvr)
	if m == nil {
		return v, false
	}
	for i := range v {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// chaosPlan is one phase: where the servers are and how to break them.
// Every phase also has the fault "move" (chaosMove).
type chaosPlan struct {
	name    string
	seed    uint64
	servers []string // the fixed endpoints, for the observer
	// movable: the servers behind names that move, for the clients.
	movable      *zktest.Movable
	nodes        []chaosNode // every server, for four-letter words
	serverFaults []chaosServerFault
}

type chaosNode struct {
	name       string
	fourLetter func(ctx context.Context, cmd string) (string, error)
}

// chaosServerFault breaks the servers; inject returns what heals them, or
// nil if they are whole again when it returns.
type chaosServerFault struct {
	kind   string
	inject func(ctx context.Context, rng *rand.Rand) (heal func(context.Context) error, err error)
}

// chaosMove is the fault "the servers move": every server in turn leaves
// its address (its name stops resolving, its connections are reset), is
// away for up to half a second, as a replaced pod takes a while to start,
// and answers at a new address, its name following (Movable.MoveAll). One
// server is away at a time, so an ensemble keeps its quorum throughout.
func chaosMove(m *zktest.Movable, rec *chaosRecorder) chaosServerFault {
	return chaosServerFault{
		kind: "move",
		inject: func(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
			return nil, m.MoveAll(ctx, func(ctx context.Context, _ int) error {
				rec.count("server moves")
				chaosSleep(ctx, time.Duration(rng.IntN(500))*time.Millisecond)
				return nil
			})
		},
	}
}

// chaosIsolate isolates server i of e; the heal it returns waits until the
// server serves again, as a follower, so that the next fault finds the
// ensemble whole.
func chaosIsolate(ctx context.Context, e *zktest.Ensemble, i int) (func(context.Context) error, error) {
	if err := e.Isolate(ctx, i); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := e.Heal(ctx, i); err != nil {
			return err
		}
		return awaitServing(ctx, e)
	}, nil
}

// chaosHold is one acquisition: from Acquire returning to the earlier of
// Release being called and the lease's end (its ValidUntil, if it was lost).
type chaosHold struct {
	lock   string // one of chaosLocks: what it is checked against
	recipe string // one of chaosRecipes[lock]: what took it
	write  bool   // exclusive: a mutex, the write side, a leadership, a multilock
	// paths: the paths of lock "multi" that it covers ("a", "b", "c").
	paths  []string
	client int
	policy string // the client's: chaosDefault or chaosLossOnDisconnect
	start  time.Time
	end    time.Time
	token  int64
	node   string
	lost   error     // why the lease ended before Release, if it did
	woke   time.Time // when the worker saw Done closed, if it did
	// stillborn: the lease had ended when Acquire returned (its deadline
	// passed, or the connection dropped, between the grant and the
	// return). It was never held.
	stillborn bool
	// bridged: a downgrade's read lease, held from the moment its write
	// lease was last seen live (see the top of the file), not from
	// Downgrade's return.
	bridged bool
	// wait: how long its Acquire took (zero for a downgrade's read lease).
	wait time.Duration
	// acquireN: one of the leases of a Semaphore.AcquireN.
	acquireN bool
}

// The clients' policies: even clients keep the default, odd ones lose their
// leases at the first disconnect.
const (
	chaosDefault          = "default"
	chaosLossOnDisconnect = "loss-on-disconnect"
)

var chaosPolicies = []string{chaosDefault, chaosLossOnDisconnect}

// fault is one injected fault.
type chaosFault struct {
	kind   string
	victim int // the client; -1 for the servers
	at     time.Time
	healed time.Time
	err    error
}

// chaosClient is one client, its transport and its locks.
type chaosClient struct {
	i      int
	policy string
	c      *zklock.Client
	f      *zktest.Faults
	mutex  *zklock.Mutex
	// rw: the RWMutex its workers take, made WithSharedReads on a shared
	// client (chaosShared).
	rw *zklock.RWMutex
	// sems: the semaphores it works on (two of the four), by lock.
	sems map[string]*zklock.Semaphore
	// multi: the MultiLocks over {a,b}, {b,c}, {c,a} and the Mutexes on
	// a, b and c.
	multi []chaosMulti
	// election is the client's candidate in the election, nil if it is
	// not a candidate; observe is the election that the observer's client
	// watches with Observe, nil on the others.
	election *zklock.Election
	observe  *zklock.Election
	held     atomic.Int32 // leases its workers hold now
	busy     atomic.Bool  // under a client fault, or not yet recovered from one
	// lastHold is when (since chaosEpoch) the latest hold of its workers began.
	lastHold atomic.Int64
}

// chaosEpoch is the origin of chaosClient.lastHold: a monotonic clock reading.
var chaosEpoch = time.Now()

// chaosRecorder collects holds, faults and anything unexpected.
type chaosRecorder struct {
	mu         sync.Mutex
	holds      []chaosHold
	faults     []chaosFault
	unexpected []string
	counts     map[string]int
}

func (r *chaosRecorder) add(h chaosHold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds = append(r.holds, h)
}

func (r *chaosRecorder) addFault(f chaosFault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
	if f.err != nil {
		r.unexpected = append(r.unexpected, fmt.Sprintf("fault %s of client %d: %v", f.kind, f.victim, f.err))
	}
}

func (r *chaosRecorder) count(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what]++
}

func (r *chaosRecorder) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unexpected = append(r.unexpected, fmt.Sprintf(format, args...))
}

func (r *chaosRecorder) snapshot() ([]chaosHold, []chaosFault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.holds), slices.Clone(r.faults)
}

func runChaos(t *testing.T, plan chaosPlan, total *chaosFigures) {
	began := time.Now()
	duration := chaosDuration(t)
	ctx := t.Context()
	root := lockPath(t)
	mutexPath, rwPath, electionPath := root+"-mutex", root+"-rw", root+"-election"
	sems := chaosSemaphores(root)
	multiPaths := map[string]string{}
	for _, p := range chaosMultiPaths {
		multiPaths[p] = root + "-multi-" + p
	}
	// Where each lock's nodes are: every one of these paths must end with
	// no children.
	nodePaths := map[string][]string{"mutex": {mutexPath}, "rw": {rwPath}, "election": {electionPath}}
	for _, p := range chaosMultiPaths {
		nodePaths["multi"] = append(nodePaths["multi"], multiPaths[p])
	}
	for _, sm := range sems {
		nodePaths[sm.lock] = sm.nodes
	}

	// The observer is a plain go-zookeeper client: bound its handshakes as
	// ZooKeeper's Java client does, or a server restarted by the schedule
	// can hold it on an unanswered connection (ZOOKEEPER-5051).
	observer, _, err := zk.Connect(plan.servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(chaosQuietLogger{}),
		zk.WithDialer(zktest.HandshakeDialer(10*time.Second/time.Duration(len(plan.servers)))))
	require.NoError(t, err)
	defer observer.Close()
	// The election's path is a persistent node, not the container zklock
	// would create: the server never deletes it when it is empty, so
	// ZooKeeper numbers its children in creation order for the whole phase,
	// which the observer's check relies on. Deleted at the end.
	require.NoError(t, chaosPersistent(observer, electionPath))
	defer func() { _ = observer.Delete(electionPath, -1) }()
	// The persistent nodes of kazoo's layout and the SharedCount, made by
	// the clients, are deleted at the end too.
	defer func() {
		for _, sm := range sems {
			for _, p := range sm.persistent {
				_ = observer.Delete(p, -1)
			}
		}
	}()
	baseline, err := chaosWatches(ctx, plan.nodes)
	require.NoError(t, err)

	rec := &chaosRecorder{counts: map[string]int{}}
	clients := make([]*chaosClient, chaosClients)
	for i := range clients {
		cl := &chaosClient{i: i, policy: chaosPolicies[i%len(chaosPolicies)], f: zktest.NewFaults(nil)}
		opts := []zklock.Option{zklock.WithDialer(cl.f.Dialer()), zklock.WithSessionTimeout(chaosSession)}
		if cl.policy == chaosLossOnDisconnect {
			opts = append(opts, zklock.WithLossOnDisconnect())
		}
		if os.Getenv("ZKLOCK_CHAOS_LOG") != "" {
			opts = append(opts, zklock.WithLogger(slog.New(
				slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("client", i)))
		}
		opts = append(opts, zklock.WithHostResolver(plan.movable.Lookup))
		cl.c, err = zklock.Connect(ctx, plan.movable.Servers(), opts...)
		require.NoError(t, err)
		defer cl.f.Close()
		defer cl.c.Close() // before the transport: defers run last-in first-out
		cl.mutex, err = zklock.NewMutex(cl.c, mutexPath)
		require.NoError(t, err)
		var rwOpts []zklock.LockOption
		if chaosShared(i) {
			rwOpts = append(rwOpts, zklock.WithSharedReads())
		}
		cl.rw, err = zklock.NewRWMutex(cl.c, rwPath, rwOpts...)
		require.NoError(t, err)
		if i < chaosCandidates {
			cl.election, err = zklock.NewElection(cl.c, electionPath, zklock.WithNodeData(chaosIdentity(i)))
			require.NoError(t, err)
		}
		if i == chaosObserver {
			cl.observe, err = zklock.NewElection(cl.c, electionPath)
			require.NoError(t, err)
		}
		// Two semaphores of the four: each has four clients, of both
		// policies.
		cl.sems = map[string]*zklock.Semaphore{}
		for _, sm := range []chaosSem{sems[i%len(sems)], sems[(i+1)%len(sems)]} {
			cl.sems[sm.lock], err = zklock.NewSemaphore(cl.c, sm.path, chaosSemSize, sm.opts...)
			require.NoError(t, err)
		}
		// The MultiLocks, whose paths odd clients list in the other order,
		// then the Mutexes, as pick expects them.
		for _, ps := range [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}} {
			if i%2 == 1 {
				ps = []string{ps[1], ps[0]}
			}
			m, err := zklock.NewMultiLock(cl.c, []string{multiPaths[ps[0]], multiPaths[ps[1]]})
			require.NoError(t, err)
			cl.multi = append(cl.multi, chaosMulti{recipe: "multilock", paths: ps, locker: m})
		}
		for _, p := range chaosMultiPaths {
			m, err := zklock.NewMutex(cl.c, multiPaths[p])
			require.NoError(t, err)
			cl.multi = append(cl.multi, chaosMulti{recipe: "multi-mutex", paths: []string{p}, locker: m})
		}
		clients[i] = cl
	}

	// Workers: one per client on each of its locks (the mutex, the
	// RWMutex, two semaphores, the multilock paths), one per candidate in
	// the election, and on a shared client more readers of its RWMutex
	// ("rw-shared"), so that its shared node has several leases at once.
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var workers sync.WaitGroup
	for _, cl := range clients {
		for j, lock := range []string{"mutex", "rw"} {
			// chaosMutexDepth or chaosDepth workers of each client on
			// each: deep queues, where the mutex's and the write side's
			// successors hold by their predecessors' grants (handoff.go),
			// and one Client has many waiters on one path (CURATOR-716's
			// case).
			depth := chaosDepth
			if lock == "mutex" {
				depth = chaosMutexDepth
			}
			for d := range depth {
				rng := rand.New(rand.NewPCG(plan.seed, uint64(100+2*cl.i+j+1000*d)))
				workers.Go(func() { cl.work(work, rec, lock, rng) })
			}
		}
		if chaosShared(cl.i) {
			for k := range chaosSharedReaders - 1 {
				rng := rand.New(rand.NewPCG(plan.seed, uint64(700+10*cl.i+k)))
				workers.Go(func() { cl.work(work, rec, "rw-shared", rng) })
			}
		}
		j := 0
		for _, sm := range sems {
			if cl.sems[sm.lock] == nil {
				continue
			}
			// Deep as the mutex's: a zklock semaphore's waiters chain
			// through its registry of holders (registry.go).
			for d := range chaosDepth {
				rng := rand.New(rand.NewPCG(plan.seed, uint64(300+2*cl.i+j+1000*d)))
				workers.Go(func() { cl.work(work, rec, sm.lock, rng) })
			}
			j++
		}
		{
			rng := rand.New(rand.NewPCG(plan.seed, uint64(500+cl.i)))
			workers.Go(func() { cl.work(work, rec, "multi", rng) })
		}
		if cl.election != nil {
			rng := rand.New(rand.NewPCG(plan.seed, uint64(1000+cl.i)))
			workers.Go(func() { cl.work(work, rec, "election", rng) })
		}
	}

	// The observer: every report, in the order Observe made them.
	observing, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	var (
		reports  []chaosReport
		observed = make(chan struct{})
	)
	go func() {
		defer close(observed)
		for p := range clients[chaosObserver].observe.Observe(observing) {
			reports = append(reports, chaosReport{p, time.Now()})
		}
	}()

	if os.Getenv("ZKLOCK_CHAOS_DEBUG") != "" {
		workers.Go(func() {
			chaosWatchdog(work, t, observer, rec, clients, nodePaths)
		})
	}

	// Faults, until the deadline.
	chaosEnd := time.Now().Add(duration)
	var (
		injectors sync.WaitGroup
		serverMu  sync.RWMutex // client expiries do not run during server faults
	)
	// When each injector was done: the client faults' recoveries and the
	// server faults' first round may run past chaosEnd.
	var clientFaultsDone, serverFaultsDone time.Time
	injectors.Go(func() {
		chaosClientFaults(ctx, plan.seed, chaosEnd, clients, rec, &serverMu)
		clientFaultsDone = time.Now()
	})
	plan.serverFaults = append(slices.Clone(plan.serverFaults), chaosMove(plan.movable, rec))
	injectors.Go(func() {
		chaosServerFaults(ctx, plan, chaosEnd, rec, &serverMu)
		serverFaultsDone = time.Now()
	})
	// Midway, each SharedCount grows from K to K+1, which its semaphore's
	// waiting acquires must follow. From the first attempt to write it on
	// (a write whose reply was lost may have been applied), the checker
	// allows K+1.
	grown := map[string]time.Time{}
	injectors.Go(func() {
		if !chaosSleep(ctx, duration/2) {
			return
		}
		for _, sm := range sems {
			if sm.count != "" {
				grown[sm.lock] = chaosGrow(ctx, rec, observer, sm.count, chaosSemSize+1)
			}
		}
	})
	injectors.Wait()
	chaosDone := time.Now()

	// Progress: after every fault, the locks are acquired again.
	progressed := func() bool {
		holds, faults := rec.snapshot()
		for _, f := range faults {
			if _, ok := recoveryAfter(f, holds); !ok {
				return false
			}
			for _, lock := range chaosLocks {
				if _, ok := lockAfter(f, holds, lock); !ok {
					return false
				}
			}
			if _, ok := writeAfter(f, holds); !ok {
				return false
			}
			if _, missing := everyClientAfter(f, holds); len(missing) > 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(chaosRecovery)
	for !progressed() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !progressed() {
		// The checker below says which fault was not followed by progress;
		// this says who the locks wait for, while their queues stand.
		for _, lock := range chaosLocks {
			if !chaosLockProgressed(rec, lock) {
				t.Logf("chaos: %s has not progressed since a fault healed; its queues now:%s", lock, chaosQueues(observer, clients, nodePaths[lock]))
			}
		}
	}
	// The observer stops first: its channel must close once its context
	// has ended.
	stopObserving()
	select {
	case <-observed:
	case <-time.After(chaosDrain):
		t.Fatalf("chaos: Observe's channel still open %v after its context ended", chaosDrain)
	}
	stopWork()
	workers.Wait()

	// The observer's last read may have left a watch on the election's
	// children (it sets one when it finds nobody leading, and go-zookeeper
	// cannot remove a watch), which fires only at the next change of
	// children. One more candidate, in and out, fires it, so the watch count
	// below can return to its baseline. (The watch on the last reported
	// leader's node fires when that node is deleted.)
	fctx, fcancel := context.WithTimeout(ctx, chaosRecovery)
	if lease, err := clients[0].election.Campaign(fctx); err != nil {
		t.Errorf("chaos: a last campaign after the run: %v", err)
	} else if err := lease.Release(fctx); err != nil {
		t.Errorf("chaos: a last resignation after the run: %v", err)
	}
	fcancel()

	// A waiter on the SharedCount watches its data (Curator's SharedValue
	// does too); one granted without the count changing leaves the watch
	// on the server, which go-zookeeper cannot remove, until the count
	// next changes. A write of the same count fires it, so the watch count
	// below can return to its baseline.
	for _, sm := range sems {
		if sm.count == "" {
			continue
		}
		if data, _, err := observer.Get(sm.count); err != nil {
			t.Errorf("chaos: read the SharedCount %s: %v", sm.count, err)
		} else if _, err := observer.Set(sm.count, data, -1); err != nil {
			t.Errorf("chaos: write the SharedCount %s: %v", sm.count, err)
		}
	}

	// Leftovers: every node deleted, every watch fired.
	orphans := map[string]int{}
	for _, lock := range chaosLocks {
		for _, path := range nodePaths[lock] {
			kids := chaosLeftovers(ctx, t, observer, path)
			orphans[lock] += len(kids)
			for _, k := range kids {
				owner := "?"
				if _, st, err := observer.Get(path + "/" + k); err == nil {
					owner = fmt.Sprintf("session %#x", st.EphemeralOwner)
					for _, cl := range clients {
						if cl.c.SessionID() == st.EphemeralOwner {
							owner += fmt.Sprintf(" (client %d, live)", cl.i)
						}
					}
					// When it was made, to hold against the faults: the
					// leader's clock, and its epoch (a zxid's high half).
					owner += fmt.Sprintf(", made at +%v, zxid %#x (epoch %d)",
						time.UnixMilli(st.Ctime).Sub(began).Round(time.Millisecond), st.Czxid, st.Czxid>>32)
				}
				t.Errorf("chaos: orphan node %s/%s of %s", path, k, owner)
			}
		}
	}
	if n := sumCounts(orphans); n > 0 {
		// A node its owner deleted can come back: ZooKeeper 3.8 loses
		// acknowledged transactions on a follower frozen past syncLimit
		// (ZOOKEEPER-4409, ZOOKEEPER-4712; fixed in 3.9.3), and a server
		// whose tree so diverged from its leader's counts a digest mismatch
		// for each transaction it applies.
		t.Logf("chaos: %d orphan(s); ZooKeeper's digest mismatches per server (a diverged server counts them): %s",
			n, chaosDigestMismatches(ctx, plan.nodes))
	}
	leaked := 0
	if !chaosWait(ctx, chaosDrain, func() bool {
		n, err := chaosWatches(ctx, plan.nodes)
		leaked = n - baseline
		return err == nil && n == baseline
	}) {
		t.Errorf("chaos: %d watch(es) left on the servers (baseline %d)", leaked, baseline)
		t.Logf("chaos: the servers' watches by path (wchp): %s", chaosWatchList(ctx, plan.nodes))
	}

	holds, faults := rec.snapshot()
	ph := newChaosFigures()
	ph.grown = grown
	ph.watchesLeaked = leaked
	for lock, n := range orphans {
		ph.orphans += n
		ph.counts[lock+" orphans"] += n
	}
	ph.check(t, holds, faults, began)
	ph.checkReports(t, reports, holds, began)
	for k, n := range rec.counts {
		ph.counts[k] += n
	}
	for _, u := range rec.unexpected {
		t.Errorf("chaos: unexpected: %s", u)
	}
	ph.unexpected = len(rec.unexpected)
	t.Logf("chaos %s: %s; faults for %v (client faults done at +%v, server faults at +%v), drained after %v, %v in all",
		plan.name, ph, duration.Round(time.Second), clientFaultsDone.Sub(began).Round(time.Millisecond),
		serverFaultsDone.Sub(began).Round(time.Millisecond), time.Since(chaosDone).Round(time.Millisecond),
		time.Since(began).Round(time.Second))
	for _, line := range ph.recipeLines() {
		t.Logf("chaos %s: %s", plan.name, line)
	}
	total.add(ph)
}

// chaosTake is one acquisition of a worker: what it takes, and how its holds
// are checked.
type chaosTake struct {
	lock, recipe string
	write        bool
	paths        []string // of lock "multi"
	n            int      // leases asked for at once
	acquireN     bool     // through AcquireN (or TryAcquireN)
	downgrade    bool     // a write lease, downgraded once held a while
	acquire      func(ctx context.Context, try bool) ([]*zklock.Lease, error)
}

// one makes one lease a slice of leases.
func one(l *zklock.Lease, err error) ([]*zklock.Lease, error) {
	if err != nil {
		return nil, err
	}
	return []*zklock.Lease{l}, nil
}

func lockerTake(l zklock.Locker) func(context.Context, bool) ([]*zklock.Lease, error) {
	return func(ctx context.Context, try bool) ([]*zklock.Lease, error) {
		if try {
			return one(l.TryAcquire(ctx))
		}
		return one(l.Acquire(ctx))
	}
}

// pick chooses a worker's next acquisition on lock: on the RWMutex, nine
// times in ten the read side ("shared read" through a shared client's
// RWMutex; always, for the extra readers of "rw-shared"), and half the
// write leases are downgraded; on
// a semaphore, one acquire in four is an AcquireN, of one lease up to K
// (kazoo's layout has no AcquireN); on the multilock paths, one of the
// three MultiLocks two times in three, else a Mutex on one of the paths.
func (cl *chaosClient) pick(lock string, rng *rand.Rand) chaosTake {
	tk := chaosTake{lock: lock, recipe: lock, write: true, n: 1}
	switch lock {
	case "mutex":
		tk.acquire = lockerTake(cl.mutex)
	case "rw", "rw-shared":
		tk.lock = "rw"
		if lock == "rw" && rng.IntN(10) == 0 {
			tk.recipe, tk.downgrade = "write", rng.IntN(2) == 0
			tk.acquire = lockerTake(cl.rw.WriteLock())
		} else {
			tk.recipe, tk.write = "read", false
			if chaosShared(cl.i) {
				tk.recipe = "shared read"
			}
			tk.acquire = lockerTake(cl.rw.ReadLock())
		}
	case "election":
		tk.acquire = func(ctx context.Context, _ bool) ([]*zklock.Lease, error) {
			return one(cl.election.Campaign(ctx))
		}
	case "multi":
		m := cl.multi[3+rng.IntN(3)] // a Mutex
		if rng.IntN(3) != 0 {
			m = cl.multi[rng.IntN(3)] // a MultiLock
		}
		tk.recipe, tk.paths, tk.acquire = m.recipe, m.paths, lockerTake(m.locker)
	default: // a semaphore
		s := cl.sems[lock]
		tk.write, tk.acquire = false, lockerTake(s)
		if lock != "sem-kazoo" && rng.IntN(4) == 0 {
			n := 1 + rng.IntN(chaosSemSize)
			tk.n, tk.acquireN = n, true
			tk.acquire = func(ctx context.Context, try bool) ([]*zklock.Lease, error) {
				if try {
					return s.TryAcquireN(ctx, n)
				}
				return s.AcquireN(ctx, n)
			}
		}
	}
	return tk
}

// work takes one lock over and over until ctx ends (see pick). One acquire
// in ten gives up after a few milliseconds (a cancelled waiter must leave
// no trace), one in twenty is a TryAcquire (not in the election).
func (cl *chaosClient) work(ctx context.Context, rec *chaosRecorder, lock string, rng *rand.Rand) {
	for ctx.Err() == nil {
		tk := cl.pick(lock, rng)
		timeout := 30 * time.Second
		if rng.IntN(10) == 0 {
			timeout = time.Duration(1+rng.IntN(30)) * time.Millisecond
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		called := time.Now()
		leases, err := tk.acquire(actx, lock != "election" && rng.IntN(20) == 0)
		start := time.Now()
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, zklock.ErrLocked):
				rec.count("try-locked")
			case errors.Is(err, context.DeadlineExceeded):
				// Not a failure even for a writer: one acquire's wait sums
				// the faults that come back to back while it queues (a
				// write waited 20.5 s through 20 of them in a clean-clone
				// CI run), so a bound on it asserts the schedule's timing,
				// not the library's. Writers' progress is checked from
				// each fault's heal instead (writeAfter, in check: at
				// most 5.4 s in that run against chaosRecovery), and
				// TestSharedReadsWriterNotStarved pins, with no clock,
				// that readers cannot keep a writer out.
				if tk.lock == "rw" && tk.write && timeout == 30*time.Second {
					rec.count("write gave up")
				}
				rec.count("cancelled")
				rec.count(tk.recipe + " cancelled")
			default:
				rec.fail("client %d: acquire %s: %v", cl.i, tk.recipe, err)
				chaosSleep(ctx, 10*time.Millisecond)
			}
			continue
		}
		if len(leases) != tk.n {
			rec.fail("client %d: %s: %d leases for %d asked", cl.i, tk.recipe, len(leases), tk.n)
		}
		if tk.acquireN {
			rec.count(tk.recipe + " acquireN")
		}

		holds := make([]chaosHold, len(leases))
		live := -1 // a lease live after Acquire returned
		for i, l := range leases {
			holds[i] = chaosHold{lock: tk.lock, recipe: tk.recipe, write: tk.write, paths: tk.paths, client: cl.i,
				policy: cl.policy, start: start, token: l.Token(), node: l.Node(), acquireN: tk.acquireN,
				wait: start.Sub(called)}
			// Err compares the clock with the deadline itself: a lease whose
			// deadline passed on the way back from Acquire is over, even if
			// the keeper has not closed Done yet.
			if err := l.Err(); err != nil {
				holds[i].stillborn, holds[i].end, holds[i].lost = true, start, err
			} else if live < 0 {
				live = i
			}
		}
		if live >= 0 {
			d := chaosHoldTime(rng, tk.lock, tk.write)
			if tk.downgrade {
				// Long enough for writers to queue behind it, whom the
				// downgrade must keep out.
				d = time.Duration(10+rng.IntN(50)) * time.Millisecond
			}
			cl.held.Add(1)
			holds[live].woke = holdFor(leases[live], d)
		}
		// The leases are ended and released one by one (AcquireN's too),
		// each hold ending when its Release is called.
		for i, l := range leases {
			h := &holds[i]
			if !h.stillborn {
				cl.end(rec, h, l)
			}
			if i == len(leases)-1 && live >= 0 {
				cl.held.Add(-1)
				cl.lastHold.Store(int64(start.Sub(chaosEpoch)))
			}
			cl.record(rec, h)
			downgraded := false
			if tk.downgrade && !h.stillborn {
				downgraded = cl.downgrade(ctx, rec, rng, h, l)
			}
			cl.release(ctx, rec, h, l, downgraded)
		}
		chaosSleep(ctx, time.Duration(rng.IntN(5000))*time.Microsecond)
	}
}

// chaosHoldTime is how long a worker holds: mostly a few milliseconds, some
// holds long, and a few longer than the session timeout, so that faults
// find holders to take leases from. Writes stay short: they stop everyone
// else. Leaders, semaphore holders and multilock holders hold as long as
// mutex holders.
func chaosHoldTime(rng *rand.Rand, lock string, write bool) time.Duration {
	d := time.Duration(rng.IntN(5000)) * time.Microsecond
	switch p := rng.IntN(100); {
	case lock == "rw" && !write && p < 3, lock != "rw" && p < 1:
		d = time.Duration(1000+rng.IntN(1500)) * time.Millisecond
	case lock == "rw" && !write && p < 18, lock != "rw" && p < 11:
		d = time.Duration(20+rng.IntN(280)) * time.Millisecond
	}
	return d
}

// holdFor waits d, or until lease ends; it returns when it saw the lease end
// (zero if it did not).
func holdFor(lease *zklock.Lease, d time.Duration) time.Time {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-lease.Done():
		return time.Now()
	case <-timer.C:
		return time.Time{}
	}
}

// end ends h, the hold of lease: now, when Release (or Downgrade) is
// called next, if the lease is still live after this reading (Err returning
// nil then means the deadline is still ahead). Otherwise it ended at the
// deadline the lease reports, which for a lost lease is the earlier of its
// deadline and the moment it was declared lost.
func (cl *chaosClient) end(rec *chaosRecorder, h *chaosHold, lease *zklock.Lease) {
	h.end = time.Now()
	if h.lost = lease.Err(); h.lost != nil {
		h.end = lease.ValidUntil()
		if !h.end.After(h.start) {
			// Err said live after start: the deadline was ahead then, and
			// the lease ended later.
			rec.fail("client %d (%s): lease %s, live after Acquire returned at %v, reports ValidUntil %v",
				cl.i, cl.policy, h.node, h.start.Sub(chaosEpoch), h.end.Sub(chaosEpoch))
		}
	}
}

// record adds h to the holds, checking the way it was lost.
func (cl *chaosClient) record(rec *chaosRecorder, h *chaosHold) {
	if h.lost != nil && !isLoss(h.lost, cl.policy) {
		rec.fail("client %d (%s): lease %s lost with %v", cl.i, cl.policy, h.node, h.lost)
	}
	rec.add(*h)
}

// release releases lease as a user would: a bounded Release, which leaves
// the node to the Client's cleaner if the connection is down. A write
// lease that Downgrade turned into a read lease is released already.
func (cl *chaosClient) release(ctx context.Context, rec *chaosRecorder, h *chaosHold, lease *zklock.Lease, downgraded bool) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	err := lease.Release(rctx)
	rcancel()
	if err != nil && !isLoss(err, cl.policy) && !(downgraded && errors.Is(err, zklock.ErrReleased)) {
		rec.fail("client %d (%s): release %s: %v", cl.i, cl.policy, h.node, err)
	}
}

// downgrade turns write, whose hold wh has just been ended (and recorded),
// into a read lease, holds it a while and releases it. It reports whether
// Downgrade succeeded.
//
// The read lease's hold starts where the write lease's ended if the write
// lease was live then and the read lease is live when Downgrade returns
// (bridged; see the top of the file), else at the return. A write lease
// already lost cannot be downgraded: Downgrade fails with its error (a
// read node at its place could let a writer in between).
func (cl *chaosClient) downgrade(ctx context.Context, rec *chaosRecorder, rng *rand.Rand, wh *chaosHold, write *zklock.Lease) bool {
	// Whether a writer is queued, whom the downgrade must keep out: a
	// figure, not an assertion.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	parts, err := cl.rw.Participants(pctx)
	pcancel()
	if err == nil && slices.ContainsFunc(parts, func(p zklock.Participant) bool { return !p.Holder && !p.Read }) {
		rec.count("downgrade writer queued")
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	read, err := cl.rw.Downgrade(dctx, write)
	returned := time.Now()
	cancel()
	switch {
	case err != nil && wh.lost != nil:
		if !isLoss(err, cl.policy) {
			rec.fail("client %d (%s): downgrade %s, lost with %v: %v", cl.i, cl.policy, wh.node, wh.lost, err)
		}
		rec.count("downgrade refused")
		return false
	case err != nil:
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, context.DeadlineExceeded):
			rec.count("downgrade cancelled")
		case isLoss(err, cl.policy):
			rec.count("downgrade failed") // the write lease was lost meanwhile
		default:
			rec.fail("client %d (%s): downgrade %s: %v", cl.i, cl.policy, wh.node, err)
		}
		return false
	case wh.lost != nil:
		rec.fail("client %d (%s): downgraded %s, lost before Downgrade was called (%v), into %s",
			cl.i, cl.policy, wh.node, wh.lost, read.Node())
	}
	if chaosShared(cl.i) {
		rec.count("downgrade shared") // its read node is its own, outside the shared node
	}
	rh := chaosHold{lock: "rw", recipe: "downgrade", client: cl.i, policy: cl.policy, start: returned,
		token: read.Token(), node: read.Node()}
	if err := read.Err(); err != nil {
		rh.stillborn, rh.end, rh.lost = true, returned, err
	} else {
		if wh.lost == nil {
			rh.start, rh.bridged = wh.end, true
		}
		cl.held.Add(1)
		rh.woke = holdFor(read, chaosHoldTime(rng, "rw", false))
		cl.end(rec, &rh, read)
		cl.held.Add(-1)
		cl.lastHold.Store(int64(returned.Sub(chaosEpoch)))
	}
	cl.record(rec, &rh)
	cl.release(ctx, rec, &rh, read, false)
	return true
}

// isLoss reports whether err is a way for a lease of a client of policy to
// be lost: past its deadline, its session expired, its client closed, and,
// only with WithLossOnDisconnect, a disconnect.
func isLoss(err error, policy string) bool {
	if errors.Is(err, zklock.ErrConnectionSuspended) {
		return policy == chaosLossOnDisconnect
	}
	return errors.Is(err, zklock.ErrLeaseExpired) || errors.Is(err, zklock.ErrSessionExpired) ||
		errors.Is(err, zklock.ErrClientClosed)
}

// chaosClientFaults breaks one client at a time, at random moments (half the
// time one that holds a lease), with at most chaosFaulted clients broken at
// once:
//   - partition: blackholed for 0.3s to 4s (beyond two seconds the server
//     expires its session);
//   - expire: cut off until the client has noticed, then its session is
//     killed on the server (see below), then healed;
//   - drop: its connection reset; it reconnects at once;
//   - cut-reply: its next create, delete, getChildren or getData reaches
//     the server, and the connection is reset before the reply comes back
//     (the client cannot know whether a create or a delete happened).
func chaosClientFaults(ctx context.Context, seed uint64, end time.Time, clients []*chaosClient, rec *chaosRecorder, serverMu *sync.RWMutex) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var running sync.WaitGroup
	defer running.Wait()
	for time.Now().Before(end) {
		if !chaosSleep(ctx, time.Duration(200+rng.IntN(1000))*time.Millisecond) {
			return
		}
		var free, holding []*chaosClient
		faulted := 0
		for _, cl := range clients {
			switch {
			case cl.busy.Load():
				faulted++
			case cl.held.Load() > 0:
				holding = append(holding, cl)
				fallthrough
			default:
				free = append(free, cl)
			}
		}
		if faulted >= chaosFaulted || len(free) == 0 {
			continue
		}
		// Half the time, a client that holds a lease: the faults that
		// matter most are the ones that take a lease from its holder.
		if len(holding) > 0 && rng.IntN(2) == 0 {
			free = holding
		}
		cl := free[rng.IntN(len(free))]
		cl.busy.Store(true)
		kind := []string{"partition", "partition", "expire", "expire", "drop", "cut-reply"}[rng.IntN(6)]
		op := []int32{zktest.OpCreate, zktest.OpDelete, zktest.OpGetChildren2, zktest.OpGetData}[rng.IntN(4)]
		d := time.Duration(300+rng.IntN(3700)) * time.Millisecond
		running.Go(func() {
			defer cl.busy.Store(false)
			f := chaosFault{kind: kind, victim: cl.i, at: time.Now()}
			switch kind {
			case "partition":
				cl.f.Partition()
				chaosSleep(ctx, d)
				cl.f.Heal()
			case "expire":
				f.err = chaosExpire(ctx, cl, serverMu)
			case "drop":
				cl.f.Drop()
			case "cut-reply":
				cl.f.DropAfter(op)
			}
			f.healed = time.Now()
			rec.addFault(f)
			// The client is picked again only once it has recovered, so
			// that recoveries do not add up.
			chaosWait(ctx, chaosRecovery, func() bool {
				return time.Duration(cl.lastHold.Load()) > f.healed.Sub(chaosEpoch)
			})
		})
	}
}

// chaosExpire kills the client's session the way a real expiry happens: first
// the client is cut off and its leases end (at their deadline, or at the
// disconnect with WithLossOnDisconnect), and only then does the server end
// the session and let others in. Killing the session of a connected client
// instead would let another client take a lock before the holder could
// possibly know it lost it, which no lock can prevent, and which no real
// expiry does (the server expires a session no sooner than a full timeout
// after it last heard from the client; the lease's deadline comes before).
func chaosExpire(ctx context.Context, cl *chaosClient, serverMu *sync.RWMutex) error {
	serverMu.RLock() // the server that has the session must be up
	defer serverMu.RUnlock()
	cut := time.Now()
	cl.f.Partition()
	defer cl.f.Heal()
	cl.f.Drop()
	if !chaosWait(ctx, 10*time.Second, func() bool {
		return cl.c.Conn().State() != zk.StateHasSession && cl.held.Load() == 0
	}) {
		return fmt.Errorf("still holding %d lease(s) 10s after being cut off", cl.held.Load())
	}
	// The earliest a server would expire the session by itself: a full
	// timeout after the last packet it had from the client, which went out
	// before the cut. By then every lease of the client is past its
	// deadline (under a timeout after one of the client's packets), even
	// one granted just before the cut that its worker had not yet counted
	// in held.
	chaosSleep(ctx, max(time.Until(cut.Add(chaosSession)), 100*time.Millisecond))
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.f.KillSession(kctx)
}

// chaosServerFaults breaks the servers every 3s to 6s, one fault at a time,
// each for 0.5s to 3.5s: a server pause beyond the 2s session timeout
// expires every session it has (the ensemble's pause lasts
// chaosEnsemblePause before ZooKeeper 3.9.3, chaosSyncLimit more from
// 3.9.3 on). The kinds come in rounds, each kind once per
// round in a random order, and the first round is always finished, so that
// every phase has every kind of fault.
func chaosServerFaults(ctx context.Context, plan chaosPlan, end time.Time, rec *chaosRecorder, serverMu *sync.RWMutex) {
	rng := rand.New(rand.NewPCG(plan.seed, 2))
	var round []chaosServerFault
	for rounds := 0; ; {
		if !chaosSleep(ctx, time.Duration(3000+rng.IntN(3000))*time.Millisecond) ||
			(!time.Now().Before(end) && (rounds > 1 || len(round) == 0)) {
			return
		}
		if len(round) == 0 {
			round = slices.Clone(plan.serverFaults)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			rounds++
		}
		sf := round[0]
		round = round[1:]
		d := time.Duration(500+rng.IntN(3000)) * time.Millisecond
		func() {
			serverMu.Lock()
			defer serverMu.Unlock()
			f := chaosFault{kind: sf.kind, victim: -1, at: time.Now()}
			ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			heal, err := sf.inject(ictx, rng)
			if err == nil && heal != nil {
				chaosSleep(ctx, d)
				hctx, cancel := context.WithTimeout(ctx, time.Minute)
				err = heal(hctx)
				cancel()
			}
			f.healed, f.err = time.Now(), err
			rec.addFault(f)
		}()
	}
}

// chaosLocks are the locks every phase contends on, the election among
// them; each is checked on its own, and each must make progress after every
// fault. "multi" is the three paths a, b and c, with MultiLocks on {a,b},
// {b,c} and {c,a} and a Mutex on each; it is checked path by path.
var chaosLocks = []string{"mutex", "rw", "election", "sem-zklock", "sem-curator", "sem-count", "sem-kazoo", "multi"}

// chaosRecipes are the recipes that take each lock, and chaosRecipeNames
// their names in the figures.
var (
	chaosRecipes = map[string][]string{
		"mutex": {"mutex"}, "rw": {"read", "shared read", "write", "downgrade"}, "election": {"election"},
		"sem-zklock": {"sem-zklock"}, "sem-curator": {"sem-curator"}, "sem-count": {"sem-count"},
		"sem-kazoo": {"sem-kazoo"}, "multi": {"multilock", "multi-mutex"},
	}
	chaosRecipeNames = map[string]string{
		"sem-zklock": "semaphore LayoutZklock", "sem-curator": "semaphore LayoutCurator",
		"sem-count": "semaphore LayoutCurator+WithSharedCount", "sem-kazoo": "semaphore LayoutKazoo",
		"election": "election (leaderships)", "multi-mutex": "mutex on the multilock paths",
	}
)

// chaosMultiPaths name the paths of lock "multi".
var chaosMultiPaths = []string{"a", "b", "c"}

// chaosMulti is one of a client's lockers on the multilock paths.
type chaosMulti struct {
	recipe string   // "multilock" or "multi-mutex"
	paths  []string // the ones of chaosMultiPaths it covers
	locker zklock.Locker
}

// chaosSem is one of the semaphores, of chaosSemSize leases.
type chaosSem struct {
	lock       string // its lock (and recipe) in the figures
	path       string
	opts       []zklock.LockOption
	nodes      []string // the paths under which its nodes are
	persistent []string // the persistent nodes its layout makes, deleted at the end
	count      string   // its SharedCount, or ""
}

// chaosSemaphores are the semaphores under root: one of each layout, and
// Curator's twice, with a constant size and with a SharedCount.
func chaosSemaphores(root string) []chaosSem {
	z, c, sc, k := root+"-sem-zklock", root+"-sem-curator", root+"-sem-count", root+"-sem-kazoo"
	count := root + "-count"
	curator := zklock.WithSemaphoreLayout(zklock.LayoutCurator)
	return []chaosSem{
		{lock: "sem-zklock", path: z, nodes: []string{z}},
		{lock: "sem-curator", path: c, opts: []zklock.LockOption{curator}, nodes: []string{c + "/locks", c + "/leases"}},
		{lock: "sem-count", path: sc, opts: []zklock.LockOption{curator, zklock.WithSharedCount(count)},
			nodes: []string{sc + "/locks", sc + "/leases"}, persistent: []string{count}, count: count},
		{lock: "sem-kazoo", path: k, opts: []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutKazoo)},
			nodes: []string{k, k + "-__lock__"}, persistent: []string{k, k + "-__lock__"}},
	}
}

// lockAfter returns how long after f healed anyone next held lock: a lock
// that nobody can take any more (a node nobody deletes at the head of its
// queue) fails here even if its victim recovered on the other lock.
func lockAfter(f chaosFault, holds []chaosHold, lock string) (time.Duration, bool) {
	return heldAfter(f, holds, func(h *chaosHold) bool { return h.lock == lock })
}

// writeAfter returns how long after f healed anyone next held the write
// side of the RWMutex: readers that keep its shared nodes held, one lease
// after another, must not starve its writers.
func writeAfter(f chaosFault, holds []chaosHold) (time.Duration, bool) {
	return heldAfter(f, holds, func(h *chaosHold) bool { return h.lock == "rw" && h.write })
}

// heldAfter returns how long after f healed a hold that which accepts next
// began.
func heldAfter(f chaosFault, holds []chaosHold, which func(*chaosHold) bool) (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for i := range holds {
		h := &holds[i]
		if h.stillborn || !which(h) || h.start.Before(f.healed) {
			continue
		}
		if d := h.start.Sub(f.healed); !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// everyClientAfter returns, for a move, how long after it healed every
// client had held a lock again (the longest any took), and the clients
// that had not: a client that kept the addresses it first resolved has
// none left that answers once every server has moved. For other faults
// the victim's recovery is enough (recoveryAfter): it returns 0 and none.
func everyClientAfter(f chaosFault, holds []chaosHold) (time.Duration, []int) {
	if f.kind != "move" {
		return 0, nil
	}
	var (
		worst   time.Duration
		missing []int
	)
	for i := range chaosClients {
		d, ok := recoveryAfter(chaosFault{healed: f.healed, victim: i}, holds)
		if !ok {
			missing = append(missing, i)
			continue
		}
		worst = max(worst, d)
	}
	return worst, missing
}

// recoveryAfter returns how long after f healed its victim (anyone, for a
// server fault) next held a lock.
func recoveryAfter(f chaosFault, holds []chaosHold) (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for _, h := range holds {
		if h.stillborn || h.start.Before(f.healed) || (f.victim >= 0 && h.client != f.victim) {
			continue
		}
		if d := h.start.Sub(f.healed); !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// chaosFigures are what the chaos test reports.
type chaosFigures struct {
	faults map[string]int
	// counts: acquisitions by recipe and policy, losses, cancels, and by
	// recipe (or lock) its overlaps, inversions, over-K and orphans.
	counts map[string]int
	// peaks: most leases of each semaphore live at once, and ("shared
	// read") most shared leases live at once on one node.
	peaks map[string]int
	waits map[string]time.Duration // longest Acquire by recipe
	// writeProgress: the longest time from a fault's heal to the next
	// write hold on the RWMutex.
	writeProgress time.Duration
	// moveRecovery: the longest time from a move's end until every client
	// had held a lock again; movedLive, movedLost: the leases live when a
	// move began, and how many of them were lost.
	moveRecovery         time.Duration
	movedLive, movedLost int
	// grown: when each semaphore's SharedCount began to grow to K+1 (for
	// check; not added up).
	grown         map[string]time.Time
	overlaps      int
	inversions    int
	overK         int
	orphans       int
	watchesLeaked int
	unexpected    int
	recovery      time.Duration
	recoveryKind  string
	wakeLag       time.Duration // longest Done wake-up after the lease's ValidUntil
	doneOverlaps  int           // overlaps (and over-K) had lost holds ended at their Done wake-up
	// The observer's reports: of a leader, of nobody, and the ones that
	// broke its order (checkReports).
	reports, reportedLeaders, reportedNobody, badReports int
}

func newChaosFigures() *chaosFigures {
	return &chaosFigures{faults: map[string]int{}, counts: map[string]int{}, peaks: map[string]int{},
		waits: map[string]time.Duration{}}
}

func (f *chaosFigures) add(o *chaosFigures) {
	for k, n := range o.faults {
		f.faults[k] += n
	}
	for k, n := range o.counts {
		f.counts[k] += n
	}
	for k, n := range o.peaks {
		f.peaks[k] = max(f.peaks[k], n)
	}
	for k, d := range o.waits {
		f.waits[k] = max(f.waits[k], d)
	}
	f.writeProgress = max(f.writeProgress, o.writeProgress)
	f.moveRecovery = max(f.moveRecovery, o.moveRecovery)
	f.movedLive += o.movedLive
	f.movedLost += o.movedLost
	f.overlaps += o.overlaps
	f.inversions += o.inversions
	f.overK += o.overK
	f.orphans += o.orphans
	f.watchesLeaked += o.watchesLeaked
	f.unexpected += o.unexpected
	if o.recovery > f.recovery {
		f.recovery, f.recoveryKind = o.recovery, o.recoveryKind
	}
	f.wakeLag = max(f.wakeLag, o.wakeLag)
	f.doneOverlaps += o.doneOverlaps
	f.reports += o.reports
	f.reportedLeaders += o.reportedLeaders
	f.reportedNobody += o.reportedNobody
	f.badReports += o.badReports
}

func (f *chaosFigures) String() string {
	kinds := make([]string, 0, len(f.faults))
	for k := range f.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var fs []string
	for _, k := range kinds {
		fs = append(fs, fmt.Sprintf("%s=%d", k, f.faults[k]))
	}
	c := f.counts
	var policies []string
	for _, p := range chaosPolicies {
		var reasons []string
		for _, r := range chaosLossReasons {
			if n := c[p+" lost "+r]; n > 0 {
				reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
			}
		}
		why := ""
		if len(reasons) > 0 {
			why = " (" + strings.Join(reasons, ", ") + ")"
		}
		policies = append(policies, fmt.Sprintf("%s: acquisitions %d, lost while held %d%s, lost on return %d",
			p, c[p], c[p+" lost"], why, c[p+" stillborn"]))
	}
	all, sems := 0, 0
	for _, lock := range chaosLocks {
		for _, r := range chaosRecipes[lock] {
			all += c[r]
			if strings.HasPrefix(r, "sem-") {
				sems += c[r]
			}
		}
	}
	return fmt.Sprintf("faults %s; moves: servers moved %d, leases live when a move began %d (lost %d), every client "+
		"holding a lock again within %v; acquisitions %d (mutex %d, read %d, shared read %d, write %d, downgrades %d, leaderships %d, "+
		"semaphore leases %d, multilocks %d, mutexes on the multilock paths %d; lost while held %d, "+
		"lost on return %d; cancelled waits %d, try-locked %d); %s; election: leaderships %d, lost while held %d, "+
		"lost on return %d, cancelled campaigns %d, overlaps %d, token inversions %d; observer: reports %d "+
		"(leaders %d, nobody %d), out of order %d; overlaps %d; token inversions %d; over-K %d; orphans %d; "+
		"watches leaked %d; unexpected errors %d; longest recovery %v (%s); longest wake-up on Done after "+
		"ValidUntil %v (overlaps and over-K had holders watched Done alone: %d)",
		strings.Join(fs, " "), c["server moves"], f.movedLive, f.movedLost, f.moveRecovery.Round(time.Millisecond),
		all, c["mutex"], c["read"], c["shared read"], c["write"], c["downgrade"], c["election"], sems,
		c["multilock"], c["multi-mutex"], c["lost"], c["stillborn"], c["cancelled"], c["try-locked"],
		strings.Join(policies, "; "),
		c["election"], c["election lost"], c["election stillborn"], c["election cancelled"], c["election overlaps"],
		c["election inversions"], f.reports, f.reportedLeaders, f.reportedNobody, f.badReports,
		f.overlaps, f.inversions, f.overK, f.orphans, f.watchesLeaked,
		f.unexpected, f.recovery.Round(time.Millisecond), f.recoveryKind, f.wakeLag.Round(time.Microsecond), f.doneOverlaps)
}

// recipeLines are the figures recipe by recipe, one line each: its
// acquisitions, how many were lost, and what the checker found: overlaps
// (with a hold of any recipe on the same lock, on any path of it) and
// token inversions, or for a semaphore holds beyond K and the most leases
// live at once; and the nodes left under its lock's paths (shared by the
// recipes of one lock).
func (f *chaosFigures) recipeLines() []string {
	c := f.counts
	var lines []string
	for _, lock := range chaosLocks {
		for _, r := range chaosRecipes[lock] {
			name := r
			if n, ok := chaosRecipeNames[r]; ok {
				name = n
			}
			var b strings.Builder
			fmt.Fprintf(&b, "recipe %s: acquisitions %d (lost while held %d, lost on return %d, cancelled waits %d",
				name, c[r], c[r+" lost"], c[r+" stillborn"], c[r+" cancelled"])
			switch {
			case r == "downgrade":
				fmt.Fprintf(&b, "; held from the write lease on %d; a writer queued behind at %d; refused for a "+
					"lost write lease %d, failed as the write lease was lost %d, cancelled %d", c["downgrade bridged"],
					c["downgrade writer queued"], c["downgrade refused"], c["downgrade failed"], c["downgrade cancelled"])
				fmt.Fprintf(&b, "; through a shared RWMutex %d", c["downgrade shared"])
			case r == "shared read":
				fmt.Fprintf(&b, "; on %d nodes, at most %d leases live at once on one; longest acquire %v",
					c["shared read nodes"], f.peaks[r], f.waits[r].Round(time.Millisecond))
			case r == "write":
				fmt.Fprintf(&b, "; longest acquire %v, gave up after 30s %d, longest from a fault's heal to a write hold %v",
					f.waits[r].Round(time.Millisecond), c["write gave up"], f.writeProgress.Round(time.Millisecond))
			case r == "sem-kazoo":
				b.WriteString("; no AcquireN in kazoo's layout")
			case strings.HasPrefix(r, "sem-"):
				fmt.Fprintf(&b, "; leases by AcquireN %d, in %d calls", c[r+" leases by acquireN"], c[r+" acquireN"])
			}
			b.WriteString(")")
			switch {
			case c[lock+" grown"] > 0:
				fmt.Fprintf(&b, ", over-K %d (at most %d live at once; K=%d, then %d once the SharedCount grew, in %d phase(s))",
					c[r+" over-K"], f.peaks[lock], chaosSemSize, chaosSemSize+1, c[lock+" grown"])
			case strings.HasPrefix(lock, "sem-"):
				fmt.Fprintf(&b, ", over-K %d (at most %d of K=%d live at once)", c[r+" over-K"], f.peaks[lock], chaosSemSize)
			default:
				fmt.Fprintf(&b, ", overlaps %d, token inversions %d", c[r+" overlaps"], c[r+" inversions"])
			}
			fmt.Fprintf(&b, ", orphans %d", c[lock+" orphans"])
			if len(chaosRecipes[lock]) > 1 {
				fmt.Fprintf(&b, " (lock %s)", lock)
			}
			lines = append(lines, b.String())
		}
	}
	return lines
}

// chaosLossReasons name the ways a lease is lost, in the figures' order.
var chaosLossReasons = []string{"lease-expired", "session-expired", "suspended", "closed", "other"}

func lossReason(err error) string {
	switch {
	case errors.Is(err, zklock.ErrLeaseExpired):
		return "lease-expired"
	case errors.Is(err, zklock.ErrSessionExpired):
		return "session-expired"
	case errors.Is(err, zklock.ErrConnectionSuspended):
		return "suspended"
	case errors.Is(err, zklock.ErrClientClosed):
		return "closed"
	}
	return "other"
}

// check runs the checker over one phase's holds and faults.
func (f *chaosFigures) check(t *testing.T, holds []chaosHold, faults []chaosFault, origin time.Time) {
	t.Helper()
	for _, fl := range faults {
		f.faults[fl.kind]++
		d, ok := recoveryAfter(fl, holds)
		if !ok {
			who := "anyone"
			if fl.victim >= 0 {
				who = fmt.Sprintf("client %d", fl.victim)
			}
			t.Errorf("chaos: no progress: %s never held a lock after the %s that healed at +%v",
				who, fl.kind, fl.healed.Sub(origin).Round(time.Millisecond))
			continue
		}
		if d > f.recovery {
			f.recovery, f.recoveryKind = d, fl.kind
		}
		if d > chaosRecovery {
			t.Errorf("chaos: no progress for %v after the %s that healed at +%v", d.Round(time.Millisecond),
				fl.kind, fl.healed.Sub(origin).Round(time.Millisecond))
		}
		for _, lock := range chaosLocks {
			if d, ok := lockAfter(fl, holds, lock); !ok || d > chaosRecovery {
				t.Errorf("chaos: no progress: nobody held the %s within %v after the %s that healed at +%v",
					lock, chaosRecovery, fl.kind, fl.healed.Sub(origin).Round(time.Millisecond))
			}
		}
		if fl.kind == "move" {
			f.checkMove(t, fl, holds, origin)
		}
		if d, ok := writeAfter(fl, holds); !ok || d > chaosRecovery {
			t.Errorf("chaos: writer starved: nobody held the rw's write side within %v after the %s that healed at +%v",
				chaosRecovery, fl.kind, fl.healed.Sub(origin).Round(time.Millisecond))
		} else {
			f.writeProgress = max(f.writeProgress, d)
		}
		if d > 3*time.Second {
			who := "the servers"
			if fl.victim >= 0 {
				who = fmt.Sprintf("client %d", fl.victim)
			}
			t.Logf("chaos: slow recovery: %s of %s from +%v to +%v, next hold %v later",
				fl.kind, who, fl.at.Sub(origin).Round(time.Millisecond), fl.healed.Sub(origin).Round(time.Millisecond),
				d.Round(time.Millisecond))
		}
	}
	var slow []chaosHold // writes of the RWMutex that waited over 5s
	for _, h := range holds {
		f.counts[h.recipe]++
		f.counts[h.policy]++
		f.waits[h.recipe] = max(f.waits[h.recipe], h.wait)
		if h.lock == "rw" && h.write && h.wait > 5*time.Second {
			slow = append(slow, h)
		}
		if h.bridged {
			f.counts[h.recipe+" bridged"]++
		}
		if strings.HasPrefix(h.recipe, "sem-") && h.acquireN {
			f.counts[h.recipe+" leases by acquireN"]++
		}
		switch {
		case h.stillborn:
			f.counts["stillborn"]++
			f.counts[h.recipe+" stillborn"]++
			f.counts[h.policy+" stillborn"]++
		case h.lost != nil:
			f.counts["lost"]++
			f.counts[h.recipe+" lost"]++
			f.counts[h.policy+" lost"]++
			f.counts[h.policy+" lost "+lossReason(h.lost)]++
			if !h.woke.IsZero() {
				f.wakeLag = max(f.wakeLag, h.woke.Sub(h.end))
			}
		}
	}
	sort.Slice(slow, func(i, j int) bool { return slow[i].wait > slow[j].wait })
	for i, h := range slow {
		if i == 3 {
			t.Logf("chaos: ... %d write acquires of the RWMutex waited over 5s", len(slow))
			break
		}
		chaosSlowWrite(t, h, holds, faults, origin)
	}

	// How the shared leases shared their nodes: a figure, not an
	// assertion (whether two reads met on one node is the scheduler's).
	shared := map[string][]chaosHold{}
	for _, h := range holds {
		if h.recipe == "shared read" && !h.stillborn {
			shared[h.node] = append(shared[h.node], h)
		}
	}
	f.counts["shared read nodes"] += len(shared)
	for _, on := range shared {
		_, peak := checkOverK(on, func(time.Time) int { return len(on) })
		f.peaks["shared read"] = max(f.peaks["shared read"], peak)
	}
	for _, lock := range chaosLocks {
		var mine []chaosHold
		for _, h := range holds {
			if h.lock == lock && !h.stillborn {
				mine = append(mine, h)
			}
		}
		switch {
		case strings.HasPrefix(lock, "sem-"):
			f.checkSemaphore(t, lock, mine)
		case lock == "multi":
			// A MultiLock's hold is a hold on each of its paths.
			for _, p := range chaosMultiPaths {
				f.checkExclusive(t, "multi path "+p, chaosOnPath(mine, p))
			}
		default:
			f.checkExclusive(t, lock, mine)
		}
	}
}

// checkMove checks that every client held a lock again after the move fl
// (everyClientAfter), and counts the leases live when it began.
func (f *chaosFigures) checkMove(t *testing.T, fl chaosFault, holds []chaosHold, origin time.Time) {
	t.Helper()
	if worst, missing := everyClientAfter(fl, holds); len(missing) > 0 || worst > chaosRecovery {
		t.Errorf("chaos: no progress after the %s that healed at +%v: client(s) %v never held a lock again, "+
			"the others within %v (at most %v)", fl.kind, fl.healed.Sub(origin).Round(time.Millisecond), missing,
			worst.Round(time.Millisecond), chaosRecovery)
	} else {
		f.moveRecovery = max(f.moveRecovery, worst)
	}
	for _, h := range holds {
		if !h.stillborn && !h.start.After(fl.at) && h.end.After(fl.at) {
			f.movedLive++
			if h.lost != nil {
				f.movedLost++
			}
		}
	}
}

// chaosSlowWrite logs a write acquire of the RWMutex that took long, with
// the faults that overlapped its wait: a figure, not an assertion (the
// assertions are writeAfter's progress after every fault, and no write
// acquire waiting 30s).
func chaosSlowWrite(t *testing.T, h chaosHold, holds []chaosHold, faults []chaosFault, origin time.Time) {
	t.Helper()
	from := h.start.Add(-h.wait)
	// The holds of the RWMutex during the wait, the longest first.
	var held []chaosHold
	for _, o := range holds {
		if o.lock == "rw" && !o.stillborn && o.start.Before(h.start) && o.end.After(from) {
			held = append(held, o)
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].end.Sub(held[i].start) > held[j].end.Sub(held[j].start) })
	var longest []string
	for i := range held[:min(3, len(held))] {
		longest = append(longest, held[i].describe())
	}
	var during []string
	for _, fl := range faults {
		if fl.at.Before(h.start) && fl.healed.After(from.Add(-chaosSession)) {
			who := "servers"
			if fl.victim >= 0 {
				who = fmt.Sprintf("client %d", fl.victim)
			}
			during = append(during, fmt.Sprintf("%s of %s +%v..+%v", fl.kind, who,
				fl.at.Sub(origin).Round(time.Millisecond), fl.healed.Sub(origin).Round(time.Millisecond)))
		}
	}
	t.Logf("chaos: slow write: client %d waited %v, from +%v to +%v (%s); faults then: %s; %d holds meanwhile, "+
		"the longest: %s", h.client, h.wait.Round(time.Millisecond), from.Sub(origin).Round(time.Millisecond),
		h.start.Sub(origin).Round(time.Millisecond), h.node, strings.Join(during, "; "), len(held),
		strings.Join(longest, "; "))
}

// checkExclusive checks the holds of one lock (or one path of lock
// "multi") with checkHolds, and counts what it finds against the recipes
// of both holds of each conflict.
func (f *chaosFigures) checkExclusive(t *testing.T, lock string, mine []chaosHold) {
	t.Helper()
	overlaps, inversions := checkHolds(mine)
	for i, m := range overlaps {
		if i == 5 {
			t.Errorf("chaos: %s: ... %d overlaps in all", lock, len(overlaps))
			break
		}
		t.Errorf("chaos: %s: overlap: %s", lock, m)
	}
	for i, m := range inversions {
		if i == 5 {
			t.Errorf("chaos: %s: ... %d token inversions in all", lock, len(inversions))
			break
		}
		t.Errorf("chaos: %s: token inversion: %s", lock, m)
	}
	f.overlaps += len(overlaps)
	f.inversions += len(inversions)
	for _, o := range overlaps {
		for _, r := range o.recipes() {
			f.counts[r+" overlaps"]++
		}
	}
	for _, o := range inversions {
		for _, r := range o.recipes() {
			f.counts[r+" inversions"]++
		}
	}

	// The same holds, a lost one ending when its worker woke on Done
	// rather than at its ValidUntil: what a holder that watches Done alone
	// (as Do's context does) would have overlapped. Reported, not asserted:
	// the lease's contract is its ValidUntil (Err says so from then on),
	// and a wake-up includes the scheduler's delay.
	lateOverlaps, _ := checkHolds(chaosLate(mine))
	for i, m := range lateOverlaps {
		if i == 3 {
			break
		}
		t.Logf("chaos: %s: overlap by Done alone: %s", lock, m)
	}
	f.doneOverlaps += len(lateOverlaps)
}

// checkSemaphore checks the holds of one semaphore with checkOverK.
func (f *chaosFigures) checkSemaphore(t *testing.T, lock string, mine []chaosHold) {
	t.Helper()
	k := func(time.Time) int { return chaosSemSize }
	if g, ok := f.grown[lock]; ok {
		f.counts[lock+" grown"]++
		k = func(at time.Time) int {
			if at.Before(g) {
				return chaosSemSize
			}
			return chaosSemSize + 1
		}
	}
	over, peak := checkOverK(mine, k)
	for i, m := range over {
		if i == 5 {
			t.Errorf("chaos: %s: ... %d holds beyond K in all", lock, len(over))
			break
		}
		t.Errorf("chaos: %s: %s", lock, m)
	}
	f.overK += len(over)
	f.counts[lock+" over-K"] += len(over)
	f.peaks[lock] = max(f.peaks[lock], peak)
	lateOver, _ := checkOverK(chaosLate(mine), k)
	for i, m := range lateOver {
		if i == 3 {
			break
		}
		t.Logf("chaos: %s: by Done alone: %s", lock, m)
	}
	f.doneOverlaps += len(lateOver)
}

// chaosOnPath returns the holds of lock "multi" that cover path p.
func chaosOnPath(holds []chaosHold, p string) []chaosHold {
	var on []chaosHold
	for _, h := range holds {
		if slices.Contains(h.paths, p) {
			on = append(on, h)
		}
	}
	return on
}

// chaosLate returns holds with each lost one ending when its worker woke on
// Done, if that was after its ValidUntil.
func chaosLate(holds []chaosHold) []chaosHold {
	late := slices.Clone(holds)
	for i := range late {
		if late[i].woke.After(late[i].end) {
			late[i].end = late[i].woke
		}
	}
	return late
}

// chaosConflict is what the checker found wrong between two holds: an
// overlap, or a token inversion (then earlier is the hold whose token the
// later one's should have exceeded).
type chaosConflict struct {
	msg            string
	later, earlier *chaosHold
}

func (c chaosConflict) String() string { return c.msg }

// recipes are the recipes of the two holds, each once.
func (c chaosConflict) recipes() []string {
	if c.later.recipe == c.earlier.recipe {
		return []string{c.later.recipe}
	}
	return []string{c.later.recipe, c.earlier.recipe}
}

// describe says what a hold was, for the checker's messages.
func (h *chaosHold) describe() string {
	kind := h.recipe
	switch {
	case h.lock == "election":
		kind = "leadership"
	case h.recipe == "":
		kind = "read"
		if h.write {
			kind = "write"
		}
	case h.bridged:
		kind += " (held from its write lease)"
	}
	if len(h.paths) > 0 {
		kind += " of " + strings.Join(h.paths, ",")
	}
	reason := "released"
	if h.lost != nil {
		reason = h.lost.Error()
	}
	return fmt.Sprintf("%s by client %d (%s), token %#x, held %v from +%v (%s), %s", kind, h.client, h.policy,
		h.token, h.end.Sub(h.start).Round(time.Microsecond), h.start.Sub(chaosEpoch).Round(time.Microsecond), reason, h.node)
}

// checkOverK checks the holds of one semaphore of k(t) leases at time t (k
// never decreases): never more than k live at once. A hold that ends at the
// moment another starts is not live with it. It returns a message for
// every hold that began while k others were live, and the most holds live
// at once.
func checkOverK(holds []chaosHold, k func(time.Time) int) (over []string, peak int) {
	type event struct {
		at    time.Time
		start bool
		h     *chaosHold
	}
	events := make([]event, 0, 2*len(holds))
	for i := range holds {
		events = append(events, event{holds[i].start, true, &holds[i]}, event{holds[i].end, false, &holds[i]})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if !events[i].at.Equal(events[j].at) {
			return events[i].at.Before(events[j].at)
		}
		return !events[i].start && events[j].start // ends first
	})
	live := map[*chaosHold]bool{}
	for _, e := range events {
		if !e.start {
			delete(live, e.h)
			continue
		}
		live[e.h] = true
		peak = max(peak, len(live))
		if k := k(e.at); len(live) > k {
			var others []string
			for h := range live {
				if h != e.h {
					others = append(others, h.describe())
				}
			}
			sort.Strings(others)
			over = append(over, fmt.Sprintf("%d leases of %d live: %s began while live were: %s",
				len(live), k, e.h.describe(), strings.Join(others, "; ")))
		}
	}
	return over, peak
}

// checkHolds checks the holds of one lock: no write overlaps anything, no
// read overlaps a write, and each token is greater than the token of every
// conflicting hold that began before it. A sweep in order of start finds
// every overlapping pair at the later of the two.
func checkHolds(holds []chaosHold) (overlaps, inversions []chaosConflict) {
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	var lastAll, lastWrite *chaosHold // the earlier hold that ends last
	var topAll, topWrite *chaosHold   // the earlier hold with the greatest token
	for i := range holds {
		h := &holds[i]
		ending, top := lastWrite, topWrite
		if h.write {
			ending, top = lastAll, topAll
		}
		if ending != nil && h.start.Before(ending.end) {
			overlaps = append(overlaps, chaosConflict{fmt.Sprintf("%s began %v before the end of %s",
				h.describe(), ending.end.Sub(h.start), ending.describe()), h, ending})
		}
		if top != nil && h.token <= top.token {
			inversions = append(inversions, chaosConflict{fmt.Sprintf("%s after %s", h.describe(), top.describe()), h, top})
		}
		if lastAll == nil || h.end.After(lastAll.end) {
			lastAll = h
		}
		if topAll == nil || h.token > topAll.token {
			topAll = h
		}
		if h.write {
			if lastWrite == nil || h.end.After(lastWrite.end) {
				lastWrite = h
			}
			if topWrite == nil || h.token > topWrite.token {
				topWrite = h
			}
		}
	}
	return overlaps, inversions
}

// chaosReport is one report of the observer: who leads, and when the
// observer received it.
type chaosReport struct {
	zklock.Participant
	at time.Time
}

// checkReports runs the observer's checker over its reports.
func (f *chaosFigures) checkReports(t *testing.T, reports []chaosReport, holds []chaosHold, origin time.Time) {
	t.Helper()
	candidates := map[string]bool{}
	for i := range chaosCandidates {
		candidates[string(chaosIdentity(i))] = true
	}
	bad := checkReports(reports, candidates, holds, origin)
	for i, m := range bad {
		if i == 5 {
			t.Errorf("chaos: observer: ... %d bad reports in all", len(bad))
			break
		}
		t.Errorf("chaos: observer: %s", m)
	}
	if len(reports) == 0 {
		t.Errorf("chaos: observer: no report at all")
	}
	f.reports += len(reports)
	for _, r := range reports {
		if r.Node == "" {
			f.reportedNobody++
		} else {
			f.reportedLeaders++
		}
	}
	f.badReports += len(bad)
}

// checkReports checks what an Election.Observe reported, in order, against
// the leaderships that holds recorded:
//
//   - never the same report twice in a row (a leader, or nobody);
//   - every leader one of the candidates, named as leading;
//   - every leader's node after the previous leader's: the lowest node
//     leads, so a leader's node comes after every node that led before it,
//     whatever the observer missed in between, as long as its view of the
//     server never goes back. One session's never does, even when it moves
//     to another server (the server refuses a client that has seen a later
//     zxid), and a new session is created by a write, which a server
//     answers only once it has applied everything before it;
//   - no leader reported before every leadership of a node ahead of it had
//     ended: the observer read the leader after every node ahead of it was
//     deleted, and a leadership ends (Release called, or the lease's
//     ValidUntil, which comes before its session can expire) before its
//     node is deleted. A report of a candidate still queued behind the
//     leader fails here.
//
// Sequence numbers order the nodes: on the election's persistent path
// ZooKeeper numbers them in creation order.
func checkReports(reports []chaosReport, candidates map[string]bool, holds []chaosHold, origin time.Time) []string {
	// ahead[k]: the latest end among the leaderships of the k lowest nodes.
	type led struct {
		seq int64
		h   chaosHold
	}
	var ls []led
	for _, h := range holds {
		if seq, ok := chaosSeq(h.node); ok && h.lock == "election" {
			ls = append(ls, led{seq, h})
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].seq < ls[j].seq })
	ahead := make([]*chaosHold, len(ls))
	for k := range ls {
		if k > 0 {
			ahead[k] = ahead[k-1]
		}
		if ahead[k] == nil || ls[k].h.end.After(ahead[k].end) {
			ahead[k] = &ls[k].h
		}
	}

	var (
		bad  []string
		last = int64(-1)
	)
	for i, r := range reports {
		if i > 0 && r.Node == reports[i-1].Node {
			who := r.Node
			if who == "" {
				who = "nobody"
			}
			bad = append(bad, fmt.Sprintf("report %d repeats report %d: %s", i, i-1, who))
		}
		if r.Node == "" {
			continue
		}
		if !candidates[string(r.Data)] || !r.Holder || r.Kind != zklock.KindLatch {
			bad = append(bad, fmt.Sprintf("report %d: %s (%q, holder %v, %v) is not a candidate leading",
				i, r.Node, r.Data, r.Holder, r.Kind))
		}
		seq, ok := chaosSeq(r.Node)
		if !ok {
			bad = append(bad, fmt.Sprintf("report %d: %s has no sequence number", i, r.Node))
			continue
		}
		if seq <= last {
			bad = append(bad, fmt.Sprintf("report %d: leader %s after a leader with sequence %d", i, r.Node, last))
		}
		last = seq
		// The leaderships of the nodes before this one.
		if k := sort.Search(len(ls), func(k int) bool { return ls[k].seq >= seq }); k > 0 && ahead[k-1].end.After(r.at) {
			h := ahead[k-1]
			bad = append(bad, fmt.Sprintf("report %d at +%v: leader %s while %s of client %d, ahead of it, led until +%v",
				i, r.at.Sub(origin).Round(time.Microsecond), base(r.Node), base(h.node), h.client,
				h.end.Sub(origin).Round(time.Microsecond)))
		}
	}
	return bad
}

// chaosSeq returns the sequence number ZooKeeper appended to node.
func chaosSeq(node string) (int64, bool) {
	if len(node) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(node[len(node)-10:], 10, 64)
	return n, err == nil && n >= 0
}

// chaosIdentity is the node data of client i's candidate.
func chaosIdentity(i int) []byte { return fmt.Appendf(nil, "client-%d", i) }

// chaosPersistent creates path as a persistent node, and its missing
// parents as containers, as zklock would.
func chaosPersistent(conn *zk.Conn, path string) error {
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		if _, err := conn.CreateContainer(path[:i], nil, zk.FlagContainer, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", path[:i], err)
		}
	}
	if _, err := conn.Create(path, nil, 0, acl); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

var chaosSessionRE = regexp.MustCompile(`^\s+0x[0-9a-f]+\s*$`)

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// chaosDigestMismatches reads each server's zk_digest_mismatches_count
// (mntr): "server 1 0, server 2 17, ...", "?" for a server that did not
// answer.
func chaosDigestMismatches(ctx context.Context, nodes []chaosNode) string {
	var parts []string
	for _, n := range nodes {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := n.fourLetter(qctx, "mntr")
		cancel()
		count := "?"
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "zk_digest_mismatches_count"); ok && err == nil {
				count = strings.TrimSpace(v)
			}
		}
		parts = append(parts, n.name+" "+count)
	}
	return strings.Join(parts, ", ")
}

// chaosWatches adds up the watches every server holds (wchp: by path).
func chaosWatches(ctx context.Context, nodes []chaosNode) (int, error) {
	total := 0
	for _, n := range nodes {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := n.fourLetter(qctx, "wchp")
		cancel()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "/"):
			case chaosSessionRE.MatchString(line):
				total++ // a session watching the path above
			case strings.TrimSpace(line) != "":
				return 0, fmt.Errorf("%s: wchp said %q", n.name, line)
			}
		}
	}
	return total, nil
}

// chaosWatchList is every server's wchp, for the log of a leaked watch:
// which path, and which session watches it.
func chaosWatchList(ctx context.Context, nodes []chaosNode) string {
	var b strings.Builder
	for _, n := range nodes {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := n.fourLetter(qctx, "wchp")
		cancel()
		if err != nil {
			out = err.Error()
		}
		fmt.Fprintf(&b, "\n%s:\n%s", n.name, strings.TrimSpace(out))
	}
	return b.String()
}

// chaosGrow writes n into the SharedCount at path, retrying for up to
// chaosRecovery, and returns when it first tried.
func chaosGrow(ctx context.Context, rec *chaosRecorder, conn *zk.Conn, path string, n int) time.Time {
	data := binary.BigEndian.AppendUint32(nil, uint32(n))
	first := time.Now()
	var err error
	for time.Since(first) < chaosRecovery {
		if _, err = conn.Set(path, data, -1); err == nil {
			return first
		}
		if !chaosSleep(ctx, 100*time.Millisecond) {
			return first
		}
	}
	rec.fail("grow the SharedCount %s to %d: %v", path, n, err)
	return first
}

// chaosLeftovers waits up to chaosDrain for path to have no children, and
// returns those it still has.
func chaosLeftovers(ctx context.Context, t *testing.T, conn *zk.Conn, path string) []string {
	var kids []string
	chaosWait(ctx, chaosDrain, func() bool {
		kids = chaosChildren(t, conn, path)
		return len(kids) == 0
	})
	return kids
}

func chaosChildren(t *testing.T, conn *zk.Conn, path string) []string {
	t.Helper()
	_, _ = conn.Sync(path) // read what the leader has
	kids, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	return withoutRegistry(t, conn, path, kids)
}

// chaosWait polls cond every 20ms until it holds or d passes.
func chaosWait(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) || !chaosSleep(ctx, 20*time.Millisecond) {
			return false
		}
	}
}

// chaosSleep waits d; it reports false if ctx ended first.
func chaosSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

type chaosQuietLogger struct{}

func (chaosQuietLogger) Printf(string, ...any) {}

// chaosLockProgressed reports whether lock was held after every fault
// recorded so far healed.
func chaosLockProgressed(rec *chaosRecorder, lock string) bool {
	holds, faults := rec.snapshot()
	for _, f := range faults {
		if _, ok := lockAfter(f, holds, lock); !ok {
			return false
		}
	}
	return true
}

// chaosWatchdog (ZKLOCK_CHAOS_DEBUG) describes a lock that nobody has held
// for five seconds: its queue, with each node's owner session, and each
// client's session and state.
func chaosWatchdog(ctx context.Context, t *testing.T, observer *zk.Conn, rec *chaosRecorder, clients []*chaosClient, paths map[string][]string) {
	for chaosSleep(ctx, time.Second) {
		holds, _ := rec.snapshot()
		last := map[string]time.Time{}
		for _, h := range holds {
			if h.start.After(last[h.lock]) {
				last[h.lock] = h.start
			}
		}
		for lock, ps := range paths {
			if time.Since(last[lock]) < 5*time.Second {
				continue
			}
			t.Logf("chaos: %s not held for %v%s", lock, time.Since(last[lock]).Round(time.Millisecond), chaosQueues(observer, clients, ps))
		}
	}
}

// chaosQueues describes the queues of paths as they stand, each node with
// its owner, and the clients' sessions and states: who a stalled lock
// waits for.
func chaosQueues(observer *zk.Conn, clients []*chaosClient, paths []string) string {
	var b strings.Builder
	for _, path := range paths {
		fmt.Fprintf(&b, "\n\tqueue of %s:", path)
		kids, _, err := observer.Children(path)
		slices.Sort(kids)
		sort.Slice(kids, func(i, j int) bool { return kids[i][max(0, len(kids[i])-10):] < kids[j][max(0, len(kids[j])-10):] })
		for _, k := range kids {
			_, st, err := observer.Get(path + "/" + k)
			owner := int64(0)
			if err == nil {
				owner = st.EphemeralOwner
			}
			fmt.Fprintf(&b, "\n\t%s owner %#x (%v)", k, owner, err)
		}
		fmt.Fprintf(&b, "\n\tchildren err %v", err)
	}
	fmt.Fprintf(&b, "\n\tclients:")
	for _, cl := range clients {
		fmt.Fprintf(&b, "\n\tclient %d session %#x state %v held %d faulted %v partitioned %v",
			cl.i, cl.c.SessionID(), cl.c.Conn().State(), cl.held.Load(), cl.busy.Load(), cl.f.Partitioned())
	}
	return b.String()
}

// The checker must fail on what it exists to catch.
func TestChaosChecker(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return chaosEpoch.Add(time.Duration(ms) * time.Millisecond) }
	w := func(from, to int, token int64) chaosHold {
		return chaosHold{write: true, start: at(from), end: at(to), token: token}
	}
	r := func(from, to int, token int64) chaosHold {
		return chaosHold{start: at(from), end: at(to), token: token}
	}
	lost := func(h chaosHold) chaosHold {
		h.lost = zklock.ErrLeaseExpired
		return h
	}
	bridged := func(h chaosHold) chaosHold {
		h.recipe, h.bridged = "downgrade", true
		return h
	}
	shared := func(h chaosHold) chaosHold {
		h.recipe, h.node = "shared read", "/rw/_c_read-0000000002"
		return h
	}
	for name, tc := range map[string]struct {
		holds                []chaosHold
		overlaps, inversions int
	}{
		"writes in turn":          {[]chaosHold{w(0, 10, 1), w(10, 20, 2), w(25, 30, 5)}, 0, 0},
		"writes overlap":          {[]chaosHold{w(0, 10, 1), w(9, 20, 2)}, 1, 0},
		"write inside a write":    {[]chaosHold{w(0, 100, 1), w(10, 20, 2), w(30, 40, 3)}, 2, 0},
		"readers share":           {[]chaosHold{r(0, 10, 1), r(5, 15, 2), r(1, 3, 3)}, 0, 0},
		"read overlaps a write":   {[]chaosHold{w(0, 10, 1), r(5, 15, 2)}, 1, 0},
		"write overlaps a read":   {[]chaosHold{r(0, 10, 1), r(2, 4, 2), w(5, 15, 3)}, 1, 0},
		"write tokens go back":    {[]chaosHold{w(0, 10, 2), w(10, 20, 1)}, 0, 1},
		"write behind a read":     {[]chaosHold{r(0, 10, 5), w(10, 20, 3)}, 0, 1},
		"read behind a write":     {[]chaosHold{w(0, 10, 5), r(10, 20, 3)}, 0, 1},
		"readers in any order":    {[]chaosHold{r(0, 10, 5), r(10, 20, 3), w(20, 30, 6)}, 0, 0},
		"equal tokens":            {[]chaosHold{w(0, 10, 4), w(10, 20, 4)}, 0, 1},
		"end at the next's start": {[]chaosHold{w(0, 10, 1), r(10, 20, 2), r(10, 20, 3), w(20, 30, 4)}, 0, 0},
		// A lost lease's hold ends at its ValidUntil, which the worker
		// records as its end: a successor before it overlaps.
		"successor before a lost lease's ValidUntil": {[]chaosHold{lost(w(0, 10, 1)), w(8, 20, 2)}, 1, 0},
		"successor after a lost lease's ValidUntil":  {[]chaosHold{lost(w(0, 10, 1)), w(11, 20, 2)}, 0, 0},
		// A downgrade's read lease, held from its write lease's end: a
		// writer in between overlaps it, readers do not.
		"a writer slips into a downgrade": {[]chaosHold{w(0, 10, 1), bridged(r(10, 20, 2)), w(12, 15, 3)}, 1, 0},
		"readers join a downgrade":        {[]chaosHold{w(0, 10, 1), bridged(r(10, 20, 2)), r(12, 15, 3), w(20, 25, 4)}, 0, 0},
		// Shared leases: several holds of one node (one token), ending
		// one by one; a writer must wait for the last.
		"a writer after the last shared lease": {[]chaosHold{shared(r(0, 10, 2)), shared(r(2, 14, 2)), shared(r(3, 5, 2)),
			w(14, 20, 3)}, 0, 0},
		"a writer before the last shared lease": {[]chaosHold{shared(r(0, 10, 2)), shared(r(2, 14, 2)), w(12, 20, 3)}, 1, 0},
		"a shared lease joins during a write":   {[]chaosHold{w(0, 10, 1), shared(r(10, 20, 2)), shared(r(9, 12, 2))}, 1, 0},
	} {
		t.Run(name, func(t *testing.T) {
			overlaps, inversions := checkHolds(slices.Clone(tc.holds))
			require.Len(t, overlaps, tc.overlaps, "overlaps: %v", overlaps)
			require.Len(t, inversions, tc.inversions, "inversions: %v", inversions)
		})
	}

	// A MultiLock's hold is a hold on each of its paths: {a,b} and {b,c}
	// overlap on b only.
	on := func(h chaosHold, paths ...string) chaosHold {
		h.paths = paths
		return h
	}
	multi := []chaosHold{on(w(0, 10, 1), "a", "b"), on(w(5, 15, 2), "b", "c"), on(w(5, 8, 3), "c"), on(w(10, 20, 4), "a")}
	for p, want := range map[string]int{"a": 0, "b": 1, "c": 1} {
		overlaps, _ := checkHolds(chaosOnPath(multi, p))
		require.Len(t, overlaps, want, "path %s: overlaps: %v", p, overlaps)
	}

	// Writers must progress after a fault: readers' holds, shared or not,
	// or a write that was stillborn, do not count.
	fault := chaosFault{healed: at(10)}
	after := []chaosHold{
		{lock: "rw", recipe: "shared read", start: at(11), end: at(12)},
		{lock: "rw", recipe: "write", write: true, start: at(5), end: at(9)},
		{lock: "rw", recipe: "write", write: true, start: at(12), end: at(12), stillborn: true},
		{lock: "mutex", recipe: "mutex", write: true, start: at(13), end: at(14)},
	}
	_, ok := writeAfter(fault, after)
	require.False(t, ok, "only readers after the fault")
	d, ok := writeAfter(fault, append(after, chaosHold{lock: "rw", recipe: "write", write: true, start: at(15), end: at(16)}))
	require.True(t, ok)
	require.Equal(t, 5*time.Millisecond, d)

	// After a move, every client must hold a lock again; after any other
	// fault, its victim (recoveryAfter).
	move := chaosFault{kind: "move", victim: -1, healed: at(10)}
	var again []chaosHold
	for i := range chaosClients - 1 {
		again = append(again, chaosHold{lock: "mutex", client: i, start: at(11 + i), end: at(30)})
	}
	again = append(again, chaosHold{lock: "mutex", client: chaosClients - 1, start: at(5), end: at(9)}, // before
		chaosHold{lock: "mutex", client: chaosClients - 1, start: at(12), end: at(12), stillborn: true})
	worst, missing := everyClientAfter(move, again)
	require.Equal(t, []int{chaosClients - 1}, missing, "a client that held nothing after the move")
	require.Equal(t, time.Duration(chaosClients-1)*time.Millisecond, worst)
	worst, missing = everyClientAfter(move, append(again, chaosHold{lock: "rw", client: chaosClients - 1, start: at(40), end: at(41)}))
	require.Empty(t, missing)
	require.Equal(t, 30*time.Millisecond, worst)
	_, missing = everyClientAfter(chaosFault{kind: "pause", victim: -1, healed: at(10)}, nil)
	require.Empty(t, missing, "only a move needs every client")

	// The semaphores' checker: never more than K live at once.
	s := func(from, to int) chaosHold { return chaosHold{recipe: "sem-zklock", start: at(from), end: at(to)} }
	for name, tc := range map[string]struct {
		holds      []chaosHold
		over, peak int
		grow       int // ms at which K grows from 2 to 3, if > 0
	}{
		"K at once":                 {[]chaosHold{s(0, 10), s(5, 15), s(10, 20), s(15, 25)}, 0, 2, 0},
		"K+1 at once":               {[]chaosHold{s(0, 10), s(5, 15), s(9, 20)}, 1, 3, 0},
		"end at the next's start":   {[]chaosHold{s(0, 10), s(0, 10), s(10, 20), s(10, 20)}, 0, 2, 0},
		"AcquireN beyond K":         {[]chaosHold{s(0, 10), s(5, 15), s(5, 15)}, 1, 3, 0},
		"a lost lease's ValidUntil": {[]chaosHold{lost(s(0, 10)), s(2, 12), s(9, 20)}, 1, 3, 0},
		"one at a time":             {[]chaosHold{s(0, 10)}, 0, 1, 0},
		"K+1 once K grew":           {[]chaosHold{s(0, 10), s(5, 15), s(9, 20)}, 0, 3, 8},
		"K+1 before K grew":         {[]chaosHold{s(0, 10), s(5, 15), s(9, 20)}, 1, 3, 10},
	} {
		t.Run("semaphore "+name, func(t *testing.T) {
			over, peak := checkOverK(slices.Clone(tc.holds), func(at time.Time) int {
				if tc.grow > 0 && !at.Before(chaosEpoch.Add(time.Duration(tc.grow)*time.Millisecond)) {
					return 3
				}
				return 2
			})
			require.Len(t, over, tc.over, "over K: %v", over)
			require.Equal(t, tc.peak, peak)
		})
	}

	// The observer's checker.
	node := func(seq int) string {
		return fmt.Sprintf("/e/_c_0f4bd1a2-8c53-4c0e-9a29-5d1f3b7e6a10-latch-%010d", seq)
	}
	leader := func(seq, who, ms int) chaosReport {
		return chaosReport{zklock.Participant{Node: node(seq), Data: chaosIdentity(who), Holder: true,
			Kind: zklock.KindLatch}, at(ms)}
	}
	nobody := func(ms int) chaosReport { return chaosReport{at: at(ms)} }
	led := func(seq, from, to int) chaosHold {
		return chaosHold{lock: "election", write: true, node: node(seq), start: at(from), end: at(to)}
	}
	lr := func(seq, from, to int) chaosHold { // a lost lease's leadership, ending at its ValidUntil
		return lost(led(seq, from, to))
	}
	candidates := map[string]bool{string(chaosIdentity(0)): true, string(chaosIdentity(1)): true}
	for name, tc := range map[string]struct {
		reports []chaosReport
		holds   []chaosHold
		bad     int
	}{
		"in order": {[]chaosReport{nobody(0), leader(1, 0, 1), leader(3, 1, 12), nobody(30), leader(7, 0, 40)},
			[]chaosHold{led(1, 2, 10), led(3, 11, 20), led(7, 41, 50)}, 0},
		"leaders missed in between": {[]chaosReport{leader(1, 0, 0), leader(40, 1, 100)},
			[]chaosHold{led(1, 0, 10), led(20, 20, 30), lr(30, 40, 50)}, 0},
		"a leader twice in a row":   {[]chaosReport{leader(1, 0, 0), leader(1, 0, 5)}, nil, 2},
		"nobody twice in a row":     {[]chaosReport{leader(1, 0, 0), nobody(5), nobody(6)}, nil, 1},
		"an earlier leader":         {[]chaosReport{leader(5, 0, 0), leader(4, 1, 10)}, nil, 1},
		"an earlier one after none": {[]chaosReport{leader(5, 0, 0), nobody(5), leader(3, 1, 10)}, nil, 1},
		"the same one after none":   {[]chaosReport{leader(5, 0, 0), nobody(5), leader(5, 0, 10)}, nil, 1},
		"not a candidate":           {[]chaosReport{leader(1, 2, 0)}, nil, 1},
		"a candidate not as leader": {[]chaosReport{{zklock.Participant{Node: node(1), Data: chaosIdentity(0),
			Kind: zklock.KindLatch}, at(0)}}, nil, 1},
		"a node without a sequence": {[]chaosReport{{zklock.Participant{Node: "/e/x", Data: chaosIdentity(0),
			Holder: true, Kind: zklock.KindLatch}, at(0)}}, nil, 1},
		// The candidate reported still had one ahead of it leading.
		"a leader reported while the one ahead leads": {[]chaosReport{leader(2, 1, 5)},
			[]chaosHold{led(1, 0, 10), led(2, 11, 20)}, 1},
		"a leader reported before a lost lease's ValidUntil": {[]chaosReport{leader(2, 1, 5)},
			[]chaosHold{lr(1, 0, 10)}, 1},
		"a queued candidate reported": {[]chaosReport{leader(1, 0, 1), leader(3, 1, 5)},
			[]chaosHold{led(1, 0, 10), led(2, 11, 20), led(3, 21, 30)}, 1},
	} {
		t.Run("observer "+name, func(t *testing.T) {
			bad := checkReports(tc.reports, candidates, tc.holds, chaosEpoch)
			require.Len(t, bad, tc.bad, "bad reports: %v", bad)
		})
	}
}

// The ensemble's pause goes past syncLimit on 3.9.3 and later only: the
// version read from srvr decides, and a version unread counts as older.
func TestChaosParseVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		srvr string
		want [3]int
		ok   bool
		past bool
	}{
		{"Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nLatency min/avg/max: 0/0.0/0\n", [3]int{3, 8, 0}, true, false},
		{"Zookeeper version: 3.9.3-${mvngit.commit.id}, built on 2026-03-08 16:19 UTC\n", [3]int{3, 9, 3}, true, true},
		{"Zookeeper version: 3.9.2-e454e8c7283100c7caec6dcae2bc82aaecb63023, built on 2024-02-12 20:59 UTC\n", [3]int{3, 9, 2}, true, false},
		{"Zookeeper version: 3.10.0, built on x\n", [3]int{3, 10, 0}, true, true},
		{"Zookeeper version: 4.0.0-beta\n", [3]int{4, 0, 0}, true, true},
		{"This ZooKeeper instance is not currently serving requests\n", [3]int{}, false, false},
		{"Zookeeper version: 3.9\n", [3]int{}, false, false},
	} {
		v, ok := chaosParseVersion(tc.srvr)
		require.Equal(t, tc.ok, ok, "%q", tc.srvr)
		require.Equal(t, tc.want, v, "%q", tc.srvr)
		require.Equal(t, tc.past, ok && chaosAtLeast(v, chaosPauseFixedIn), "%q", tc.srvr)
	}
}
