package main

import (
	"context"
	"fmt"
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
// writer's acquires slower than the acquire timeout; Violations counts
// reads seen held while the writer held (in-process: the Go systems see
// every reader, a Curator process only its own).
const (
	w6Clients = 4
	w6Readers = 16
	w6Period  = 100 * time.Millisecond
	w6Hold    = time.Millisecond
)

// runW6 runs W6 for zklock, with shared reads or without.
func runW6(ctx context.Context, sys string, spec runSpec) Result {
	shared := sys == sysZklock
	res := Result{System: sys, Workload: "W6", Clients: w6Clients * w6Readers,
		Note: fmt.Sprintf("%d Clients × %d readers, a writer every %v", w6Clients, w6Readers, w6Period)}
	var opts []zklock.LockOption
	if shared {
		opts = append(opts, zklock.WithSharedReads())
	}
	var clients []*zklock.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	connect := func() (*zklock.Client, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := zklock.Connect(cctx, spec.servers)
		if err == nil {
			clients = append(clients, c)
		}
		return c, err
	}
	wc, err := connect()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	writer, err := zklock.NewRWMutex(wc, spec.path)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	readers := make([]*zklock.RWMutex, w6Clients)
	for i := range readers {
		c, err := connect()
		if err == nil {
			readers[i], err = zklock.NewRWMutex(c, spec.path, opts...)
		}
		if err != nil {
			res.Error = err.Error()
			return res
		}
	}

	var (
		reads, violations atomic.Int64
		writing           atomic.Bool
		errMu             sync.Mutex
		firstErr          error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var wg sync.WaitGroup
	for _, rw := range readers {
		for range w6Readers {
			wg.Go(func() {
				for {
					l, err := rw.ReadLock().Acquire(rctx)
					if err != nil {
						if rctx.Err() == nil {
							fail(err)
						}
						return
					}
					if writing.Load() {
						violations.Add(1)
					}
					reads.Add(1)
					if err := l.Release(context.Background()); err != nil {
						fail(err)
						return
					}
				}
			})
		}
	}

	p0 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	cpu0 := selfCPU()
	r0 := reads.Load()
	start := time.Now()
	deadline := start.Add(spec.duration)
	var waits []time.Duration
	tick := time.NewTicker(w6Period)
	for {
		<-tick.C
		if !time.Now().Before(deadline) || ctx.Err() != nil {
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
			fail(err)
			break
		}
		waits = append(waits, wait)
		writing.Store(true)
		time.Sleep(w6Hold) // the writer's work
		writing.Store(false)
		if err := w.Release(context.Background()); err != nil {
			fail(err)
			break
		}
		res.WriteOps++
	}
	tick.Stop()
	res.Seconds = time.Since(start).Seconds()
	res.ReadOps = reads.Load() - r0
	cpu1 := selfCPU()
	p1 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	stopReaders()
	wg.Wait()
	if firstErr != nil {
		res.Error = firstErr.Error()
	}
	res.Ops = res.ReadOps + res.WriteOps
	slices.Sort(waits)
	res.finish(waits)
	res.lat = waits
	if c, ok := between(p0, p1, cpu1-cpu0); ok {
		res.setPerOp(c)
	}
	res.Violations = violations.Load()
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
