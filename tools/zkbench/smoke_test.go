package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// One ZooKeeper for the test binary (or ZKLOCK_TEST_SERVERS). W6 runs
// this binary again as its reading processes.
func TestMain(m *testing.M) {
	if os.Getenv(w6RoleEnv) == "reader" {
		os.Exit(w6ReaderMain())
	}
	zktest.Main(m)
}

// TestSmoke runs every workload of the Go systems briefly against a real
// server. It checks that they run, count and exclude; never how fast.
func TestSmoke(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "/zkbench-test/" + strings.ReplaceAll(t.Name(), "/", "-") + fmt.Sprint(time.Now().UnixNano())
	cases := []struct{ workload, sys string }{
		{"W0", sysRaw}, {"W0", sysRawGet},
		{"W1", sysZklock}, {"W1", sysGozk},
		{"W2", sysZklock}, {"W2", sysGozk},
		{"W3", sysZklock},
		{"W4", sysZklock},
	}
	for _, tc := range cases {
		t.Run(tc.workload+"/"+tc.sys, func(t *testing.T) {
			clients := 3
			if tc.workload == "W0" || tc.workload == "W1" {
				clients = 1
			}
			r := runGo(ctx, tc.sys, runSpec{
				workload:       tc.workload,
				path:           fmt.Sprintf("%s/%s-%s", base, tc.workload, tc.sys),
				servers:        servers,
				clients:        clients,
				duration:       300 * time.Millisecond,
				acquireTimeout: 10 * time.Second,
				readPct:        50,
				leases:         2,
				serverCPU:      noCPU,
			})
			require.Empty(t, r.Error)
			require.Positive(t, r.Ops)
			require.Equal(t, r.Ops, r.ReadOps+r.WriteOps)
			require.Zero(t, r.Violations)
			require.Zero(t, r.TokenRegressions)
			require.Zero(t, r.Timeouts)
			require.Positive(t, r.OpsPerSec)
			require.LessOrEqual(t, r.AcquireP50Ms, r.AcquireP99Ms)
			// Every cycle needs at least a create and a delete.
			require.GreaterOrEqual(t, r.WritesPerOp, 1.9)
			switch tc.workload {
			case "W3":
				require.Positive(t, r.ReadOps)
				require.Positive(t, r.MaxConcurrentReaders)
			case "W4":
				require.LessOrEqual(t, r.MaxConcurrentHolders, 2)
			}
		})
	}
}

func TestSmokeScale(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := fmt.Sprintf("/zkbench-test/scale-%d", time.Now().UnixNano())
	for _, sys := range []string{sysZklock, sysGozk} {
		t.Run(sys, func(t *testing.T) {
			r := runScale(ctx, sys, servers, base+"/"+sys, 6, 3, "")
			require.Empty(t, r.Error)
			require.Equal(t, 6, r.Handoffs)
			// Each handoff is at least the holder's delete.
			require.GreaterOrEqual(t, r.WritesPerHandoff, 0.99)
			require.Positive(t, r.HandoffsPerSec)
			require.GreaterOrEqual(t, r.GoroutinesPerWaiter, 1.0)
		})
	}
}

// TestSmokeW5 runs W5 (one session, many goroutines, a mutex per path)
// briefly for the Go systems: it runs, counts and excludes.
func TestSmokeW5(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := fmt.Sprintf("/zkbench-test/w5-%d", time.Now().UnixNano())
	for _, sys := range []string{sysZklock, sysGozk} {
		t.Run(sys, func(t *testing.T) {
			r := runW5(ctx, sys, runSpec{
				workload:       "W5",
				path:           base + "/" + sys,
				servers:        servers,
				clients:        8,
				paths:          20,
				duration:       300 * time.Millisecond,
				acquireTimeout: 10 * time.Second,
				serverCPU:      noCPU,
			})
			require.Empty(t, r.Error)
			require.Positive(t, r.Ops)
			require.Zero(t, r.Violations)
			require.Zero(t, r.TokenRegressions)
			require.Zero(t, r.Timeouts)
			require.Positive(t, r.OpsPerSec)
		})
	}
	m, rs := medianRatio([]Result{{OpsPerSec: 3}, {OpsPerSec: 2}, {OpsPerSec: 9}}, []Result{{OpsPerSec: 1}, {OpsPerSec: 1}, {OpsPerSec: 3}})
	require.Equal(t, 3.0, m)
	require.Equal(t, []float64{3, 2, 3}, rs)
}

// TestSmokeW6 runs W6 (read-heavy service) briefly for zklock with and
// without shared reads, its readers in processes of their own: the
// readers read, the writer writes, none of its acquires times out; and W6
// runs zklock's run without the option beside zklock's.
func TestSmokeW6(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := fmt.Sprintf("/zkbench-test/w6-%d", time.Now().UnixNano())
	for _, sys := range []string{sysZklock, sysZklockUnshared} {
		t.Run(sys, func(t *testing.T) {
			r := runW6(ctx, sys, runSpec{
				workload:       "W6",
				path:           base + "/" + sys,
				servers:        servers,
				duration:       time.Second,
				acquireTimeout: 10 * time.Second,
				serverCPU:      noCPU,
			})
			require.Empty(t, r.Error)
			require.Positive(t, r.ReadOps)
			require.Positive(t, r.WriteOps)
			require.Equal(t, r.Ops, r.ReadOps+r.WriteOps)
			require.Zero(t, r.Timeouts)
			require.LessOrEqual(t, r.AcquireP50Ms, r.AcquireP99Ms)
		})
	}
	require.Equal(t, []string{sysCurator, sysZklock, sysZklockUnshared}, w6Systems([]string{sysZklock, sysGozk, sysCurator, sysKazoo}))
}
