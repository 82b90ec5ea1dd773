package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// chartSystems is the bar order within a group, and each system's colour.
var chartSystems = []struct{ sys, color string }{
	{sysRaw, "#9e9e9e"},
	{sysZklock, "#1565c0"},
	{sysGozk, "#2e7d32"},
	{sysCurator, "#ef6c00"},
	{sysKazoo, "#6a1b9a"},
}

var workloadTitles = map[string]string{
	"W0": "W0 raw floor, 1 client",
	"W1": "W1 free mutex, 1 client",
	"W2": "W2 mutex, %d clients",
	"W3": "W3 RW lock, %d clients",
	"W4": "W4 semaphore(%d), %d clients",
}

// chartSVG draws throughput per workload per system as grouped bars, with
// the machine and the date in the caption. It needs no library: the SVG is
// written by hand.
func chartSVG(rep *report) string {
	type bar struct {
		sys   string
		value float64
	}
	type group struct {
		title string
		bars  []bar
	}
	var groups []group
	for _, w := range []string{"W0", "W1", "W2", "W3", "W4"} {
		var g group
		switch w {
		case "W2", "W3":
			g.title = fmt.Sprintf(workloadTitles[w], rep.Config.Clients)
		case "W4":
			g.title = fmt.Sprintf(workloadTitles[w], rep.Config.Leases, rep.Config.Clients)
		default:
			g.title = workloadTitles[w]
		}
		for _, cs := range chartSystems {
			if r := find(rep, cs.sys, w); r != nil {
				g.bars = append(g.bars, bar{cs.sys, r.OpsPerSec})
			}
		}
		if len(g.bars) > 0 {
			groups = append(groups, g)
		}
	}

	const (
		width   = 1040
		height  = 540
		left    = 78
		right   = 20
		top     = 112
		bottom  = 96
		plotW   = width - left - right
		plotH   = height - top - bottom
		barGap  = 4
		groupPd = 18
	)
	maxV := 0.0
	for _, g := range groups {
		for _, b := range g.bars {
			maxV = max(maxV, b.value)
		}
	}
	step := niceStep(maxV / 5)
	ymax := math.Ceil(maxV/step) * step
	if ymax == 0 {
		ymax = 1
	}
	y := func(v float64) float64 { return top + plotH - v/ymax*plotH }

	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="30" font-size="19" font-weight="bold">Lock throughput on one ZooKeeper: acquire+release per second (higher is better)</text>`+"\n", left)
	m := rep.Machine
	p(`<text x="%d" y="52" font-size="13" fill="#444">%s</text>`+"\n", left, esc(fmt.Sprintf(
		"%s · %d × %s · %s · %s · load %s", rep.Date, m.NumCPU, m.CPU, m.OS, m.Go, m.LoadAvg)))
	p(`<text x="%d" y="70" font-size="13" fill="#444">%s</text>`+"\n", left, esc(fmt.Sprintf(
		"ZooKeeper %s standalone, %s", rep.Server.Version, rep.Server.Source)))
	p(`<text x="%d" y="88" font-size="13" fill="#444">%s</text>`+"\n", left, esc(fmt.Sprintf(
		"%s × %d rounds per system per workload, systems alternating · one session per client · W3 %d%% reads",
		fmtDuration(rep.Config.DurationMs), max(rep.Config.Rounds, 1), rep.Config.ReadPct)))

	// Grid and y axis.
	for v := 0.0; v <= ymax+step/2; v += step {
		yy := y(v)
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, yy, width-right, yy)
		p(`<text x="%d" y="%.1f" font-size="12" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, yy+4, fmtNum(v))
	}
	p(`<text transform="translate(18 %d) rotate(-90)" font-size="13" text-anchor="middle" fill="#333">ops/s</text>`+"\n", top+plotH/2)
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, top+plotH, width-right, top+plotH)

	if len(groups) > 0 {
		gw := float64(plotW) / float64(len(groups))
		slots := 0
		for _, g := range groups {
			slots = max(slots, len(g.bars))
		}
		bw := (gw - 2*groupPd - float64(barGap*(slots-1))) / float64(slots)
		bw = min(bw, 56)
		for gi, g := range groups {
			gx := float64(left) + gw*float64(gi)
			inner := float64(len(g.bars))*bw + float64(barGap*(len(g.bars)-1))
			x0 := gx + (gw-inner)/2
			for i, br := range g.bars {
				x := x0 + float64(i)*(bw+barGap)
				yy := y(br.value)
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.1f ops/s</title></rect>`+"\n",
					x, yy, bw, float64(top+plotH)-yy, colorOf(br.sys), esc(systemLabel(br.sys)), br.value)
				p(`<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#222">%s</text>`+"\n",
					x+bw/2, yy-4, fmtNum(br.value))
			}
			p(`<text x="%.1f" y="%d" font-size="13" text-anchor="middle" fill="#222">%s</text>`+"\n",
				gx+gw/2, top+plotH+20, esc(g.title))
		}
	}

	// Legend.
	lx := float64(left)
	ly := height - 34
	for _, cs := range chartSystems {
		if !slices.ContainsFunc(rep.Results, func(r Result) bool { return r.System == cs.sys && r.Error == "" }) {
			continue
		}
		label := systemLabel(cs.sys)
		if cs.sys == sysCurator {
			label = "Apache Curator 5.4 (Java)"
		} else if cs.sys == sysKazoo {
			label = "kazoo 2.8 (Python)"
		} else if cs.sys == sysZklock {
			label = "zklock (Go)"
		}
		p(`<rect x="%.1f" y="%d" width="14" height="14" fill="%s"/>`+"\n", lx, ly-11, cs.color)
		p(`<text x="%.1f" y="%d" font-size="13" fill="#222">%s</text>`+"\n", lx+19, ly+1, esc(label))
		lx += 19 + 7.2*float64(len(label)) + 22
	}
	p(`<text x="%d" y="%d" font-size="11" fill="#666">go run ./tools/zkbench · results: docs/bench/results.json</text>`+"\n", left, height-10)
	p("</svg>\n")
	return b.String()
}

func colorOf(sys string) string {
	for _, cs := range chartSystems {
		if cs.sys == sys {
			return cs.color
		}
	}
	return "#000"
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtDuration(ms int64) string {
	if ms%1000 == 0 {
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%.1fs", float64(ms)/1000)
}

func esc(s string) string { return html.EscapeString(s) }
