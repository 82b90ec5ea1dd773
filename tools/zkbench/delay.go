package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zklock/zktest"
)

// The delayed workloads (issue 37): W1 and W2 through a zktest.Delayer in
// front of the server, so that every client sees a round trip of about
// -delay-rtt (3ms by default, a link between zones) instead of loopback's
// tens of microseconds. There every handoff costs what its messages cost
// in network delays, which loopback hides: a release reaching the server,
// its notification reaching the waiter, and whatever the waiter must read
// before it knows it holds.
const (
	wDelayed1 = "W1d"
	wDelayed2 = "W2d"
)

// isDelayed reports whether workload w runs through the Delayer.
func isDelayed(w string) bool { return w == wDelayed1 || w == wDelayed2 }

// peerWorkload is the workload a peer runs for w: a delayed workload is
// its loopback one through the Delayer.
func peerWorkload(w string) string {
	if isDelayed(w) {
		return strings.TrimSuffix(w, "d")
	}
	return w
}

// startDelayers puts a Delayer in front of each server if a delayed
// workload is to run, and returns the addresses to give clients there
// and how to stop them.
func startDelayers(workloads []string, servers []string, rtt time.Duration) ([]string, func(), error) {
	var ds []*zktest.Delayer
	stop := func() {
		for _, d := range ds {
			_ = d.Close()
		}
	}
	if !slices.ContainsFunc(workloads, isDelayed) {
		return nil, stop, nil
	}
	var addrs []string
	for _, s := range servers {
		d, err := zktest.NewDelayer(s, rtt)
		if err != nil {
			stop()
			return nil, nil, err
		}
		ds = append(ds, d)
		addrs = append(addrs, d.Addr())
	}
	return addrs, stop, nil
}

// DelayRow is one system's figure on one delayed workload: the median of
// its rounds' ops/s.
type DelayRow struct {
	Workload  string    `json:"workload"`
	RTTMs     float64   `json:"rtt_ms"`
	System    string    `json:"system"`
	OpsPerSec float64   `json:"ops_per_sec"` // median of the rounds
	Rounds    []float64 `json:"rounds_ops_per_sec"`
}

// delaySystems are the systems the delayed workloads compare.
var delaySystems = []string{sysZklock, sysGozk, sysCurator}

// delayRows takes the medians of the delayed workloads' rounds.
func delayRows(runs map[entry][]Result, rtt time.Duration) []DelayRow {
	var rows []DelayRow
	for _, w := range []string{wDelayed2, wDelayed1} {
		for _, sys := range delaySystems {
			rs := runs[entry{w, sys}]
			var v []float64
			for _, r := range rs {
				if r.Error == "" && r.Ops > 0 {
					v = append(v, r.OpsPerSec)
				}
			}
			if len(v) > 0 {
				rows = append(rows, DelayRow{Workload: w, RTTMs: float64(rtt.Microseconds()) / 1000, System: sys, OpsPerSec: median(v), Rounds: v})
			}
		}
	}
	return rows
}

// delayMedians computes the targets through the delay: the median
// over rounds of zklock's ops/s over the best peer's in the same round,
// at least 1.5 on W2 and, on W1, not below the lead measured before the
// change (1.42).
func delayMedians(runs map[entry][]Result) []Ratio {
	var out []Ratio
	for _, t := range []struct {
		w         string
		threshold float64
	}{{wDelayed2, 1.5}, {wDelayed1, 1.42}} {
		z := runs[entry{t.w, sysZklock}]
		if len(z) == 0 {
			continue
		}
		var rs []float64
		for i, r := range z {
			if best := bestPeerRound(runs, t.w, i); r.Error == "" && best > 0 {
				rs = append(rs, r.OpsPerSec/best)
			}
		}
		out = append(out, ratio(t.w+" (delayed) zklock / best peer, ops/s, median of rounds", ">=", t.threshold,
			median(rs), len(rs) > 0, "rounds:"+joinF(rs, " %.3f")))
	}
	return out
}

// bestPeerRound is the best peer's ops/s in round i of workload w.
func bestPeerRound(runs map[entry][]Result, w string, i int) float64 {
	best := 0.0
	for _, sys := range []string{sysGozk, sysCurator} {
		if rs := runs[entry{w, sys}]; i < len(rs) && rs[i].Error == "" {
			best = max(best, rs[i].OpsPerSec)
		}
	}
	return best
}

// printDelay prints the delayed workloads in the shape of the issue's
// table.
func printDelay(w io.Writer, rep *report) {
	if len(rep.Delay) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthrough a delayed link (round trip %gms, half each way): ops/s, medians of %d rounds of %v\n\n",
		rep.Delay[0].RTTMs, rep.Config.Rounds, time.Duration(rep.Config.DurationMs)*time.Millisecond)
	tw := newTable(w)
	fmt.Fprintln(tw, "workload through the delay\tzklock\tzk.Lock\tCurator 5.4\tzklock vs best peer\t")
	for _, wl := range []string{wDelayed2, wDelayed1} {
		cells := map[string]float64{}
		for _, r := range rep.Delay {
			if r.Workload == wl {
				cells[r.System] = r.OpsPerSec
			}
		}
		if len(cells) == 0 {
			continue
		}
		row := delayTitle(wl, rep.Config.Clients)
		for _, sys := range delaySystems {
			row += "\t" + rate(cells[sys])
		}
		vs := "-"
		if best := max(cells[sysGozk], cells[sysCurator]); cells[sysZklock] > 0 && best > 0 {
			vs = fmt.Sprintf("%.2fx", cells[sysZklock]/best)
		}
		fmt.Fprintln(tw, row+"\t"+vs+"\t")
	}
	_ = tw.Flush()
}

func delayTitle(w string, clients int) string {
	if w == wDelayed1 {
		return "W1, one client, free mutex"
	}
	return fmt.Sprintf("W2, %d clients, one mutex", clients)
}

func rate(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/s", v)
}
