package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// W5: many locks, one session. One client (one session) and w5Goroutines
// goroutines; each picks one of w5Paths paths at random and takes that
// path's mutex, as a service with a lock per entity does. zklock: one
// Client, a Mutex per path. go-zookeeper: one zk.Conn and a zk.NewLock per
// acquire on the path (a zk.Lock remembers its one node, so goroutines
// cannot share one). Curator (the Java peer): one CuratorFramework, one
// InterProcessMutex per path, shared by its threads.
const (
	w5Goroutines = 64
	w5Paths      = 1000
)

// w5Path is the path of entity i under base; the Java peer names them alike.
func w5Path(base string, i int) string { return fmt.Sprintf("%s/e%04d", base, i) }

// w5Locker is one system's W5 client: acquire path i's mutex.
type w5Locker interface {
	acquire(ctx context.Context, i int) (held, error)
	close()
}

type zklockW5 struct {
	c       *zklock.Client
	mutexes []*zklock.Mutex
}

func newZklockW5(ctx context.Context, spec runSpec) (*zklockW5, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(cctx, spec.servers)
	if err != nil {
		return nil, err
	}
	h := &zklockW5{c: c, mutexes: make([]*zklock.Mutex, spec.paths)}
	for i := range h.mutexes {
		if h.mutexes[i], err = zklock.NewMutex(c, w5Path(spec.path, i)); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return h, nil
}

func (h *zklockW5) acquire(ctx context.Context, i int) (held, error) {
	l, err := h.mutexes[i].Acquire(ctx)
	if err != nil {
		return held{}, err
	}
	return held{token: l.Token(), release: func() error { return l.Release(context.Background()) }}, nil
}

func (h *zklockW5) close() { _ = h.c.Close() }

type gozkW5 struct {
	conn *zk.Conn
	path string
	acl  []zk.ACL
}

func (h *gozkW5) acquire(_ context.Context, i int) (held, error) {
	l := zk.NewLock(h.conn, w5Path(h.path, i), h.acl)
	if err := l.Lock(); err != nil {
		return held{}, err
	}
	return held{release: l.Unlock}, nil
}

func (h *gozkW5) close() { h.conn.Close() }

// runW5 runs W5 for a Go system: spec.clients goroutines on one session,
// spec.paths mutexes. A violation is two holders of one path at once, or
// (zklock) a path's token not above its previous holder's.
func runW5(ctx context.Context, sys string, spec runSpec) Result {
	res := Result{System: sys, Workload: spec.workload, Clients: spec.clients, Note: fmt.Sprintf("one session, %d paths", spec.paths)}
	var h w5Locker
	switch sys {
	case sysZklock:
		zh, err := newZklockW5(ctx, spec)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		h = zh
	case sysGozk:
		conn, err := connectZK(spec.servers, 10*time.Second)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		h = &gozkW5{conn: conn, path: spec.path, acl: zk.WorldACL(zk.PermAll)}
	default:
		res.Error = fmt.Sprintf("%s does not run W5 here", sys)
		return res
	}
	var closeOnce sync.Once
	closeAll := func() { closeOnce.Do(h.close) }
	defer closeAll()

	holders := make([]atomic.Int32, spec.paths)
	tokens := make([]atomic.Int64, spec.paths)
	var violations, regressions atomic.Int64
	smp := newSamples(spec.clients)
	ops := make([]int64, spec.clients)
	timeouts := make([]int64, spec.clients)
	errs := make([]error, spec.clients)

	p0 := takeProbe(ctx, spec.servers[0], spec.serverCPU)
	cpu0 := selfCPU()
	start := time.Now()
	deadline := start.Add(spec.duration)
	actx, cancel := context.WithDeadline(ctx, deadline.Add(spec.acquireTimeout))
	defer cancel()
	watchdog := time.AfterFunc(spec.duration+spec.acquireTimeout+5*time.Second, closeAll)
	defer watchdog.Stop()

	var wg sync.WaitGroup
	for g := range spec.clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			for time.Now().Before(deadline) {
				i := r.IntN(spec.paths)
				t0 := time.Now()
				hd, err := h.acquire(actx, i)
				lat := time.Since(t0)
				if err != nil {
					if actx.Err() != nil {
						timeouts[g]++
						return
					}
					errs[g] = err
					return
				}
				smp.add(g, lat)
				if holders[i].Add(1) > 1 {
					violations.Add(1)
				}
				if hd.token != 0 {
					if prev := tokens[i].Swap(hd.token); hd.token <= prev {
						regressions.Add(1)
					}
				}
				if spec.hold > 0 {
					time.Sleep(spec.hold)
				}
				holders[i].Add(-1)
				if err := hd.release(); err != nil {
					errs[g] = fmt.Errorf("release: %w", err)
					return
				}
				ops[g]++
			}
		})
	}
	wg.Wait()
	seconds := time.Since(start).Seconds()
	cpu1 := selfCPU()
	p1 := takeProbe(ctx, spec.servers[0], spec.serverCPU)

	all := smp.sorted()
	for g := range ops {
		res.WriteOps += ops[g]
		res.Timeouts += timeouts[g]
		if errs[g] != nil && res.Error == "" {
			res.Error = fmt.Sprintf("goroutine %d: %v", g, errs[g])
		}
	}
	res.Ops = res.WriteOps
	res.Seconds = seconds
	res.finish(all)
	res.lat = all
	if c, ok := between(p0, p1, cpu1-cpu0); ok {
		res.setPerOp(c)
	}
	res.Violations = violations.Load() + regressions.Load()
	res.TokenRegressions = regressions.Load()
	return res
}

// medianRatio is the median over rounds of a's ops/s over b's in the same
// round, with the per-round ratios.
func medianRatio(a, b []Result) (float64, []float64) {
	var rs []float64
	for i := range a {
		if i < len(b) && a[i].Error == "" && b[i].Error == "" && b[i].OpsPerSec > 0 {
			rs = append(rs, a[i].OpsPerSec/b[i].OpsPerSec)
		}
	}
	if len(rs) == 0 {
		return 0, nil
	}
	s := append([]float64(nil), rs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, rs
}

// w5Medians computes W5's targets: the medians over rounds of zklock's
// ops/s over zk.Lock's and over Curator's, and zklock's requests per op.
func w5Medians(runs map[entry][]Result) []Ratio {
	z := runs[entry{"W5", sysZklock}]
	if len(z) == 0 {
		return nil
	}
	var out []Ratio
	for _, o := range []struct {
		sys       string
		name      string
		threshold float64
	}{{sysGozk, "W5 zklock / zk.Lock, ops/s, median of rounds", 1.2}, {sysCurator, "W5 zklock / Curator, ops/s, median of rounds", 1.5}} {
		m, rs := medianRatio(z, runs[entry{"W5", o.sys}])
		detail := "rounds:"
		for _, r := range rs {
			detail += fmt.Sprintf(" %.3f", r)
		}
		out = append(out, ratio(o.name, ">=", o.threshold, m, len(rs) > 0, detail))
	}
	return out
}
