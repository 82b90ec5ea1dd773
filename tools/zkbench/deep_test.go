package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDeepCasesAndLabels(t *testing.T) {
	cfg := config{deepNs: []int{100, 3000}, deepOneNs: []int{1000}, deepSemNs: []int{1000}, deepClients: 8, deepLeases: 10}
	cs := deepCases(cfg)
	var labels []string
	for _, c := range cs {
		labels = append(labels, c.label())
	}
	require.Equal(t, []string{"mutex, D=100", "mutex, D=3,000", "mutex, one Client, D=1,000", "semaphore of 10, D=1,000"}, labels)
	require.Equal(t, 8, cs[0].Clients)
	require.Equal(t, 1, cs[2].Clients)
	require.Equal(t, 10, cs[3].Leases)
	require.Equal(t, 1, cs[0].Leases, "one holder ahead of a mutex queue")
	require.Equal(t, "1,234,567", thousands(1234567))
	require.Equal(t, "999", thousands(999))

	all := []string{sysZklock, sysGozk, sysCurator, sysKazoo}
	require.Equal(t, []string{sysZklock, sysGozk, sysCurator}, deepSystems(cs[0], all))
	require.Equal(t, []string{sysZklock, sysCurator}, deepSystems(cs[3], all), "zk.Lock has no semaphore")
	require.Equal(t, []string{sysGozk, sysCurator, sysZklock}, deepOrder(deepSystems(cs[0], all), 1, 0))
	require.Equal(t, []string{sysZklock, sysCurator, sysGozk}, deepOrder(deepSystems(cs[0], all), 1, 1), "reversed in odd rounds")

	got, err := parseCounts("-deep", " 100, 1000,,")
	require.NoError(t, err)
	require.Equal(t, []int{100, 1000}, got)
	_, err = parseCounts("-deep", "0")
	require.ErrorContains(t, err, "-deep")
	got, err = parseCounts("-deep", "")
	require.NoError(t, err)
	require.Empty(t, got, "an empty list runs no such queue")
}

func TestDeepRatios(t *testing.T) {
	m100 := deepCase{Recipe: recipeMutex, Clients: 8, Waiters: 100, Leases: 1}
	m3k := deepCase{Recipe: recipeMutex, Clients: 8, Waiters: 3000, Leases: 1}
	one := deepCase{Recipe: recipeMutex, Clients: 1, Waiters: 1000, Leases: 1}
	sem := deepCase{Recipe: recipeSemaphore, Clients: 8, Waiters: 1000, Leases: 10}
	oneShallow := deepCase{Recipe: recipeMutex, Clients: 1, Waiters: 50, Leases: 1}
	r := func(c deepCase, sys string, round int, rate, bytes float64) DeepResult {
		return DeepResult{deepCase: c, System: sys, Round: round, HandoffsPerSec: rate, ResponseBytesPerHandoff: bytes, RequestsPerHandoff: 2}
	}
	rs := []DeepResult{
		r(m100, sysZklock, 0, 600, 3000), r(m100, sysZklock, 1, 700, 3100), r(m100, sysGozk, 0, 800, 3000),
		r(m3k, sysZklock, 0, 500, 90000), r(m3k, sysZklock, 1, 540, 88000), r(m3k, sysGozk, 0, 650, 99000), r(m3k, sysCurator, 0, 300, 88000),
		r(one, sysZklock, 0, 2500, 100), r(one, sysCurator, 0, 500, 30000),
		r(oneShallow, sysZklock, 0, 9000, 10), r(oneShallow, sysGozk, 0, 1000, 1500),
		r(sem, sysZklock, 0, 800, 30000), r(sem, sysCurator, 0, 260, 30000),
		{deepCase: sem, System: sysCurator, Round: 1, Error: "boom"},
	}
	byName := map[string]Ratio{}
	for _, x := range deepRatios(rs) {
		byName[x.Name] = x
	}
	require.Len(t, byName, 6, "no lead asked of D=100 over 8 Clients; no flatness of a semaphore at one D")
	require.Equal(t, "PASS", byName["Deep mutex, one Client, D=50: zklock / best peer, handoffs/s"].Status,
		"the one-Client case is asked its lead at any D")
	lead := byName["Deep mutex, D=3,000, 8 Clients: zklock / best peer, handoffs/s"]
	require.Equal(t, "MISS", lead.Status)
	require.Equal(t, 2.0, lead.Threshold, "the issue's: at least 2x the best peer")
	require.InDelta(t, 520.0/650, lead.Value, 1e-9, "median of zklock's rounds over the best peer's")
	require.Equal(t, "PASS", byName["Deep mutex, one Client, D=1,000: zklock / best peer, handoffs/s"].Status)
	require.InDelta(t, 800.0/260, byName["Deep semaphore of 10, D=1,000, 8 Clients: zklock / best peer, handoffs/s"].Value, 1e-9,
		"a failed round does not count")
	flat := byName["Deep mutex: zklock at D=3,000 / at D=100, handoffs/s"]
	require.Equal(t, "PASS", flat.Status)
	require.Equal(t, 0.75, flat.Threshold)
	require.InDelta(t, 520.0/650, flat.Value, 1e-9, "over 8 Clients only: the one-Client queue is not the shallowest")
	bytesRatio := byName["Deep mutex: zklock at D=3,000 / at D=100, response bytes/handoff"]
	require.Equal(t, "MISS", bytesRatio.Status)
	require.InDelta(t, 89000.0/3050, bytesRatio.Value, 1e-9)
	require.Nil(t, deepRatios(nil))

	var out bytes.Buffer
	printDeep(&out, &report{Deep: rs, Config: configInfo{Rounds: 2}})
	require.Contains(t, out.String(), "semaphore of 10, D=1,000")
	require.Regexp(t, `semaphore of 10, D=1,000 +8 +800/s +none +260/s +3\.08x`, out.String(), "zk.Lock has no semaphore")
	require.Regexp(t, `mutex, D=3,000 +8 +520/s +650/s +300/s +0\.80x`, out.String())
	require.Contains(t, out.String(), "0.80x")
}

func TestDelayMedians(t *testing.T) {
	res := func(ops ...float64) []Result {
		var rs []Result
		for _, o := range ops {
			rs = append(rs, Result{Ops: 1, OpsPerSec: o})
		}
		return rs
	}
	runs := map[entry][]Result{
		{wDelayed2, sysZklock}:  res(150, 160, 170),
		{wDelayed2, sysGozk}:    res(100, 160, 100),
		{wDelayed2, sysCurator}: res(120, 80, 200),
	}
	ms := delayMedians(runs)
	require.Len(t, ms, 1, "W1d did not run")
	runs[entry{wDelayed1, sysZklock}] = res(100)
	runs[entry{wDelayed1, sysGozk}] = res(70)
	w1 := delayMedians(runs)[1]
	require.Equal(t, 1.42, w1.Threshold, "W1 not below its lead before the change")
	require.Equal(t, "PASS", w1.Status)
	delete(runs, entry{wDelayed1, sysZklock})
	delete(runs, entry{wDelayed1, sysGozk})
	// Per round: 150/120, 160/160, 170/200.
	require.InDelta(t, 1.0, ms[0].Value, 1e-9)
	require.Equal(t, "MISS", ms[0].Status)
	require.Equal(t, 1.5, ms[0].Threshold, "the issue's W2 target through the delay")
	rows := delayRows(runs, 3*time.Millisecond)
	require.Len(t, rows, 3)
	require.Equal(t, DelayRow{Workload: wDelayed2, RTTMs: 3, System: sysZklock, OpsPerSec: 160, Rounds: []float64{150, 160, 170}}, rows[0])

	var out bytes.Buffer
	printDelay(&out, &report{Delay: rows, Config: configInfo{Rounds: 3, DurationMs: 8000, Clients: 8}})
	require.Contains(t, out.String(), "W2, 8 clients, one mutex")
	require.Contains(t, out.String(), "1.33x", "160 over the best peer's median, 120")
	require.Equal(t, "W2", peerWorkload(wDelayed2))
	require.Equal(t, "W5", peerWorkload("W5"))
}

func TestScheduleDelayed(t *testing.T) {
	e := func(w, s string) entry { return entry{w, s} }
	got := schedule([]string{wDelayed2, wDelayed1, "deep"}, []string{sysZklock, sysGozk, sysCurator, sysKazoo}, 0)
	require.Equal(t, [][]entry{
		{e(wDelayed2, sysZklock), e(wDelayed2, sysGozk), e(wDelayed2, sysCurator)},
		{e(wDelayed1, sysGozk), e(wDelayed1, sysCurator), e(wDelayed1, sysZklock)},
	}, got, "no kazoo through the delay; deep runs on its own")
}
