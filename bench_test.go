//go:build go1.24

package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// Benchmarks of zklock's own costs, against the ZooKeeper of
// ZKLOCK_TEST_SERVERS:
//
//	go test -run '^$' -bench . -benchtime 3s
//
// Every client has its own session. Besides ns/op they report acquisitions
// per second, handoff latency, the ZooKeeper requests a client sends per
// acquisition (counted on its connection: pings and the connect handshake
// excluded), and the heap and goroutines a waiting Acquire costs. They
// measure; they assert nothing about time.

// BenchmarkMutexUncontended: one client acquires and releases a free Mutex.
func BenchmarkMutexUncontended(b *testing.B) {
	var rc reqCounter
	m := newMutex(b, connect(b, zklock.WithDialer(rc.dial)), lockPath(b))
	ctx := ctxT(b)
	cycle := func() {
		l, err := m.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cycle() // the lock path exists from here on
	before := rc.snapshot()
	for b.Loop() {
		cycle()
	}
	reqs := rc.snapshot().minus(before)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(float64(reqs.total())/float64(b.N), "zk-req/acq")
	b.Logf("ZooKeeper requests per acquisition: %s", reqs.per(b.N))
}

// BenchmarkMutexContended: several clients, each its own session, contend
// for one Mutex; one op is one handoff, from a holder's Release to the next
// holder's Acquire returning, with every other client queued. Besides
// requests it reports the watch notifications the clients read and the
// CPU time the process (every client, and the loop) used, per handoff.
func BenchmarkMutexContended(b *testing.B) {
	for _, clients := range []int{2, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchContended(b, clients) })
	}
}

func benchContended(b *testing.B, clients int) {
	var rc reqCounter
	path := lockPath(b)
	watcher := connect(b)
	ms := make([]*zklock.Mutex, clients)
	for i := range ms {
		ms[i] = newMutex(b, connect(b, zklock.WithDialer(rc.dial)), path)
	}

	ctx, stop := context.WithCancel(ctxT(b))
	defer stop()
	var (
		mu         sync.Mutex
		releasing  time.Time // when the last holder called Release
		handoffs   []time.Duration
		turn       = make(chan struct{}) // the loop lets the holder release, once per op
		errs       = make(chan error, clients)
		wg         sync.WaitGroup
		background = context.Background()
	)
	for _, m := range ms {
		m := m
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := m.Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				now := time.Now()
				mu.Lock()
				if !releasing.IsZero() {
					handoffs = append(handoffs, now.Sub(releasing))
				}
				mu.Unlock()
				select {
				case <-turn:
				case <-ctx.Done():
				}
				mu.Lock()
				releasing = time.Now()
				mu.Unlock()
				if err := l.Release(background); err != nil {
					errs <- err
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	// Start with everyone queued: one holds, each other watches its
	// predecessor, no request in flight.
	waitQueued(b, &rc, watcher, path, clients, func(string) bool { return true })

	before, events, cpu := rc.snapshot(), rc.events.Load(), selfCPU()
	for b.Loop() {
		select {
		case turn <- struct{}{}:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	elapsed := b.Elapsed()
	reqs := rc.snapshot().minus(before)
	events = rc.events.Load() - events
	cpu = selfCPU() - cpu
	stop()
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(quantile(handoffs, 0.50).Seconds()*1e3, "p50-handoff-ms")
	b.ReportMetric(quantile(handoffs, 0.99).Seconds()*1e3, "p99-handoff-ms")
	b.ReportMetric(float64(reqs.total())/float64(b.N), "zk-req/handoff")
	b.ReportMetric(float64(events)/float64(b.N), "zk-events/handoff")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-us/handoff")
	b.Logf("%d handoffs; ZooKeeper requests per handoff: %s", len(handoffs), reqs.per(b.N))
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// BenchmarkWaitingAcquire: what one waiting Acquire costs its process. One
// client queues N Acquires (each on its own goroutine, as callers do)
// behind a holder of another session; once every one of them is waiting,
// the heap (after a GC) and the goroutine count are compared with before.
// goroutines/waiter counts the caller's own goroutine, so 1 means the
// Acquire itself starts none; extra-goroutines/waiter is what is beyond it.
func BenchmarkWaitingAcquire(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchWaiting(b, n) })
	}
}

func benchWaiting(b *testing.B, n int) {
	var rc reqCounter
	path := lockPath(b)
	other := connect(b)
	held, err := newMutex(b, other, path).Acquire(ctxT(b))
	must(b, err)
	m := newMutex(b, connect(b, zklock.WithDialer(rc.dial)), path)

	var heap, goroutines float64
	rounds := 0
	for b.Loop() {
		rc.forgetWatches() // the holder's node is watched again in each round
		h0, g0 := live()
		ctx, cancel := context.WithCancel(ctxT(b))
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() {
				_, err := m.Acquire(ctx)
				errs <- err
			}()
		}
		waitQueued(b, &rc, other, path, n+1, func(node string) bool { return node != held.Node() })
		h1, g1 := live()
		cancel()
		for i := 0; i < n; i++ {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				b.Fatalf("a waiter returned %v, want it cancelled", err)
			}
		}
		heap += float64(h1-h0) / float64(n)
		goroutines += float64(g1-g0) / float64(n)
		rounds++
	}
	release(b, held)
	b.ReportMetric(heap/float64(rounds), "B/waiter")
	b.ReportMetric(goroutines/float64(rounds), "goroutines/waiter")
	b.ReportMetric(goroutines/float64(rounds)-1, "extra-goroutines/waiter")
}

// live returns the live heap, after a full GC, and the goroutine count.
func live() (heap uint64, goroutines int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

// waitQueued waits until every participant on path is queued and waiting,
// as zklock's protocol says it then is: n nodes, each but the last watched
// by its successor (the last request a waiter makes), and no request of
// rc's in flight. ours names the nodes made through rc: rc sees a watch
// only if the successor that set it is one of them.
func waitQueued(b *testing.B, rc *reqCounter, c *zklock.Client, path string, n int, ours func(node string) bool) {
	b.Helper()
	eventually(b, func() bool {
		kids := children(b, c, path)
		if len(kids) != n {
			return false
		}
		sort.Slice(kids, func(i, j int) bool { return seqOf(kids[i]) < seqOf(kids[j]) })
		for i := 0; i < n-1; i++ {
			if ours(path+"/"+kids[i+1]) && rc.watches(path+"/"+kids[i]) < 1 {
				return false
			}
		}
		return rc.outstanding() == 0
	}, "want %d participants on %s, each watched by its successor, and no request in flight", n, path)
}

// seqOf returns the ten-digit sequence suffix of a lock node's name.
func seqOf(name string) string { return name[len(name)-10:] }
