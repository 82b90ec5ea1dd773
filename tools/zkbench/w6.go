package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zklock"
)

// W6: "read-heavy service". w6Clients Clients (sessions, processes for
// Curator), each with w6Readers goroutines (threads) taking the read side
// of one RWMutex in a loop, released at once; and one writer, on a session
// of its own, taking the write side every w6Period and holding it w6Hold.
// Systems: zklock with WithSharedReads (sysZklock), zklock without it
// (sysZklockUnshared), Curator's InterProcessReadWriteLock (16 threads
// sharing one CuratorFramework per process, w6Clients processes; the
// writer is a thread with its own CuratorFramework in the first). The
// result's p50 and p99 are the writer's acquire wait; Timeouts counts the
// writer's acquires slower than the acquire timeout. The readers of each
// Client run in a process of their own, for every system: a writer's wait
// then does not depend on how one Go scheduler shares two cores among 64
// goroutines busy at memory speed (BenchmarkW6ReadHeavy, the Go benchmark,
// runs them all in one process).
const (
	w6Clients = 4
	w6Readers = 16
	w6Period  = 100 * time.Millisecond
	w6Hold    = time.Millisecond
)

// runW6 runs W6 for zklock, with shared reads or without: each of the
// w6Clients reading Clients in a process of its own (this program again,
// as w6ReaderMain), as Curator's readers are, and the writer in this
// process, on a Client of its own. Every process starts its clock at one
// wall-clock time. Violations counts reads seen held while the writer
// held in the Go benchmark only (BenchmarkW6ReadHeavy, one process); here
// the processes cannot see each other's leases, and the tests check
// exclusion (TestSharedReadsWriterNotStarved).
func runW6(ctx context.Context, sys string, spec runSpec) Result {
	res := Result{System: sys, Workload: "W6", Clients: w6Clients * w6Readers,
		Note: fmt.Sprintf("%d processes × %d goroutines on one Client each, a writer every %v", w6Clients, w6Readers, w6Period)}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	wc, err := zklock.Connect(cctx, spec.servers)
	cancel()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() { _ = wc.Close() }()
	writer, err := zklock.NewRWMutex(wc, spec.path)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	exe, err := os.Executable()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	startAt := time.Now().Add(3 * time.Second) // process start and connect
	pctx, stop := context.WithTimeout(ctx, spec.duration+spec.acquireTimeout+60*time.Second)
	defer stop()
	readers := make([]w6ReaderResult, w6Clients)
	cpus := make([]time.Duration, w6Clients)
	var wg sync.WaitGroup
	for i := range w6Clients {
		cmd := exec.CommandContext(pctx, exe)
		cmd.Env = append(os.Environ(), w6RoleEnv+"=reader",
			"ZKBENCH_W6_SERVERS="+strings.Join(spec.servers, ","),
			"ZKBENCH_W6_PATH="+spec.path,
			"ZKBENCH_W6_SHARED="+strconv.FormatBool(sys == sysZklock),
			"ZKBENCH_W6_START_NS="+strconv.FormatInt(startAt.UnixNano(), 10),
			"ZKBENCH_W6_DURATION="+spec.duration.String())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			res.Error = err.Error()
			stop()
			wg.Wait()
			return res
		}
		wg.Go(func() {
			err := cmd.Wait()
			if cmd.ProcessState != nil {
				cpus[i] = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			line, perr := lastJSONLine(stdout.Bytes())
			if perr == nil {
				perr = json.Unmarshal(line, &readers[i])
			}
			if perr != nil {
				readers[i].Error = fmt.Sprintf("%v: %v; stderr: %s", err, perr, tail(stderr.Bytes()))
			}
		})
	}

	p0 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	cpu0 := selfCPU()
	time.Sleep(time.Until(startAt))
	deadline := startAt.Add(spec.duration)
	var waits []time.Duration
	next := startAt
	for ctx.Err() == nil {
		next = next.Add(w6Period)
		time.Sleep(time.Until(next))
		if !time.Now().Before(deadline) {
			break
		}
		actx, cancel := context.WithTimeout(ctx, spec.acquireTimeout)
		t0 := time.Now()
		w, err := writer.WriteLock().Acquire(actx)
		wait := time.Since(t0)
		cancel()
		if err != nil {
			if actx.Err() != nil && ctx.Err() == nil {
				res.Timeouts++
				continue
			}
			res.Error = err.Error()
			break
		}
		waits = append(waits, wait)
		time.Sleep(w6Hold) // the writer's work
		if err := w.Release(context.Background()); err != nil {
			res.Error = err.Error()
			break
		}
		res.WriteOps++
	}
	wg.Wait()
	cpu1 := selfCPU()
	p1 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	var cpu time.Duration
	for i, r := range readers {
		cpu += cpus[i]
		if r.Error != "" && res.Error == "" {
			res.Error = fmt.Sprintf("reader process %d: %s", i, r.Error)
		}
		res.ReadOps += r.Reads
		if r.Seconds > 0 {
			res.ReadOpsPerSec += float64(r.Reads) / r.Seconds
		}
	}
	res.Seconds = spec.duration.Seconds()
	res.Ops = res.ReadOps + res.WriteOps
	rr := res.ReadOpsPerSec
	slices.Sort(waits)
	res.finish(waits)
	res.ReadOpsPerSec = rr
	res.lat = waits
	res.WriterP50Ms, res.WriterP99Ms = res.AcquireP50Ms, res.AcquireP99Ms
	// The reader processes' whole lives (start, connect, the wait for the
	// common start) are in these counts: per-op costs are upper bounds.
	if c, ok := between(p0, p1, cpu1-cpu0+cpu); ok {
		res.setPerOp(c)
	}
	return res
}

// w6RoleEnv makes this program one of W6's reading processes.
const w6RoleEnv = "ZKBENCH_W6_ROLE"

// w6ReaderResult is what a reading process prints.
type w6ReaderResult struct {
	Reads   int64   `json:"reads"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// w6ReaderMain is one of W6's reading processes: one Client, w6Readers
// goroutines reading one RWMutex in a loop from the common start for the
// duration (the environment says which), then one JSON line.
func w6ReaderMain() int {
	res := w6Reader()
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if res.Error != "" {
		return 1
	}
	return 0
}

func w6Reader() (res w6ReaderResult) {
	servers := strings.Split(os.Getenv("ZKBENCH_W6_SERVERS"), ",")
	path := os.Getenv("ZKBENCH_W6_PATH")
	shared, err1 := strconv.ParseBool(os.Getenv("ZKBENCH_W6_SHARED"))
	startNs, err2 := strconv.ParseInt(os.Getenv("ZKBENCH_W6_START_NS"), 10, 64)
	duration, err3 := time.ParseDuration(os.Getenv("ZKBENCH_W6_DURATION"))
	if err := errors.Join(err1, err2, err3); err != nil {
		res.Error = err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := zklock.Connect(ctx, servers)
	cancel()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() { _ = c.Close() }()
	var opts []zklock.LockOption
	if shared {
		opts = append(opts, zklock.WithSharedReads())
	}
	rw, err := zklock.NewRWMutex(c, path, opts...)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	start := time.Unix(0, startNs)
	deadline := start.Add(duration)
	ctx, cancel = context.WithDeadline(context.Background(), deadline)
	defer cancel()
	time.Sleep(time.Until(start))
	var reads atomic.Int64
	var errMu sync.Mutex
	var wg sync.WaitGroup
	for range w6Readers {
		wg.Go(func() {
			for {
				l, err := rw.ReadLock().Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errMu.Lock()
						if res.Error == "" {
							res.Error = err.Error()
						}
						errMu.Unlock()
					}
					return
				}
				if err := l.Release(context.Background()); err != nil {
					errMu.Lock()
					if res.Error == "" {
						res.Error = err.Error()
					}
					errMu.Unlock()
					return
				}
				if time.Now().Before(deadline) {
					reads.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.Reads = reads.Load()
	res.Seconds = duration.Seconds()
	return res
}

// runW6 runs W6 for Curator: w6Clients peer processes at once, the first
// with the writer, their clocks started together (--start-at-ms, after
// their JVMs have started and connected), and adds their counts up; the
// writer's wait is the first process's.
func (p *peers) runW6(ctx context.Context, spec runSpec) Result {
	res := Result{System: sysCurator, Workload: "W6", Clients: w6Clients * w6Readers,
		Note: fmt.Sprintf("%d processes × %d threads on one CuratorFramework each, a writer every %v", w6Clients, w6Readers, w6Period)}
	if err := p.ensureBuilt(ctx); err != nil {
		res.Error = err.Error()
		return res
	}
	startAt := time.Now().Add(8 * time.Second).UnixMilli() // JVM start and connect
	rs := make([]Result, w6Clients)
	cpus := make([]time.Duration, w6Clients)
	p0 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	var wg sync.WaitGroup
	for i := range w6Clients {
		wg.Go(func() {
			extra := []string{"--start-at-ms", strconv.FormatInt(startAt, 10), "--writer-ms", "0"}
			if i == 0 {
				extra = []string{"--start-at-ms", strconv.FormatInt(startAt, 10),
					"--writer-ms", strconv.FormatInt(w6Period.Milliseconds(), 10),
					"--writer-hold-us", strconv.FormatInt(w6Hold.Microseconds(), 10)}
			}
			s := spec
			s.clients = w6Readers
			rs[i], cpus[i] = p.execArgs(ctx, sysCurator, s, extra)
		})
	}
	wg.Wait()
	p1 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	var cpu time.Duration
	for i, r := range rs {
		cpu += cpus[i]
		if r.Error != "" && res.Error == "" {
			res.Error = fmt.Sprintf("process %d: %s", i, r.Error)
		}
		res.ReadOps += r.ReadOps
		res.WriteOps += r.WriteOps
		res.Timeouts += r.Timeouts
		res.Violations += r.Violations
		res.Seconds = max(res.Seconds, r.Seconds)
		if r.Seconds > 0 {
			res.ReadOpsPerSec += float64(r.ReadOps) / r.Seconds
		}
	}
	res.Ops = res.ReadOps + res.WriteOps
	if res.Seconds > 0 {
		res.OpsPerSec = float64(res.Ops) / res.Seconds
		res.WriteOpsPerSec = float64(res.WriteOps) / res.Seconds
	}
	res.AcquireP50Ms, res.AcquireP99Ms = rs[0].WriterP50Ms, rs[0].WriterP99Ms
	res.WriterP50Ms, res.WriterP99Ms = rs[0].WriterP50Ms, rs[0].WriterP99Ms
	// The processes' whole lives (JVM start, connect, the wait for the
	// common start) are in these counts: per-op costs are upper bounds.
	if c, ok := between(p0, p1, cpu); ok {
		res.setPerOp(c)
	}
	return res
}

// w6Systems are the systems W6 runs for the systems asked for: zklock
// brings its run without the option along.
func w6Systems(systems []string) []string {
	var out []string
	for _, s := range systems {
		switch s {
		case sysZklock:
			out = append(out, sysZklock, sysZklockUnshared)
		case sysZklockUnshared, sysCurator:
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// w6Medians computes W6's targets over rounds: shared reads/s over
// Curator's and over zklock's without the option, the writer's p99 wait
// with the option against twice its p99 without plus 20 ms, and the
// writer's timeouts.
func w6Medians(runs map[entry][]Result) []Ratio {
	z := runs[entry{"W6", sysZklock}]
	if len(z) == 0 {
		return nil
	}
	readRate := func(rs []Result) []Result {
		out := make([]Result, len(rs))
		for i, r := range rs {
			out[i] = r
			out[i].OpsPerSec = r.ReadOpsPerSec
		}
		return out
	}
	var out []Ratio
	for _, o := range []struct {
		sys       string
		name      string
		threshold float64
	}{{sysCurator, "W6 shared reads / Curator, reads/s, median of rounds", 30},
		{sysZklockUnshared, "W6 shared reads / zklock without, reads/s, median of rounds", 10}} {
		m, rs := medianRatio(readRate(z), readRate(runs[entry{"W6", o.sys}]))
		out = append(out, ratio(o.name, ">=", o.threshold, m, len(rs) > 0, "rounds:"+joinF(rs, "%.1f")))
	}
	u := runs[entry{"W6", sysZklockUnshared}]
	var bounds []float64
	for i := range z {
		if i < len(u) && z[i].Error == "" && u[i].Error == "" {
			bounds = append(bounds, z[i].AcquireP99Ms/(2*u[i].AcquireP99Ms+20))
		}
	}
	m := median(bounds)
	out = append(out, ratio("W6 writer p99 wait shared / (2 × without + 20 ms), median of rounds", "<=", 1, m, len(bounds) > 0, "rounds:"+joinF(bounds, "%.2f")))
	var timeouts int64
	for _, r := range slices.Concat(z, u) {
		timeouts += r.Timeouts
	}
	out = append(out, ratio("W6 zklock write acquires timed out, all rounds", "<=", 0, float64(timeouts), true, ""))
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func joinF(v []float64, format string) string {
	var b strings.Builder
	for _, x := range v {
		b.WriteString(" ")
		b.WriteString(fmt.Sprintf(format, x))
	}
	return b.String()
}
