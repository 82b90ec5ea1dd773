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
