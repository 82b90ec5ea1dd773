package zktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
)

// EnsembleSize is the number of servers in an [Ensemble]: the smallest
// ensemble that survives the loss of one server.
const EnsembleSize = 3

// ErrNoLeader is what [Ensemble.Leader] wraps when no server says it leads.
var ErrNoLeader = errors.New("zktest: no leader")

// Ensemble is a replicated ZooKeeper service of [EnsembleSize] servers, each
// in its own container, on a private Docker network of their own. Started by
// [RunEnsemble] or [StartEnsemble].
//
// Each server is a [Container]: its client port is published on a fixed
// 127.0.0.1 port, so clients reconnect to the same address after Stop and
// Start, and it can be paused, stopped and started on its own. Leader election and quorum traffic stay on the private
// network. Stopping one server leaves a quorum; stopping two leaves none, and
// the last one stops serving.
//
// An Ensemble's methods are safe for concurrent use, with the same caveat as
// [Container]'s about changing the state of one server from several
// goroutines at once, except [Ensemble.Rebuild], which replaces every
// server's container and must run alone.
type Ensemble struct {
	nodes   []*Container // index i is server id i+1
	network *testcontainers.DockerNetwork
	img     string
	opts    []testcontainers.ContainerCustomizer // the user's, for Rebuild

	mu       sync.Mutex
	isolated map[int]isolation // by server index
}

// RunEnsemble starts an ensemble of [EnsembleSize] servers from img (see
// [Image]) and returns once every server answers srvr as leader or
// follower, that is once the ensemble has elected a leader and every
// follower has joined it. The servers start in parallel (a lone quorum
// member never serves), so starting an ensemble takes about as long as
// starting one server.
//
// opts apply to every server as they do to [Run]: zktest's [Option]s
// ([WithConfig] can override the ensemble's defaults below, but not the
// server list) and testcontainers' customizers. Each server gets zktest's
// zoo.cfg plus:
//
//	server.N=zkN:2888:3888;2181  # N = 1..3, zkN its alias on the private network
//	quorumListenOnAllIPs=true    # a restarted container may change its address
//	initLimit=25                 # 5s at the default tick, for slow CI machines
//	syncLimit=10                 # a follower is dropped after 2s of silence
//	cnxTimeout=1000              # election connects give up on a dead peer after 1s
//	fastleader.maxNotificationInterval=1000 # and re-vote at least every second
//
// and /data/myid (ZOO_MY_ID is set too, for images that write it from the
// environment). The last two are ZooKeeper system properties, which it
// accepts in zoo.cfg without their "zookeeper." prefix; they keep a
// re-election after [Ensemble.KillLeader] to about a second.
//
// This timing makes failures quick to see. A test that needs ZooKeeper's
// own (zoo_sample.cfg's; the official image has syncLimit=2, initLimit=5)
// asks for it, and its options win over the ensemble's:
//
//	e, err := zktest.RunEnsemble(ctx, zktest.Image(),
//		zktest.WithTickTime(2*time.Second),    // sessions: 4s to 40s
//		zktest.WithConfig("initLimit", "10"),  // 20s to join
//		zktest.WithConfig("syncLimit", "5"),   // a silent follower or leader: 10s
//		zktest.WithConfig("minSessionTimeout", "2000"), // if a test asks for 2s
//	)
//
// ZooKeeper grants a session timeout between minSessionTimeout (two ticks
// unless set) and maxSessionTimeout (twenty ticks, but zktest never sets
// less than 30s), and clamps a request outside to the nearer bound: without
// the last line, a client asking for 2s gets 4s. With it, the server grants
// 2s; since it looks for expired sessions once per tick, such a session
// expires between 2s and 4s after its client's last heartbeat. (ZooKeeper
// refuses to start with a minimum above the maximum.) Elections stay quick
// unless cnxTimeout and fastleader.maxNotificationInterval are set back to
// ZooKeeper's 5000 and 60000 too.
//
// ctx bounds the whole start. On failure RunEnsemble returns an error and,
// if anything was created, the partial ensemble too, for the caller to
// terminate:
//
//	e, err := zktest.RunEnsemble(ctx, zktest.Image())
//	defer e.Terminate(context.Background()) // nil-safe
//	if err != nil { ... }
func RunEnsemble(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Ensemble, error) {
	if settings, err := configOf(opts); err != nil {
		return nil, err
	} else if settings.tls {
		return nil, errEnsembleTLS
	}
	if err := checkDocker(ctx); err != nil {
		return nil, err
	}
	netOpts := []network.NetworkCustomizer{network.WithLabels(map[string]string{labelKey: "true"})}
	nw, err := network.New(ctx, netOpts...)
	if err != nil {
		return nil, fmt.Errorf("zktest: ensemble network: %w", explain(ctx, "", err))
	}
	e := &Ensemble{
		network: nw,
		nodes:   make([]*Container, EnsembleSize),
		img:     img,
		opts:    slices.Clone(opts),
	}

	errs := make([]error, EnsembleSize)
	var wg sync.WaitGroup
	for i := range EnsembleSize {
		wg.Go(func() {
			c, err := Run(ctx, img, e.serverOpts(i)...)
			e.nodes[i] = c
			if err != nil {
				errs[i] = fmt.Errorf("zktest: ensemble server %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return e, err
	}
	return e, nil
}

// serverOpts returns the options server i starts with: the ensemble's
// defaults, the user's options, then what makes it server i of this
// ensemble. They are made anew for each start, since a file's Reader is
// read once.
func (e *Ensemble) serverOpts(i int) []testcontainers.ContainerCustomizer {
	id := i + 1
	opts := []testcontainers.ContainerCustomizer{
		WithConfig("initLimit", "25"),
		WithConfig("syncLimit", "10"),
		WithConfig("cnxTimeout", "1000"),
		WithConfig("fastleader.maxNotificationInterval", "1000"),
	}
	opts = append(opts, e.opts...)
	for n := 1; n <= EnsembleSize; n++ {
		opts = append(opts, WithConfig("server."+strconv.Itoa(n), alias(n)+":2888:3888;2181"))
	}
	return append(opts,
		WithConfig("quorumListenOnAllIPs", "true"),
		network.WithNetwork([]string{alias(id)}, e.network),
		testcontainers.WithEnv(map[string]string{"ZOO_MY_ID": strconv.Itoa(id)}),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader:            strings.NewReader(strconv.Itoa(id) + "\n"),
			ContainerFilePath: "/data/myid",
			FileMode:          0o644,
		}),
	)
}

// alias is the name of server id on the ensemble's network.
func alias(id int) string { return "zk" + strconv.Itoa(id) }

// StartEnsemble starts an ensemble for the test from [Image], as
// [RunEnsemble] does with opts, and terminates it when the test and its
// subtests end. It stops the test if the ensemble does not start. Like
// [Start], it always starts containers, even when ZKLOCK_TEST_SERVERS is
// set, and sends testcontainers' log lines to the test's log.
func StartEnsemble(tb testing.TB, opts ...testcontainers.ContainerCustomizer) *Ensemble {
	tb.Helper()
	opts = append([]testcontainers.ContainerCustomizer{testcontainers.WithLogger(tclog.TestLogger(tb))}, opts...)
	e, err := RunEnsemble(tb.Context(), Image(), opts...)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Terminate(ctx); err != nil {
			tb.Errorf("zktest: terminate ensemble: %v", err)
		}
	})
	if err != nil {
		tb.Fatalf("zktest: start ensemble: %v", err)
	}
	return e
}

// Servers returns the client endpoints of every server, in server order,
// for zk.Connect or zklock.Connect. A client connects to one of them, and
// moves to another when its server fails.
func (e *Ensemble) Servers() []string {
	servers := make([]string, len(e.nodes))
	for i, c := range e.nodes {
		servers[i] = c.ClientEndpoint()
	}
	return servers
}

// Node returns server i (0 <= i < [EnsembleSize]; its ZooKeeper id is i+1),
// to stop, start, pause or query it on its own. It returns nil for an index
// out of range.
func (e *Ensemble) Node(i int) *Container {
	if i < 0 || i >= len(e.nodes) {
		return nil
	}
	return e.nodes[i]
}

// Nodes returns every server, in order.
func (e *Ensemble) Nodes() []*Container {
	return append([]*Container(nil), e.nodes...)
}

// Leader returns the index of the server that leads the ensemble, asking
// every server with srvr. While the ensemble elects a leader (after
// [Ensemble.KillLeader], or while a quorum is down) no server says it leads:
// Leader asks again every 100ms until one does or ctx is done, and then
// returns an error wrapping ErrNoLeader and ctx's error. Servers that are
// stopped or paused do not answer and are skipped; each is given at most a
// second to answer.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		i, modes := e.leader(ctx)
		if i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w (modes: %s): %w", ErrNoLeader, strings.Join(modes, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}

// leader asks every server for its mode once. It returns the leader's index,
// or -1 and what each server said.
func (e *Ensemble) leader(ctx context.Context) (int, []string) {
	modes := make([]string, len(e.nodes))
	var wg sync.WaitGroup
	for i, c := range e.nodes {
		wg.Go(func() {
			probe, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			out, err := c.FourLetter(probe, "srvr")
			switch {
			case err != nil:
				modes[i] = "unreachable"
			case strings.Contains(out, "Mode: "):
				_, modes[i], _ = strings.Cut(out, "Mode: ")
				modes[i], _, _ = strings.Cut(modes[i], "\n")
			default:
				modes[i] = "not serving"
			}
		})
	}
	wg.Wait()
	for i, m := range modes {
		if m == "leader" {
			return i, modes
		}
	}
	return -1, modes
}

// Kill kills server i at once (SIGKILL, as a crash or an OOM kill would):
// its clients see their connections reset, and if it led, the others elect
// a new leader. Start on [Ensemble.Node](i) brings it back, on the same
// endpoint, as a follower.
func (e *Ensemble) Kill(ctx context.Context, i int) error {
	c := e.Node(i)
	if c == nil {
		return fmt.Errorf("zktest: kill server %d: no such server (0..%d)", i, len(e.nodes)-1)
	}
	err := c.withDocker(ctx, func(cli *testcontainers.DockerClient) error {
		_, err := cli.ContainerKill(ctx, c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
		return err
	})
	if err != nil {
		return fmt.Errorf("zktest: kill %s: %w", c.endpoint, err)
	}
	e.forget(i)
	return nil
}

// KillLeader finds the leader with [Ensemble.Leader] (waiting, bounded by
// ctx, if an election is under way), kills it with [Ensemble.Kill] and
// returns its index, so the caller can start it again:
//
//	i, err := e.KillLeader(ctx)
//	// ... the remaining two elect a new leader; clients move over ...
//	err = e.Node(i).Start(ctx)
func (e *Ensemble) KillLeader(ctx context.Context) (int, error) {
	i, err := e.Leader(ctx)
	if err != nil {
		return -1, fmt.Errorf("zktest: kill leader: %w", err)
	}
	if err := e.Kill(ctx, i); err != nil {
		return -1, err
	}
	return i, nil
}

// Restart stops server i (0 <= i < [EnsembleSize]) gracefully, starts it
// again and waits until it serves again, as leader or follower, that is until
// it has rejoined the ensemble and caught up with the leader. It keeps the
// server's data, endpoint and network alias; its clients are disconnected
// and reconnect to it or to another server, and keep their sessions if they
// are back within their timeout. If server i led, the other two elect a new
// leader meanwhile. Restarting the servers one after another is a rolling
// restart: as each waits until it has rejoined, the ensemble keeps a quorum
// throughout.
//
//	for i := range e.Nodes() {
//		err := e.Restart(ctx, i)
//		// ...
//	}
//
// The start waits for up to a minute, or until ctx is done. Restart heals
// an isolated server ([Ensemble.Isolate]).
func (e *Ensemble) Restart(ctx context.Context, i int) error {
	c := e.Node(i)
	if c == nil {
		return fmt.Errorf("zktest: restart server %d: no such server (0..%d)", i, len(e.nodes)-1)
	}
	if err := c.Stop(ctx, nil); err != nil {
		return fmt.Errorf("zktest: restart %s: %w", c.endpoint, err)
	}
	e.forget(i)
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("zktest: restart %s: %w", c.endpoint, err)
	}
	return nil
}

// Rebuild replaces every server with a new, empty one, as rebuilding a lost
// ensemble from nothing would: it kills and removes every container with its
// data, starts a new container for each server on the same endpoint, with
// the same network alias and options, and returns once they serve again (see
// [RunEnsemble]). The new ensemble has none of the old one's nodes, sessions
// or transaction history: its zxids start again from epoch 1. So the
// clients of the old one are refused, not just expired: a client presents
// the last zxid it saw when it reconnects, and every server refuses a client
// that has seen a later zxid than its own ("Refusing session request for
// client ... client must try another server"), until the new ensemble's
// zxids have gone past it. go-zookeeper keeps trying.
//
// The new containers get the options [RunEnsemble] was given, applied again:
// a file given to testcontainers.WithFiles as a Reader, which the first
// start has read to its end, arrives empty (give its HostFilePath instead).
// The [Container] values from [Ensemble.Node] and [Ensemble.Nodes] stay
// valid and refer to the new containers (their container IDs change); do
// not use them, or any other method of the Ensemble, while Rebuild runs. ctx
// bounds the whole rebuild. If Rebuild fails, the ensemble may be left with
// missing servers; [Ensemble.Terminate] still removes what is left.
func (e *Ensemble) Rebuild(ctx context.Context) error {
	// Every old server goes before any new one starts: a new server that
	// found an old one still up would sync the old data back from it.
	errs := make([]error, len(e.nodes))
	var wg sync.WaitGroup
	for i, c := range e.nodes {
		wg.Go(func() {
			errs[i] = c.Terminate(ctx, testcontainers.StopTimeout(0))
			if errs[i] == nil {
				c.Container = nil
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("zktest: rebuild: %w", err)
	}
	for i := range e.nodes {
		e.forget(i)
	}
	// All at once, as in RunEnsemble: a lone quorum member never serves.
	for i, c := range e.nodes {
		wg.Go(func() {
			errs[i] = c.rerun(ctx, e.img, e.serverOpts(i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("zktest: rebuild: %w", err)
	}
	return nil
}

// Terminate stops and removes every server, concurrently, then the
// network. It is safe to call on a nil or partially started Ensemble. opts
// apply to each server as they do to testcontainers' Terminate.
func (e *Ensemble) Terminate(ctx context.Context, opts ...testcontainers.TerminateOption) error {
	if e == nil {
		return nil
	}
	errs := make([]error, len(e.nodes))
	var wg sync.WaitGroup
	for i, c := range e.nodes {
		wg.Go(func() { errs[i] = c.Terminate(ctx, opts...) })
	}
	wg.Wait()
	if e.network != nil {
		if err := e.network.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("zktest: remove ensemble network: %w", err))
		} else {
			e.network = nil
		}
	}
	return errors.Join(errs...)
}
