// Command zkbench measures zklock against the other ways to lock on
// ZooKeeper, side by side in one run, against one server:
//
//	go run ./tools/zkbench [flags]
//
// Systems: zklock; go-zookeeper's own zk.Lock (same binary; mutex only);
// Apache Curator 5.4 and kazoo 2.8 through the bench mode of the peers in
// tools/peers/ (built by tools/peers/build-peers.sh, which zkbench runs if
// the Java peer is not built). Every client has its own session.
//
// Workloads:
//
//	W0     raw floor: create ephemeral-sequential, getChildren, delete in a loop,
//	       1 client, raw go-zookeeper: what one uncontended lock cycle needs
//	W1     1 client, acquire+release of a free mutex
//	W2     8 clients contending on one mutex, with an overlap check
//	W3     8 clients on one RW lock, 90% reads
//	W4     8 clients on a semaphore of 3 leases
//	W5     one client (one session), 64 goroutines, 1,000 paths, a mutex per
//	       path (zklock, zk.Lock, Curator; kazoo's peer does not run it); its
//	       ratios are the medians of the per-round ratios
//	W6     read-heavy service: 4 clients × 16 goroutines reading one RW lock
//	       in a loop, a writer every 100 ms holding 1 ms (zklock with
//	       WithSharedReads, zklock without it, Curator); reads/s and the
//	       writer's wait, its targets the medians of per-round figures
//	scale  N waiters queued on one mutex (8, 64, 256): ZooKeeper requests per
//	       handoff from the server's mntr counters, client heap and goroutines
//	       per waiting Acquire (zklock and zk.Lock)
//
// and, when named in -workloads (they are not run by default):
//
//	W1d    W1 through a zktest.Delayer that adds -delay-rtt (3ms) to every
//	W2d    round trip, half each way; and W2 through it (zklock, zk.Lock,
//	       Curator): medians of per-round ops/s, and of the per-round ratio
//	       of zklock to the best peer
//	deep   deep queues (issue 37): D waiters spread over -deep-clients (8)
//	       Clients queue on one path behind a holder, which lets go; each
//	       waiter takes the lock once and lets go at once. Mutex queues of
//	       -deep (100, 1,000, 3,000), the mutex on one Client at -deep-one
//	       (1,000), a semaphore of -deep-leases (10) at -deep-sem (100,
//	       1,000, 3,000); zklock, zk.Lock (mutex only) and Curator
//	       (InterProcessMutex, InterProcessSemaphoreV2) through the Java
//	       peer's drain mode. Handoffs/s over the drain and, from the
//	       server's mntr over the drain alone, requests and response bytes
//	       per handoff; medians of the rounds
//
// Before measuring, zkbench loads the server for -warmup (20s): a fresh
// ZooKeeper spends two to four times more CPU per request until its JIT has
// compiled the request path. For each workload the systems then run one
// after the other, the order rotating from one workload to the next and
// reversing from one round to the next (-rounds, default 2, each -duration
// long, default 3s); a system's rounds add up. The raw floor runs half
// before and half after W1's systems, which are judged against it.
//
// Acquire latency is from calling acquire to its return; percentiles are
// nearest-rank, as the peers compute them. "violations" counts acquisitions
// that broke exclusion, seen in-process (all clients of a system live in
// one process); for zklock's mutex a fencing token lower than the previous
// holder's counts too (token_regressions in the JSON). A second table gives
// what each acquire+release cost: requests the server received and their
// reads and writes (mntr deltas) and client and server CPU time (the bench
// or peer process; the container's cgroup).
//
// The server is the one in ZKLOCK_TEST_SERVERS if set, or else a throwaway
// container started with zktest.Run (run `scripts/setup.sh` first),
// with the image in ZKLOCK_ZK_IMAGE or, if unset, the one setup.sh wrote to
// .zklock-image; testcontainers' reaper is off unless
// TESTCONTAINERS_RYUK_DISABLED says otherwise, and zkbench terminates the
// container itself. The container runs with forceSync=no unless -fsync is
// given, and clients reach it at its bridge IP unless -proxy is given.
//
// zkbench prints the tables, the target ratios with PASS or MISS,
// and writes the results as JSON (-json) and a bar chart (-chart, SVG);
// -from redraws both from an earlier JSON. For analysis, -systems also
// takes rawget (the floor plus zklock's pipelined token read) and rawmulti
// (the floor with the token taken from a multi's stat), -cpuprofile and
// -scale-heapprofile write profiles.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	duration       time.Duration
	workloads      []string
	systems        []string
	clients        int
	leases         int
	readPct        int
	hold           time.Duration
	acquireTimeout time.Duration
	scaleNs        []int
	scaleSessions  int
	jsonOut        string
	chartOut       string
	fsync          bool
	viaProxy       bool
	warmup         time.Duration
	rounds         int
	serverCgroup   string
	heapProfiles   string
	cpuProfile     string
	from           string
	python         string

	delayRTT    time.Duration
	deepNs      []int // mutex queues over deepClients Clients
	deepOneNs   []int // mutex queues on one Client
	deepSemNs   []int // semaphore queues over deepClients Clients
	deepClients int
	deepLeases  int
}

// allWorkloads run by default; moreWorkloads when asked for (-workloads).
var (
	allWorkloads   = []string{"W0", "W1", "W2", "W3", "W4", "W5", "W6", "scale"}
	moreWorkloads  = []string{wDelayed1, wDelayed2, "deep"}
	knownWorkloads = slices.Concat(allWorkloads, moreWorkloads)
)

func main() {
	if os.Getenv(w6RoleEnv) == "reader" {
		os.Exit(w6ReaderMain())
	}
	os.Exit(run())
}

func run() int {
	var cfg config
	var workloads, systems, scaleNs string
	var deep deepFlags
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "how long each system runs each workload, per round")
	flag.StringVar(&workloads, "workloads", strings.Join(allWorkloads, ","), "workloads to run, comma-separated (also "+strings.Join(moreWorkloads, ", ")+")")
	flag.StringVar(&systems, "systems", strings.Join(allSystems, ","), "systems to compare, comma-separated ("+strings.Join(allSystems, ", ")+"; for analysis also rawget, rawmulti); W0 always runs raw go-zookeeper")
	flag.IntVar(&cfg.clients, "clients", 8, "clients (sessions) in W2, W3 and W4")
	flag.IntVar(&cfg.leases, "leases", 3, "semaphore leases in W4")
	flag.IntVar(&cfg.readPct, "read-pct", 90, "percentage of reads in W3")
	flag.DurationVar(&cfg.hold, "hold", 0, "how long each acquisition is held (0: released at once)")
	flag.DurationVar(&cfg.acquireTimeout, "acquire-timeout", 10*time.Second, "an acquire slower than this counts as a timeout")
	flag.IntVar(&cfg.rounds, "rounds", 2, "run every workload this many times, the systems' order alternating forward and reverse, and add the rounds up")
	flag.StringVar(&scaleNs, "scale", "8,64,256", "waiter counts of the scale workload")
	flag.IntVar(&cfg.scaleSessions, "scale-sessions", 8, "sessions the scale workload's waiters share")
	flag.StringVar(&cfg.jsonOut, "json", "docs/bench/results.json", "write results as JSON here, relative to the repository root (empty: don't)")
	flag.StringVar(&cfg.chartOut, "chart", "docs/bench/throughput.svg", "draw the throughput chart here, relative to the repository root (empty: don't)")
	flag.BoolVar(&cfg.fsync, "fsync", false, "keep the container's transaction-log fsync on (default: forceSync=no)")
	flag.BoolVar(&cfg.viaProxy, "proxy", false, "reach the container through Docker's published 127.0.0.1 port (docker-proxy) instead of its bridge IP")
	flag.DurationVar(&cfg.warmup, "warmup", 20*time.Second, "warm the server up (its JIT) for this long before measuring")
	flag.StringVar(&cfg.serverCgroup, "server-container", "", "with ZKLOCK_TEST_SERVERS: the full id of the Docker container that runs that server, to read its CPU use")
	flag.StringVar(&cfg.heapProfiles, "scale-heapprofile", "", "write a heap profile of each scale run's waiting state to this prefix (PREFIX-SYSTEM-N.pprof)")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole bench to this file")
	flag.StringVar(&cfg.from, "from", "", "run nothing: print the report of this results JSON and redraw its chart (-chart)")
	flag.StringVar(&cfg.python, "python", "/usr/bin/python3", "the Python with kazoo 2.8, for the kazoo peer")
	flag.BoolVar(&checkTokens, "tokens", true, "W1-W6: zklock's mutex holders read their lease's token, which the workload checks in order (on ZooKeeper 3.8 a read per handoff)")
	flag.BoolVar(&deepTokens, "deep-tokens", false, "deep: zklock's mutex waiters read their lease's token, and the drain checks tokens in order (on ZooKeeper 3.8 a read per acquisition)")
	flag.DurationVar(&cfg.delayRTT, "delay-rtt", 3*time.Millisecond, "the round trip W1d and W2d add between the clients and the server (half each way)")
	deep.define()
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: zkbench [flags]\n\nCompares zklock with zk.Lock, Curator and kazoo on one ZooKeeper.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		return 2
	}
	var err error
	if cfg.workloads, err = parseList(workloads, knownWorkloads); err != nil {
		return usage(err)
	}
	if cfg.systems, err = parseList(systems, knownSystems); err != nil {
		return usage(err)
	}
	if cfg.scaleNs, err = parseCounts("-scale", scaleNs); err != nil {
		return usage(err)
	}
	if err := deep.parse(&cfg); err != nil {
		return usage(err)
	}
	if cfg.duration <= 0 || cfg.rounds < 1 || cfg.clients < 1 || cfg.leases < 1 || cfg.readPct < 0 || cfg.readPct > 100 || cfg.scaleSessions < 1 || cfg.delayRTT < 0 {
		return usage(fmt.Errorf("-duration, -rounds, -clients, -leases and -scale-sessions must be positive, -read-pct 0..100"))
	}

	if cfg.heapProfiles != "" {
		runtime.MemProfileRate = 1 // every allocation, for exact profiles
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return usage(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return usage(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if cfg.from != "" {
		return redraw(cfg)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
		return 1
	}
	root := repoRoot()
	if cfg.jsonOut != "" {
		if err := writeJSON(resolve(root, cfg.jsonOut), rep); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
			return 1
		}
		fmt.Printf("\nwrote %s\n", cfg.jsonOut)
	}
	if cfg.chartOut != "" {
		if err := writeFile(resolve(root, cfg.chartOut), []byte(chartSVG(rep))); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
			return 1
		}
		fmt.Printf("wrote %s\n", cfg.chartOut)
	}
	return 0
}

// redraw prints the report of a results JSON and redraws its chart.
func redraw(cfg config) int {
	b, err := os.ReadFile(cfg.from)
	if err != nil {
		return usage(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return usage(fmt.Errorf("%s: %w", cfg.from, err))
	}
	printReport(os.Stdout, &rep)
	if cfg.chartOut != "" {
		if err := writeFile(resolve(repoRoot(), cfg.chartOut), []byte(chartSVG(&rep))); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
			return 1
		}
		fmt.Printf("wrote %s\n", cfg.chartOut)
	}
	return 0
}

func usage(err error) int {
	fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
	return 2
}

// parseList splits a comma-separated list and checks every item against
// known (case-insensitively), keeping known's spelling and order of
// appearance in s.
func parseList(s string, known []string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := slices.IndexFunc(known, func(k string) bool { return strings.EqualFold(k, item) })
		if i < 0 {
			return nil, fmt.Errorf("unknown %q (want some of %s)", item, strings.Join(known, ","))
		}
		if !slices.Contains(out, known[i]) {
			out = append(out, known[i])
		}
	}
	return out, nil
}

func resolve(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}

// report is everything one run measured; it is the JSON document.
type report struct {
	Date         string        `json:"date"`
	Commit       string        `json:"commit,omitempty"` // of the repository zkbench ran in`
	Machine      machine       `json:"machine"`
	Server       serverInfo    `json:"server"`
	Config       configInfo    `json:"config"`
	Results      []Result      `json:"results"`
	Scale        []ScaleResult `json:"scale,omitempty"`
	Deep         []DeepResult  `json:"deep,omitempty"`  // every round's
	Delay        []DelayRow    `json:"delay,omitempty"` // W1d and W2d, medians of rounds
	Ratios       []Ratio       `json:"ratios"`
	Medians      []Ratio       `json:"medians,omitempty"` // W5's, over rounds
	TotalSeconds float64       `json:"total_seconds"`
}

type serverInfo struct {
	Source  string   `json:"source"`
	Version string   `json:"version"`
	Servers []string `json:"servers"`
}

type configInfo struct {
	DurationMs       int64    `json:"duration_ms"`
	Rounds           int      `json:"rounds"`
	WarmupMs         int64    `json:"warmup_ms"`
	Workloads        []string `json:"workloads"`
	Systems          []string `json:"systems"`
	Clients          int      `json:"clients"`
	Leases           int      `json:"leases"`
	ReadPct          int      `json:"read_pct"`
	HoldUs           int64    `json:"hold_us"`
	AcquireTimeoutMs int64    `json:"acquire_timeout_ms"`
	ScaleWaiters     []int    `json:"scale_waiters"`
	ScaleSessions    int      `json:"scale_sessions"`
	DelayRTTUs       int64    `json:"delay_rtt_us,omitempty"`
	DeepClients      int      `json:"deep_clients,omitempty"`
	DeepLeases       int      `json:"deep_leases,omitempty"`
}

// entry is one system's run of one workload.
type entry struct{ workload, sys string }

// schedule returns one round's runs, in groups that run back to back. W0
// (raw go-zookeeper) runs in W1's group, since W1 is judged against it.
// Within a group the order rotates from one group to the next, so no
// system always runs first (right after another workload) or last; odd
// rounds run every group in reverse, so a drift in the machine's load
// affects all systems alike.
func schedule(workloads, systems []string, round int) [][]entry {
	var groups [][]entry
	for _, w := range workloads {
		g := groupOf(w, workloads, systems)
		if len(g) == 0 {
			continue
		}
		k := len(groups) % len(g)
		g = slices.Concat(g[k:], g[:k])
		if round%2 == 1 {
			slices.Reverse(g)
		}
		// The floor brackets its group, half before and half after the
		// systems it is the floor of, so a drift of the machine's load
		// cannot favour either side.
		floor := entry{"W0", sysRaw}
		if i := slices.Index(g, floor); i >= 0 && len(g) > 1 {
			g = slices.Concat([]entry{floor}, slices.Delete(g, i, i+1), []entry{floor})
		}
		groups = append(groups, g)
	}
	return groups
}

// groupOf returns workload w's runs of one round, in the systems' order.
func groupOf(w string, workloads, systems []string) []entry {
	switch {
	case w == "scale" || w == "deep":
		return nil // they run on their own, after the rounds
	case w == "W0" && slices.Contains(workloads, "W1"):
		return nil // in W1's group
	case w == "W0":
		return floorEntries(systems)
	case w == "W1" && slices.Contains(workloads, "W0"):
		return append(floorEntries(systems), systemEntries(w, systems)...)
	case w == "W6":
		var g []entry
		for _, s := range w6Systems(systems) {
			g = append(g, entry{w, s})
		}
		return g
	}
	return systemEntries(w, systems)
}

// floorEntries is W0's runs: the raw floor, and the analysis variants
// asked for.
func floorEntries(systems []string) []entry {
	g := []entry{{"W0", sysRaw}}
	for _, s := range []string{sysRawGet, sysRawMult} {
		if slices.Contains(systems, s) {
			g = append(g, entry{"W0", s})
		}
	}
	return g
}

func systemEntries(w string, systems []string) []entry {
	var g []entry
	for _, s := range systems {
		if runsOn(w, s) {
			g = append(g, entry{w, s})
		}
	}
	return g
}

// runsOn reports whether system s runs workload w (W0 and W6 aside).
func runsOn(w, s string) bool {
	switch s {
	case sysRawGet, sysRawMult, sysZklockUnshared:
		return false // W0's and W6's own
	case sysGozk:
		// zk.Lock has no RW lock and no semaphore.
		return w == "W1" || w == "W2" || w == "W5" || isDelayed(w)
	case sysKazoo:
		// kazoo's peer has no W5; the delayed table has no kazoo column.
		return w != "W5" && !isDelayed(w)
	}
	return true
}

func bench(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	began := time.Now()
	root := repoRoot()
	rep := &report{
		Date:    began.UTC().Format(time.RFC3339),
		Commit:  gitCommit(root),
		Machine: describeMachine(),
		Config: configInfo{
			DurationMs:       cfg.duration.Milliseconds(),
			Rounds:           cfg.rounds,
			WarmupMs:         cfg.warmup.Milliseconds(),
			Workloads:        cfg.workloads,
			Systems:          cfg.systems,
			Clients:          cfg.clients,
			Leases:           cfg.leases,
			ReadPct:          cfg.readPct,
			HoldUs:           cfg.hold.Microseconds(),
			AcquireTimeoutMs: cfg.acquireTimeout.Milliseconds(),
			ScaleWaiters:     cfg.scaleNs,
			ScaleSessions:    cfg.scaleSessions,
			DelayRTTUs:       cfg.delayRTT.Microseconds(),
			DeepClients:      cfg.deepClients,
			DeepLeases:       cfg.deepLeases,
		},
	}
	fmt.Fprintf(out, "zkbench: %d × %s, %s, %s, load %s\n", rep.Machine.NumCPU, rep.Machine.CPU, rep.Machine.OS, rep.Machine.Go, rep.Machine.LoadAvg)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	srv, err := startServer(sctx, root, cfg.fsync, cfg.viaProxy)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start ZooKeeper: %w", err)
	}
	defer srv.stop()
	if cfg.serverCgroup != "" {
		srv.cpu = containerCPU(cfg.serverCgroup)
	}
	rep.Server = serverInfo{Source: srv.source, Version: srv.version, Servers: srv.servers}
	fmt.Fprintf(out, "ZooKeeper %s at %s (%s); %v per system per workload in each of %d rounds\n\n",
		srv.version, strings.Join(srv.servers, ","), srv.source, cfg.duration, cfg.rounds)

	p := &peers{root: root, python: cfg.python}
	runID := began.UTC().Format("20060102T150405")
	base := "/zkbench/" + runID
	if cfg.warmup > 0 {
		if err := warmUp(ctx, out, cfg, srv, base); err != nil {
			return nil, err
		}
	}
	delayed, stopDelay, err := startDelayers(cfg.workloads, srv.servers, cfg.delayRTT)
	if err != nil {
		return nil, fmt.Errorf("delayer: %w", err)
	}
	defer stopDelay()
	runs := map[entry][]Result{}
	var order []entry
	for round := range cfg.rounds {
		if cfg.rounds > 1 {
			fmt.Fprintf(out, "  round %d of %d\n", round+1, cfg.rounds)
		}
		for _, group := range schedule(cfg.workloads, cfg.systems, round) {
			for _, e := range group {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				path := fmt.Sprintf("%s/%s-%s-%d-%d", base, strings.ToLower(e.workload), e.sys, round, len(runs[e]))
				r := runEntry(ctx, out, cfg, srv, p, e, path, countOf(group, e) > 1, delayed)
				if _, ok := runs[e]; !ok {
					order = append(order, e)
				}
				runs[e] = append(runs[e], r)
			}
		}
	}
	rep.Medians = slices.Concat(w5Medians(runs), w6Medians(runs), delayMedians(runs))
	rep.Delay = delayRows(runs, cfg.delayRTT)
	// Report in workload order, systems in the order they first ran.
	for _, w := range cfg.workloads {
		for _, e := range order {
			if e.workload == w {
				rep.Results = append(rep.Results, mergeRounds(runs[e]))
			}
		}
	}
	if rep.Scale, err = runScales(ctx, out, cfg, srv.servers, base); err != nil {
		return nil, err
	}
	if rep.Deep, err = runDeep(ctx, out, cfg, srv.servers, base, p); err != nil {
		return nil, err
	}
	rep.Ratios = append(ratios(rep), deepRatios(rep.Deep)...)
	rep.TotalSeconds = time.Since(began).Seconds()
	printReport(out, rep)
	return rep, nil
}

// runEntry runs system e.sys's run of workload e.workload for a round,
// and prints its rate: halve for the floor that brackets its group,
// delayed the addresses of the Delayers.
func runEntry(ctx context.Context, out io.Writer, cfg config, srv *server, p *peers, e entry, path string, halve bool, delayed []string) Result {
	clients := cfg.clients
	switch e.workload {
	case "W0", "W1", wDelayed1:
		clients = 1
	case "W5":
		clients = w5Goroutines // goroutines (threads) on one session
	}
	duration := cfg.duration
	if halve {
		duration /= 2 // the bracketing floor: half before, half after
	}
	servers := srv.servers
	if isDelayed(e.workload) {
		servers = delayed
	}
	spec := runSpec{
		workload:       e.workload,
		path:           path,
		servers:        servers,
		counters:       srv.servers[0],
		clients:        clients,
		duration:       duration,
		acquireTimeout: cfg.acquireTimeout,
		hold:           cfg.hold,
		readPct:        cfg.readPct,
		leases:         cfg.leases,
		paths:          w5Paths,
		serverCPU:      srv.cpu,
	}
	fmt.Fprintf(out, "  %-6s %-22s ", e.workload, systemLabel(e.sys))
	var r Result
	switch {
	case e.workload == "W6" && e.sys == sysCurator:
		r = p.runW6(ctx, spec)
	case e.workload == "W6":
		r = runW6(ctx, e.sys, spec)
	case e.sys == sysCurator || e.sys == sysKazoo:
		r = p.run(ctx, e.sys, spec)
	case e.workload == "W5" && (e.sys == sysZklock || e.sys == sysGozk):
		r = runW5(ctx, e.sys, spec)
	default:
		r = runGo(ctx, e.sys, spec)
	}
	if r.Error != "" {
		fmt.Fprintf(out, "error: %s\n", r.Error)
	} else {
		fmt.Fprintf(out, "%9.1f ops/s\n", r.OpsPerSec)
	}
	return r
}

// runScales runs the scale workload, if asked for: each N, zklock and
// zk.Lock.
func runScales(ctx context.Context, out io.Writer, cfg config, servers []string, base string) ([]ScaleResult, error) {
	if !slices.Contains(cfg.workloads, "scale") {
		return nil, nil
	}
	var res []ScaleResult
	for _, n := range cfg.scaleNs {
		for _, sys := range []string{sysZklock, sysGozk} {
			if !slices.Contains(cfg.systems, sys) {
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res = append(res, runScaleOne(ctx, out, cfg, servers, base, sys, n))
		}
	}
	return res, nil
}

// runScaleOne runs the scale workload of one system at one N, and prints
// the outcome.
func runScaleOne(ctx context.Context, out io.Writer, cfg config, servers []string, base, sys string, n int) ScaleResult {
	path := fmt.Sprintf("%s/scale-%d-%s", base, n, sys)
	fmt.Fprintf(out, "  scale  %-22s N=%-4d ", systemLabel(sys), n)
	hp := ""
	if cfg.heapProfiles != "" {
		hp = fmt.Sprintf("%s-%s-%d.pprof", cfg.heapProfiles, sys, n)
	}
	r := runScale(ctx, sys, servers, path, n, min(cfg.scaleSessions, n), hp)
	if r.Error != "" {
		fmt.Fprintf(out, "error: %s\n", r.Error)
	} else {
		fmt.Fprintf(out, "%.2f requests/handoff\n", r.RequestsPerHandoff)
	}
	return r
}

// warmUp loads the server until its JIT has compiled the request path: a
// fresh server spends two to four times more CPU per request for its first
// ten-odd seconds of load, which would penalise whichever system runs
// first. It runs one-second slices of the workloads' requests for
// cfg.warmup, and prints the server's CPU per op of its W2 slices, which
// shows whether that was long enough.
func warmUp(ctx context.Context, out io.Writer, cfg config, srv *server, base string) error {
	const slice = time.Second
	end := time.Now().Add(cfg.warmup)
	mixed := []struct {
		sys, workload string
	}{{sysRaw, "W0"}, {sysZklock, "W3"}, {sysZklock, "W4"}, {sysGozk, "W2"}}
	fmt.Fprintf(out, "  warming the server up for %v (server CPU µs/op of its W2 slices:", cfg.warmup)
	defer fmt.Fprintln(out, ")")
	for i := 0; time.Now().Before(end); i++ {
		sys, workload := sysZklock, "W2"
		if i%2 == 1 {
			m := mixed[(i/2)%len(mixed)]
			sys, workload = m.sys, m.workload
		}
		clients := cfg.clients
		if workload == "W0" {
			clients = 1
		}
		r := runGo(ctx, sys, runSpec{
			workload: workload, path: fmt.Sprintf("%s/warmup-%d", base, i), servers: srv.servers,
			clients: clients, duration: min(slice, time.Until(end)), acquireTimeout: cfg.acquireTimeout,
			leases: cfg.leases, readPct: cfg.readPct, serverCPU: srv.cpu,
		})
		if r.Error != "" {
			return fmt.Errorf("warm-up: %s", r.Error)
		}
		if sys == sysZklock && workload == "W2" && r.ServerCPUUsPerOp > 0 {
			fmt.Fprintf(out, " %.0f", r.ServerCPUUsPerOp)
		}
	}
	return nil
}

// gitCommit describes the checkout zkbench runs in: the commit, and
// "+dirty" if files differ from it. Empty if git cannot tell.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

func countOf(g []entry, e entry) int {
	n := 0
	for _, x := range g {
		if x == e {
			n++
		}
	}
	return n
}
