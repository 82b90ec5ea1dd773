//go:build go1.24

package zklock_test

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/zkrecipes/zklock"
)

// BenchmarkManyLocksOneClient: zkbench's W5 as a Go benchmark, for
// profiling: one Client, 64 goroutines, 1,000 paths, a Mutex per path;
// each op is one goroutine's acquire and release of a path picked at
// random. Every path is taken once before the clock starts, so the
// figures leave out the creation of the lock paths. An op is counted when
// a goroutine takes it, so up to 64 are still running when the clock
// stops: run thousands (-benchtime 10000x) for a figure that means
// anything.
//
//	go test -run '^$' -bench ManyLocksOneClient -benchtime 10000x -cpuprofile cpu.out
func BenchmarkManyLocksOneClient(b *testing.B) {
	const (
		goroutines = 64
		paths      = 1000
	)
	var rc reqCounter
	c := connect(b, zklock.WithDialer(rc.dial))
	ctx := ctxT(b)
	root := lockPath(b)
	mutexes := make([]*zklock.Mutex, paths)
	for i := range mutexes {
		mutexes[i] = newMutex(b, c, fmt.Sprintf("%s/e%04d", root, i))
		l, err := mutexes[i].Acquire(ctx)
		must(b, err)
		release(b, l)
	}

	work := make(chan int)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				l, err := mutexes[i].Acquire(ctx)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	rnd := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	before := rc.snapshot()
	for b.Loop() {
		select {
		case work <- rnd.Intn(paths):
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	reqs := rc.snapshot().minus(before)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(float64(reqs.total())/float64(b.N), "zk-req/acq")
	b.Logf("ZooKeeper requests per acquisition: %s", reqs.per(b.N))
}
