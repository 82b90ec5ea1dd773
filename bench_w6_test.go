//go:build go1.24

package zklock_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// BenchmarkW6ReadHeavy is W6, "read-heavy service": 4 Clients, each with 16
// goroutines taking the read side of one RWMutex in a loop (held for no
// time), and a writer on a Client of its own that takes the write side every
// 100 ms and holds it 1 ms. One op is one writer period, so run it with a
// count of periods: `-bench W6 -benchtime 30x`. It reports the reads per
// second of all 64 goroutines, the writer's acquire wait (p50, p99), its
// timeouts (an acquire slower than 10 s) and reader leases seen held while
// the writer held (violations), with and without WithSharedReads.
func BenchmarkW6ReadHeavy(b *testing.B) {
	for _, shared := range []bool{true, false} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) { benchW6(b, shared) })
	}
}

const (
	w6Clients    = 4
	w6Goroutines = 16
	w6Period     = 100 * time.Millisecond
	w6Hold       = time.Millisecond
	w6Timeout    = 10 * time.Second
)

func benchW6(b *testing.B, shared bool) {
	path := lockPath(b)
	var opts []zklock.LockOption
	if shared {
		opts = append(opts, zklock.WithSharedReads())
	}
	writer, err := zklock.NewRWMutex(connect(b), path)
	must(b, err)

	ctx, stop := context.WithCancel(ctxT(b))
	defer stop()
	var (
		reads, violations atomic.Int64
		writing           atomic.Bool
		wg                sync.WaitGroup
		errs              = make(chan error, w6Clients*w6Goroutines)
	)
	for c := 0; c < w6Clients; c++ {
		rw, err := zklock.NewRWMutex(connect(b), path, opts...)
		must(b, err)
		for g := 0; g < w6Goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					l, err := rw.ReadLock().Acquire(ctx)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					if writing.Load() {
						violations.Add(1)
					}
					reads.Add(1)
					if err := l.Release(context.Background()); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	eventually(b, func() bool { return reads.Load() > 0 }, "readers under way")

	var waits []time.Duration
	timeouts := 0
	tick := time.NewTicker(w6Period)
	defer tick.Stop()
	r0 := reads.Load()
	for b.Loop() {
		select {
		case <-tick.C:
		case err := <-errs:
			b.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, w6Timeout)
		t0 := time.Now()
		w, err := writer.WriteLock().Acquire(actx)
		wait := time.Since(t0)
		cancel()
		if err != nil {
			if actx.Err() != nil {
				timeouts++
				continue
			}
			b.Fatal(err)
		}
		waits = append(waits, wait)
		writing.Store(true)
		time.Sleep(w6Hold) // the writer's work
		writing.Store(false)
		if err := w.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := b.Elapsed()
	n := reads.Load() - r0
	stop()
	waitGroup(b, &wg, "readers")
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	b.ReportMetric(float64(n)/elapsed.Seconds(), "reads/s")
	b.ReportMetric(float64(len(waits)), "writes")
	b.ReportMetric(quantile(waits, 0.50).Seconds()*1e3, "p50-write-wait-ms")
	b.ReportMetric(quantile(waits, 0.99).Seconds()*1e3, "p99-write-wait-ms")
	b.ReportMetric(float64(timeouts), "write-timeouts")
	b.ReportMetric(float64(violations.Load()), "violations")
}
