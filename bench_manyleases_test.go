//go:build go1.24

package zklock_test

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// BenchmarkManyLeases: 10,000 leases held on one Client (session timeout
// 4 s), one mutex per path, as a service holding a lock per entity does.
// Once they are held it reports what they cost the process (heap after a
// GC, and goroutines, per lease), the requests the Client sends while
// idle for a whole session timeout (per second), and then, once per op,
// deletes one held node through another Client, as an operator would, and
// measures the time from the delete's reply to the lease's Done (p50 and
// the slowest, in ms), holding a new lease on that path for the next
// round. The figures of the issue this answers: every deleted node ends
// its lease within a third of the timeout plus a second, at most one
// confirmation per third of the timeout while idle, at most 4 KiB and no
// goroutine per lease.
//
//	go test -run '^$' -bench ManyLeases -benchtime 200x
func BenchmarkManyLeases(b *testing.B) {
	const (
		n       = 10000
		timeout = 4 * time.Second
	)
	var rc reqCounter
	c := connect(b, zklock.WithDialer(rc.dial), zklock.WithSessionTimeout(timeout))
	other := connect(b)
	ctx := ctxT(b)
	root := lockPath(b)
	paths := make([]string, n)
	mutexes := make([]*zklock.Mutex, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/entity-%05d", root, i)
		mutexes[i] = newMutex(b, c, paths[i])
	}

	h0, g0 := live()
	start, before := time.Now(), rc.snapshot()
	leases := acquireAll(b, ctx, mutexes)
	acquiring := time.Since(start)
	perAcquire := rc.snapshot().minus(before)
	h1, g1 := live()

	// Idle: a whole session timeout with nothing to do but keep the
	// leases (a measuring window, not a wait for anything).
	idleFrom, idleStart := rc.snapshot(), time.Now()
	time.Sleep(timeout)
	idle := rc.snapshot().minus(idleFrom)
	idleFor := time.Since(idleStart)

	var ends []time.Duration
	i := 0
	for b.Loop() {
		k := i % n
		l := leases[k]
		deleteNode(b, other, l.Node())
		deleted := time.Now()
		select {
		case <-l.Done():
		case <-time.After(long):
			b.Fatalf("the lease on %s did not end after its node was deleted", paths[k])
		}
		ends = append(ends, time.Since(deleted))
		if err := l.Err(); !errors.Is(err, zklock.ErrNodeDeleted) {
			b.Fatalf("lease %d ended with %v, want ErrNodeDeleted", k, err)
		}
		nl, err := mutexes[k].Acquire(ctx)
		must(b, err)
		leases[k] = nl
		i++
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })

	b.ReportMetric(float64(h1-h0)/n, "B/lease")
	b.ReportMetric(float64(g1-g0)/n, "goroutines/lease")
	b.ReportMetric(float64(idle.total())/idleFor.Seconds(), "idle-req/s")
	b.ReportMetric(quantile(ends, 0.5).Seconds()*1e3, "p50-delete-to-done-ms")
	b.ReportMetric(ends[len(ends)-1].Seconds()*1e3, "max-delete-to-done-ms")
	b.Logf("%d leases acquired in %v (%s per acquire); idle for %v: %s in all",
		n, acquiring.Round(time.Millisecond), perAcquire.per(n), idleFor.Round(time.Millisecond), idle.per(1))
}
