package main

import (
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   float64
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.5, 7},
		{"one p99", ms(7), 0.99, 7},
		{"two p50 is the first", ms(1, 2), 0.5, 1},
		{"three p50 is the middle", ms(1, 2, 3), 0.5, 2},
		{"four p50", ms(1, 2, 3, 4), 0.5, 2},
		{"four p99 is the max", ms(1, 2, 3, 4), 0.99, 4},
		// ceil(0.99*100) = 99, not 100: no float error.
		{"hundred p99", hundred, 0.99, 99},
		{"hundred p50", hundred, 0.50, 50},
		{"hundred p100", hundred, 1, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, percentileMs(tc.sorted, tc.p), 1e-9)
		})
	}
}

func TestSamplesSortedMergesClients(t *testing.T) {
	s := newSamples(3)
	s.add(0, 5*time.Millisecond)
	s.add(2, time.Millisecond)
	s.add(1, 3*time.Millisecond)
	s.add(0, 2*time.Millisecond)
	require.Equal(t, ms(1, 2, 3, 5), s.sorted())
}

func TestOccupancy(t *testing.T) {
	t.Run("mutex overlap and token order", func(t *testing.T) {
		o := &occupancy{}
		o.enter(kindMutex, 10)
		o.leave(kindMutex)
		o.enter(kindMutex, 20)
		o.enter(kindMutex, 30) // overlaps the holder of 20
		o.leave(kindMutex)
		o.leave(kindMutex)
		o.enter(kindMutex, 25) // a token lower than its predecessor's
		o.leave(kindMutex)
		require.EqualValues(t, 1, o.violations)
		require.EqualValues(t, 1, o.tokenRegressions)
		require.Equal(t, 2, o.maxHolders)
	})
	t.Run("readers share, writers exclude", func(t *testing.T) {
		o := &occupancy{}
		o.enter(kindRead, 0)
		o.enter(kindRead, 0)
		o.enter(kindRead, 0)
		require.EqualValues(t, 0, o.violations)
		require.Equal(t, 3, o.maxReaders)
		o.enter(kindWrite, 0) // with readers
		require.EqualValues(t, 1, o.violations)
		o.enter(kindRead, 0) // with a writer
		require.EqualValues(t, 2, o.violations)
		for range 4 {
			o.leave(kindRead)
		}
		o.enter(kindWrite, 0) // two writers
		require.EqualValues(t, 3, o.violations)
		o.leave(kindWrite)
		o.leave(kindWrite)
		o.enter(kindWrite, 0)
		require.EqualValues(t, 3, o.violations)
	})
	t.Run("semaphore limit", func(t *testing.T) {
		o := &occupancy{limit: 2}
		o.enter(kindSem, 0)
		o.enter(kindSem, 0)
		require.EqualValues(t, 0, o.violations)
		o.enter(kindSem, 0)
		require.EqualValues(t, 1, o.violations)
		require.Equal(t, 3, o.maxHolders)
	})
}

func TestParseMntr(t *testing.T) {
	m := parseMntr("zk_version\t3.8.0-abc, built on x\nzk_packets_received\t42\nzk_avg_latency\t0.5\ngarbage\n")
	require.Equal(t, 42.0, m.num["zk_packets_received"])
	require.Equal(t, 0.5, m.num["zk_avg_latency"])
	require.Equal(t, "3.8.0-abc, built on x", m.str["zk_version"])
	_, ok := m.num["zk_version"]
	require.False(t, ok)
}

func TestBetweenSubtractsItsOwnMntr(t *testing.T) {
	p0 := probe{m: parseMntr("zk_packets_received\t100\nzk_cnt_readlatency\t10\nzk_cnt_updatelatency\t5\n"), server: time.Second, srvOK: true}
	p1 := probe{m: parseMntr("zk_packets_received\t131\nzk_cnt_readlatency\t20\nzk_cnt_updatelatency\t25\n"), server: 3 * time.Second, srvOK: true}
	c, ok := between(p0, p1, time.Second)
	require.True(t, ok)
	require.Equal(t, 30.0, c.packets)
	require.Equal(t, 10.0, c.reads)
	require.Equal(t, 20.0, c.writes)
	require.Equal(t, 2*time.Second, c.serverCPU)

	r := Result{Ops: 10}
	r.setPerOp(c.minus(counts{packets: 10, writes: 10, clientCPU: 500 * time.Millisecond, haveServerCPU: true}))
	require.Equal(t, 2.0, r.RequestsPerOp)
	require.Equal(t, 1.0, r.ReadsPerOp)
	require.Equal(t, 1.0, r.WritesPerOp)
	require.Equal(t, 50000.0, r.ClientCPUUsPerOp)
	require.Equal(t, 200000.0, r.ServerCPUUsPerOp)
}

func TestPeerOutput(t *testing.T) {
	line := `{"system":"curator","workload":"W3","clients":8,"read_pct":90,"ops":100,"read_ops":90,"write_ops":10,` +
		`"seconds":2.0,"ops_per_sec":50.0,"acquire_p50_ms":1.5,"acquire_p99_ms":9.0,"violations":0,` +
		`"max_concurrent_readers":3,"max_concurrent_holders":3,"timeouts":1}`
	got, err := lastJSONLine([]byte("some log\n" + line + "\n\n"))
	require.NoError(t, err)
	var r Result
	require.NoError(t, json.Unmarshal(got, &r))
	require.Equal(t, "W3", r.Workload)
	require.EqualValues(t, 90, r.ReadOps)
	require.Equal(t, 3, r.MaxConcurrentReaders)
	require.EqualValues(t, 1, r.Timeouts)

	_, err = lastJSONLine([]byte("ERR zkbench-kazoo RuntimeError: boom\n"))
	require.ErrorContains(t, err, "boom")
	_, err = lastJSONLine([]byte("nothing\n"))
	require.Error(t, err)
}

func TestParseList(t *testing.T) {
	got, err := parseList("w2, W0,,w2", allWorkloads)
	require.NoError(t, err)
	require.Equal(t, []string{"W2", "W0"}, got)
	_, err = parseList("W9", allWorkloads)
	require.Error(t, err)
}

func TestSchedule(t *testing.T) {
	e := func(w, s string) entry { return entry{w, s} }
	got := schedule(allWorkloads, allSystems, 0)
	require.Equal(t, [][]entry{
		// W0 runs with W1, which is judged against it.
		// The floor brackets them: half before, half after.
		{e("W0", sysRaw), e("W1", sysZklock), e("W1", sysGozk), e("W1", sysCurator), e("W1", sysKazoo), e("W0", sysRaw)},
		// Rotated by one per group.
		{e("W2", sysGozk), e("W2", sysCurator), e("W2", sysKazoo), e("W2", sysZklock)},
		// zk.Lock has no RW lock nor semaphore.
		{e("W3", sysKazoo), e("W3", sysZklock), e("W3", sysCurator)},
		{e("W4", sysZklock), e("W4", sysCurator), e("W4", sysKazoo)},
		// W5 has no kazoo (see w5.go).
		{e("W5", sysGozk), e("W5", sysCurator), e("W5", sysZklock)},
		// W6: zklock brings its run without WithSharedReads; no zk.Lock,
		// no kazoo.
		{e("W6", sysZklockUnshared), e("W6", sysCurator), e("W6", sysZklock)},
	}, got)
	odd := schedule(allWorkloads, allSystems, 1)
	require.Equal(t, []entry{e("W0", sysRaw), e("W1", sysKazoo), e("W1", sysCurator), e("W1", sysGozk), e("W1", sysZklock), e("W0", sysRaw)}, odd[0])
	require.Equal(t, []entry{e("W2", sysZklock), e("W2", sysKazoo), e("W2", sysCurator), e("W2", sysGozk)}, odd[1])

	require.Equal(t, [][]entry{{e("W0", sysRaw), e("W0", sysRawGet), e("W0", sysRaw)}},
		schedule([]string{"W0"}, []string{sysZklock, sysRawGet}, 0))
	require.Equal(t, [][]entry{{e("W0", sysRaw)}}, schedule([]string{"W0"}, []string{sysZklock}, 0))
	require.Equal(t, [][]entry{{e("W1", sysZklock)}}, schedule([]string{"W1", "scale"}, []string{sysZklock}, 0))
}

func TestMergeRounds(t *testing.T) {
	a := Result{System: sysZklock, Workload: "W3", Ops: 10, ReadOps: 9, WriteOps: 1, Seconds: 1,
		MaxConcurrentReaders: 2, RequestsPerOp: 4, lat: ms(1, 2, 3)}
	b := Result{System: sysZklock, Workload: "W3", Ops: 30, ReadOps: 27, WriteOps: 3, Seconds: 1,
		MaxConcurrentReaders: 3, Violations: 1, RequestsPerOp: 8, lat: ms(4, 5)}
	a.finish(a.lat)
	b.finish(b.lat)
	m := mergeRounds([]Result{a, b})
	require.EqualValues(t, 40, m.Ops)
	require.Equal(t, 20.0, m.OpsPerSec)
	require.Equal(t, 18.0, m.ReadOpsPerSec)
	require.Equal(t, 3, m.MaxConcurrentReaders)
	require.EqualValues(t, 1, m.Violations)
	require.Equal(t, 7.0, m.RequestsPerOp, "weighted by ops")
	require.Equal(t, 3.0, m.AcquireP50Ms, "exact over all samples")
	require.Equal(t, 2, m.Rounds)

	// Peers keep no samples: ops-weighted percentiles.
	a.lat, b.lat = nil, nil
	a.AcquireP50Ms, b.AcquireP50Ms = 1, 5
	require.Equal(t, 4.0, mergeRounds([]Result{a, b}).AcquireP50Ms)

	b.Error = "boom"
	require.Equal(t, "boom", mergeRounds([]Result{a, b}).Error)
}

func TestRatios(t *testing.T) {
	rep := &report{Results: []Result{
		{System: sysRaw, Workload: "W0", Ops: 1, OpsPerSec: 100},
		{System: sysZklock, Workload: "W1", Ops: 1, OpsPerSec: 95},
		{System: sysZklock, Workload: "W2", Ops: 1, OpsPerSec: 100, AcquireP50Ms: 8},
		{System: sysCurator, Workload: "W2", Ops: 1, OpsPerSec: 50, AcquireP50Ms: 10},
		{System: sysGozk, Workload: "W2", Ops: 1, OpsPerSec: 90, Error: "boom"},
	}, Scale: []ScaleResult{
		{System: sysZklock, Waiters: 8, Sessions: 8, RequestsPerHandoff: 1.9, HeapBytesPerWaiter: 1000},
		{System: sysZklock, Waiters: 64, Sessions: 8, RequestsPerHandoff: 2.0, HeapBytesPerWaiter: 1500, ExtraGoroutines: 2},
	}}
	byName := map[string]Ratio{}
	for _, r := range ratios(rep) {
		byName[r.Name] = r
	}
	require.Equal(t, "PASS", byName["W1 zklock / W0 raw floor, ops/s"].Status)
	require.Equal(t, "PASS", byName["W2 zklock / Curator, ops/s"].Status)
	require.Equal(t, "n/a", byName["W2 zklock / zk.Lock, ops/s"].Status, "a failed run is not measured")
	require.Equal(t, "MISS", byName["W2 handoff p50 zklock / Curator"].Status)
	require.InDelta(t, 0.8, byName["W2 handoff p50 zklock / Curator"].Value, 1e-9)
	require.Equal(t, "n/a", byName["W4 zklock / Curator SemaphoreV2, ops/s"].Status)
	require.Equal(t, "PASS", byName["Scale requests/handoff, max/min over N"].Status)
	require.Equal(t, "PASS", byName["Scale heap per waiting Acquire, bytes (max over N)"].Status)
	require.Equal(t, "PASS", byName["Scale extra goroutines while N Acquires wait (max over N)"].Status)
}

func TestChartIsWellFormedSVG(t *testing.T) {
	rep := &report{
		Date:    "2026-01-02T03:04:05Z",
		Machine: machine{NumCPU: 2, CPU: "Test CPU <fast> & cheap", Go: "go1.26", OS: "Debian"},
		Server:  serverInfo{Version: "3.8.0", Source: "container"},
		Config:  configInfo{DurationMs: 3000, Clients: 8, Leases: 3},
		Results: []Result{
			{System: sysRaw, Workload: "W0", Ops: 1, OpsPerSec: 800},
			{System: sysZklock, Workload: "W1", Ops: 1, OpsPerSec: 750},
			{System: sysCurator, Workload: "W1", Ops: 1, OpsPerSec: 300},
			{System: sysZklock, Workload: "W4", Ops: 1, OpsPerSec: 90.5},
		},
	}
	svg := chartSVG(rep)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
	}
	require.Contains(t, svg, "Test CPU &lt;fast&gt; &amp; cheap")
	require.Contains(t, svg, "2026-01-02T03:04:05Z")
	require.Contains(t, svg, ">800<")
	require.Contains(t, svg, ">90.5<")
	require.Equal(t, 4, strings.Count(svg, "</title></rect>"), "one bar per result")
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.5: 2, 3: 5, 7: 10, 180: 200, 420: 500} {
		require.InDelta(t, want, niceStep(raw), 1e-9, "raw %v", raw)
	}
}
