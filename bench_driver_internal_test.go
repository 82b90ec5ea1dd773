//go:build go1.24

package zklock

import (
	"testing"
)

// The semaphore driver's decision for a group about to hold, with 1,000
// waiters queued behind: of one size (the usual queue: the nodes behind
// are passed over by a string comparison each), and with a smaller size
// at the back (the count: the groups behind that the rule lets hold are
// asked about, then counted with their marks).
func BenchmarkSemaphoreDecide(b *testing.B) {
	const k, waiters = 3, 1000
	queue := func(last int) []Child {
		spec := make([]string, 0, k+waiters+1)
		for i := 0; i < k+waiters; i++ {
			spec = append(spec, string(rune('A'+i%26))+"3")
		}
		if last > 0 {
			spec = append(spec, "Z"+string(rune('0'+last)))
		}
		return sized(spec...)
	}
	b.Run("one size", func(b *testing.B) {
		kids, d := queue(0), policy(newSemaphorePolicy(3))
		q := question{kids: kids, first: k - 1, last: k - 1}
		for b.Loop() {
			if !d.decide(q).Holds {
				b.Fatal("the third 3 must hold")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/decision")
	})
	b.Run("a 2 behind, counted", func(b *testing.B) {
		kids := queue(2)
		d := policy(newSemaphorePolicy(3))
		q := question{kids: kids, marks: map[int]bool{1: false, 2: true}, marksRead: true}
		for b.Loop() {
			if !d.decide(q).Holds {
				b.Fatal("the first 3, with one unmarked 3 behind, must hold")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/decision")
	})
}
