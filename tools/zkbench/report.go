package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Ratio is one of the targets, measured in this run.
type Ratio struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Op        string  `json:"op"` // ">=" or "<="
	Threshold float64 `json:"threshold"`
	Status    string  `json:"status"` // PASS, MISS or n/a
	Detail    string  `json:"detail"`
}

// find returns the successful result of sys on workload, or nil.
func find(rep *report, sys, workload string) *Result {
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.System == sys && r.Workload == workload && r.Error == "" && r.Ops > 0 {
			return r
		}
	}
	return nil
}

func ratio(name, op string, threshold float64, value float64, ok bool, detail string) Ratio {
	r := Ratio{Name: name, Op: op, Threshold: threshold, Detail: detail, Status: "n/a"}
	if !ok || math.IsNaN(value) || math.IsInf(value, 0) {
		return r
	}
	r.Value = value
	pass := value >= threshold
	if op == "<=" {
		pass = value <= threshold
	}
	r.Status = "MISS"
	if pass {
		r.Status = "PASS"
	}
	return r
}

// ratios computes the targets from one run's results.
func ratios(rep *report) []Ratio {
	var out []Ratio
	div := func(a, b *Result, f func(*Result) float64) (float64, bool, string) {
		if a == nil || b == nil || f(b) == 0 {
			return 0, false, "not measured"
		}
		return f(a) / f(b), true, fmt.Sprintf("%.1f / %.1f", f(a), f(b))
	}
	ops := func(r *Result) float64 { return r.OpsPerSec }
	p50 := func(r *Result) float64 { return r.AcquireP50Ms }
	readOps := func(r *Result) float64 { return r.ReadOpsPerSec }

	v, ok, d := div(find(rep, sysZklock, "W1"), find(rep, sysRaw, "W0"), ops)
	out = append(out, ratio("W1 zklock / W0 raw floor, ops/s", ">=", 0.9, v, ok, d))
	v, ok, d = div(find(rep, sysZklock, "W2"), find(rep, sysCurator, "W2"), ops)
	out = append(out, ratio("W2 zklock / Curator, ops/s", ">=", 1.5, v, ok, d))
	v, ok, d = div(find(rep, sysZklock, "W2"), find(rep, sysGozk, "W2"), ops)
	out = append(out, ratio("W2 zklock / zk.Lock, ops/s", ">=", 1.2, v, ok, d))
	v, ok, d = div(find(rep, sysZklock, "W2"), find(rep, sysCurator, "W2"), p50)
	if ok {
		d += " ms (acquire p50 with 8 queued: each waits ~7 handoffs)"
	}
	out = append(out, ratio("W2 handoff p50 zklock / Curator", "<=", 0.7, v, ok, d))
	v, ok, d = div(find(rep, sysZklock, "W3"), find(rep, sysCurator, "W3"), readOps)
	out = append(out, ratio("W3 read ops/s zklock / Curator", ">=", 1.5, v, ok, d))
	v, ok, d = div(find(rep, sysZklock, "W4"), find(rep, sysCurator, "W4"), ops)
	out = append(out, ratio("W4 zklock / Curator SemaphoreV2, ops/s", ">=", 2, v, ok, d))

	var zs []ScaleResult
	for _, s := range rep.Scale {
		if s.System == sysZklock && s.Error == "" {
			zs = append(zs, s)
		}
	}
	if len(zs) < 2 {
		out = append(out,
			ratio("Scale requests/handoff, max/min over N", "<=", 1.1, 0, false, "not measured"),
			ratio("Scale heap per waiting Acquire, bytes (max over N)", "<=", 4096, 0, false, "not measured"),
			ratio("Scale extra goroutines while N Acquires wait (max over N)", "<=", 0, 0, false, "not measured"))
		return out
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	heap := math.Inf(-1)
	var parts, hparts, gparts []string
	sessions := 0
	for _, s := range zs {
		lo, hi = min(lo, s.RequestsPerHandoff), max(hi, s.RequestsPerHandoff)
		heap = max(heap, s.HeapBytesPerWaiter)
		// O(1) goroutines per Client are allowed: spread them over the
		// waiters.
		sessions = max(sessions, s.Sessions+1)
		parts = append(parts, fmt.Sprintf("N=%d: %.2f", s.Waiters, s.RequestsPerHandoff))
		hparts = append(hparts, fmt.Sprintf("N=%d: %.0f", s.Waiters, s.HeapBytesPerWaiter))
		gparts = append(gparts, fmt.Sprintf("N=%d: %+d", s.Waiters, s.ExtraGoroutines))
	}
	out = append(out, ratio("Scale requests/handoff, max/min over N", "<=", 1.1, hi/lo, lo > 0, strings.Join(parts, ", ")))
	out = append(out, ratio("Scale heap per waiting Acquire, bytes (max over N)", "<=", 4096, heap, true, strings.Join(hparts, ", ")))
	// Beyond each waiter's own goroutine, a Client may have O(1) of its
	// own: allow one per Client.
	maxExtra := math.Inf(-1)
	for _, s := range zs {
		maxExtra = max(maxExtra, float64(s.ExtraGoroutines))
	}
	out = append(out, ratio("Scale extra goroutines while N Acquires wait (max over N)", "<=",
		float64(sessions), maxExtra, true,
		strings.Join(gparts, ", ")+fmt.Sprintf("; beyond one per waiter; allowed O(1) per Client (%d Clients)", sessions)))
	return out
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\n%d × %s, %s, ZooKeeper %s (%s), %s, zklock %s\n%v × %d rounds per system per workload, %d clients in W2-W4, hold %vµs\n\n",
		rep.Machine.NumCPU, rep.Machine.CPU, rep.Machine.Go, rep.Server.Version, rep.Server.Source, rep.Date, rep.Commit,
		time.Duration(rep.Config.DurationMs)*time.Millisecond, rep.Config.Rounds, rep.Config.Clients, rep.Config.HoldUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "(W6: p50 and p99 are the writer's acquire wait, timeouts its acquires over the acquire timeout)")
	fmt.Fprintln(tw, "workload\tsystem\tclients\tops/s\tp50 ms\tp99 ms\tviolations\tread ops/s\twrite ops/s\tmax readers\ttimeouts\t")
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\terror: %s\t\t\t\t\t\t\t\t\n", r.Workload, systemLabel(r.System), r.Clients, short(r.Error))
			continue
		}
		rw, wr, mr := "", "", ""
		if r.Workload == "W3" || r.Workload == "W6" {
			rw = fmt.Sprintf("%.1f", r.ReadOpsPerSec)
			wr = fmt.Sprintf("%.1f", r.WriteOpsPerSec)
			mr = fmt.Sprint(r.MaxConcurrentReaders)
		}
		viol := fmt.Sprint(r.Violations)
		if r.TokenRegressions > 0 {
			viol += fmt.Sprintf(" (+%d token)", r.TokenRegressions)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%d\t\n",
			r.Workload, systemLabel(r.System), r.Clients, r.OpsPerSec, r.AcquireP50Ms, r.AcquireP99Ms,
			viol, rw, wr, mr, r.Timeouts)
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\ncost per acquire+release: requests the server received (mntr; reads include pings) and CPU time\n(Go systems: over the timed loop; peers: whole process less an empty run's)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tsystem\trequests/op\treads/op\twrites/op\tclient CPU µs/op\tserver CPU µs/op\t")
	for _, r := range rep.Results {
		if r.Error != "" || r.RequestsPerOp == 0 {
			continue
		}
		srvCPU := "-"
		if r.ServerCPUUsPerOp != 0 {
			srvCPU = fmt.Sprintf("%.0f", r.ServerCPUUsPerOp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t\n", r.Workload, systemLabel(r.System),
			r.RequestsPerOp, r.ReadsPerOp, r.WritesPerOp, r.ClientCPUUsPerOp, srvCPU)
	}
	_ = tw.Flush()

	if len(rep.Scale) > 0 {
		fmt.Fprintf(w, "\nscale: N waiters on one mutex over %d sessions; requests per handoff from mntr deltas over the handoff chain\n\n", rep.Config.ScaleSessions)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\tN\trequests/handoff\treads\twrites\thandoff p50 ms\thandoff p99 ms\thandoffs/s\theap B/waiter\tgoroutines/waiter\t")
		for _, s := range rep.Scale {
			if s.Error != "" {
				fmt.Fprintf(tw, "%s\t%d\terror: %s\t\t\t\t\t\t\t\t\n", systemLabel(s.System), s.Waiters, short(s.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t\n",
				systemLabel(s.System), s.Waiters, s.RequestsPerHandoff, s.ReadsPerHandoff, s.WritesPerHandoff,
				s.HandoffP50Ms, s.HandoffP99Ms, s.HandoffsPerSec, s.HeapBytesPerWaiter, s.GoroutinesPerWaiter)
		}
		_ = tw.Flush()
	}

	printDelay(w, rep)
	printDeep(w, rep)

	fmt.Fprintf(w, "\ntargets (ratios within this run)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range append(append([]Ratio(nil), rep.Ratios...), rep.Medians...) {
		val := "-"
		if r.Status != "n/a" {
			val = fmt.Sprintf("%.3f", r.Value)
			if r.Threshold >= 100 {
				val = fmt.Sprintf("%.0f", r.Value)
			}
		}
		target := fmt.Sprintf("%s %g", r.Op, r.Threshold)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Status, r.Name, val, target, r.Detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\ntotal %.0fs\n", rep.TotalSeconds)
}

func short(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
