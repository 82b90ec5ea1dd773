//go:build go1.24

package zklock_test

import (
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zklock"
)

// BenchmarkTraceOverhead: the uncontended acquire and release of
// BenchmarkMutexUncontended, with no Trace, with an empty Trace (every hook
// nil) and with every hook set to a counter. Compare ns/op and allocs/op
// across the three (benchstat over -count runs): a nil hook costs nothing,
// a set one no allocation beyond what it reports.
func BenchmarkTraceOverhead(b *testing.B) {
	var events atomic.Int64
	count := func() { events.Add(1) }
	counting := &zklock.Trace{
		Queued:   func(zklock.AcquireInfo) { count() },
		Acquired: func(zklock.AcquireInfo) { count() },
		Failed:   func(zklock.AcquireInfo) { count() },
		Released: func(zklock.LeaseInfo) { count() },
		Lost:     func(zklock.LeaseInfo) { count() },
		Session:  func(zklock.SessionInfo) { count() },
	}
	for _, tc := range []struct {
		name  string
		trace *zklock.Trace
	}{{"none", nil}, {"empty", &zklock.Trace{}}, {"counting", counting}} {
		b.Run(tc.name, func(b *testing.B) {
			var opts []zklock.Option
			if tc.trace != nil {
				opts = append(opts, zklock.WithTrace(tc.trace))
			}
			m := newMutex(b, connect(b, opts...), lockPath(b))
			ctx := ctxT(b)
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
		})
	}
}
