package main

import (
	"slices"
	"sync"
	"time"
)

// percentileMs returns the nearest-rank p-th percentile (0 < p <= 1) of
// sorted, in milliseconds, or 0 when there are no samples. It is the rule
// the Java and Python peers use, so the three report the same statistic.
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// ceil(p*n) in integer arithmetic on per-mille, as the Python peer does,
	// so 0.99*100 is exactly 99 and not 99.00000000000001.
	pm := int(p*1000 + 0.5)
	rank := (pm*len(sorted) + 999) / 1000
	idx := min(max(rank-1, 0), len(sorted)-1)
	return float64(sorted[idx]) / float64(time.Millisecond)
}

// samples collects latencies from several goroutines, each with its own
// slice, so recording never contends.
type samples struct {
	per [][]time.Duration
}

func newSamples(clients int) *samples {
	s := &samples{per: make([][]time.Duration, clients)}
	for i := range s.per {
		s.per[i] = make([]time.Duration, 0, 4096)
	}
	return s
}

func (s *samples) add(client int, d time.Duration) { s.per[client] = append(s.per[client], d) }

// sorted merges every client's samples in ascending order.
func (s *samples) sorted() []time.Duration {
	var n int
	for _, p := range s.per {
		n += len(p)
	}
	all := make([]time.Duration, 0, n)
	for _, p := range s.per {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}

// Kinds of acquisition, as the peers name them.
const (
	kindMutex = 'm'
	kindRead  = 'r'
	kindWrite = 'w'
	kindSem   = 's'
)

// occupancy is the in-process view of who holds the lock under test: the
// bench's clients all live in this process, so any overlap that the lock
// should have excluded is seen here. It mirrors the peers' Occupancy.
//
// For the mutex it also checks fencing tokens: each holder's token must be
// greater than the previous holder's.
type occupancy struct {
	mu               sync.Mutex
	holders          int
	readers, writers int
	violations       int64
	maxReaders       int
	maxHolders       int
	lastToken        int64
	tokenRegressions int64
	limit            int // semaphore leases
}

// enter is called right after an acquire returns. token is the lease's
// fencing token, or 0 when the system has none.
func (o *occupancy) enter(kind byte, token int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holders++
	o.maxHolders = max(o.maxHolders, o.holders)
	switch kind {
	case kindMutex:
		if o.holders > 1 {
			o.violations++
		}
		if token != 0 {
			if token <= o.lastToken {
				o.tokenRegressions++
			}
			o.lastToken = token
		}
	case kindSem:
		if o.holders > o.limit {
			o.violations++
		}
	case kindRead:
		o.readers++
		o.maxReaders = max(o.maxReaders, o.readers)
		if o.writers > 0 {
			o.violations++
		}
	case kindWrite:
		o.writers++
		if o.writers > 1 || o.readers > 0 {
			o.violations++
		}
	}
}

// leave is called right before the release.
func (o *occupancy) leave(kind byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch kind {
	case kindRead:
		o.readers--
	case kindWrite:
		o.writers--
	}
	o.holders--
}

// mergeRounds combines one system's rounds of one workload: counts add up,
// maxima are maxima, per-op costs are weighted by ops. Percentiles are
// exact when every round kept its latencies (Go systems) and otherwise the
// ops-weighted mean of the rounds' percentiles (peers report only those).
// A round that failed makes the whole result fail.
func mergeRounds(rs []Result) Result {
	if len(rs) == 1 {
		return rs[0]
	}
	m := Result{System: rs[0].System, Workload: rs[0].Workload, Clients: rs[0].Clients,
		ReadPct: rs[0].ReadPct, Leases: rs[0].Leases, Note: rs[0].Note, Rounds: len(rs)}
	exact := true
	var lat []time.Duration
	var p50, p99, req, rd, wr, ccpu, scpu float64
	for _, r := range rs {
		if r.Error != "" && m.Error == "" {
			m.Error = r.Error
		}
		m.Ops += r.Ops
		m.ReadOps += r.ReadOps
		m.WriteOps += r.WriteOps
		m.Seconds += r.Seconds
		m.Violations += r.Violations
		m.TokenRegressions += r.TokenRegressions
		m.Timeouts += r.Timeouts
		m.MaxConcurrentReaders = max(m.MaxConcurrentReaders, r.MaxConcurrentReaders)
		m.MaxConcurrentHolders = max(m.MaxConcurrentHolders, r.MaxConcurrentHolders)
		if r.lat == nil {
			exact = false
		}
		lat = append(lat, r.lat...)
		n := float64(r.Ops)
		p50 += n * r.AcquireP50Ms
		p99 += n * r.AcquireP99Ms
		req += n * r.RequestsPerOp
		rd += n * r.ReadsPerOp
		wr += n * r.WritesPerOp
		ccpu += n * r.ClientCPUUsPerOp
		scpu += n * r.ServerCPUUsPerOp
	}
	if exact {
		slices.Sort(lat)
		m.finish(lat)
		m.lat = lat
	} else {
		m.finish(nil)
		if m.Ops > 0 {
			m.AcquireP50Ms, m.AcquireP99Ms = p50/float64(m.Ops), p99/float64(m.Ops)
		}
	}
	if m.Ops > 0 {
		n := float64(m.Ops)
		m.RequestsPerOp, m.ReadsPerOp, m.WritesPerOp = req/n, rd/n, wr/n
		m.ClientCPUUsPerOp, m.ServerCPUUsPerOp = ccpu/n, scpu/n
	}
	return m
}
