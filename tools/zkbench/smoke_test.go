package main

import (
	"context"
	"errors"
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

// TestSmokeDeep drains small deep queues of the Go systems: every waiter
// takes the lock once, nobody overlaps, the server's counters are read
// over the drain, and the probe saw every waiter's node and watch (it did
// not fall back to the server's quiet).
func TestSmokeDeep(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := fmt.Sprintf("/zkbench-test/deep-%d", time.Now().UnixNano())
	cases := []struct {
		sys string
		c   deepCase
	}{
		{sysZklock, deepCase{Recipe: recipeMutex, Clients: 3, Waiters: 7, Leases: 1}},
		{sysGozk, deepCase{Recipe: recipeMutex, Clients: 3, Waiters: 7, Leases: 1}},
		{sysZklock, deepCase{Recipe: recipeMutex, Clients: 1, Waiters: 6, Leases: 1}},
		{sysGozk, deepCase{Recipe: recipeMutex, Clients: 1, Waiters: 6, Leases: 1}},
		{sysZklock, deepCase{Recipe: recipeSemaphore, Clients: 3, Waiters: 8, Leases: 2}},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s-%d-%d", tc.sys, tc.c.Recipe, tc.c.Clients, tc.c.Waiters), func(t *testing.T) {
			r := runDrain(ctx, tc.sys, nil, servers, fmt.Sprintf("%s/%d", base, i), tc.c)
			requireDrained(t, r, tc.c)
		})
	}
	_, err := newDrainer(ctx, sysGozk, nil, servers, base+"/x", deepCase{Recipe: recipeSemaphore, Clients: 1, Waiters: 1, Leases: 1})
	require.ErrorContains(t, err, "does not run a semaphore")
}

// TestSmokeDeepCurator drains small deep queues through the Java peer's
// drain mode (built by tools/peers/build-peers.sh if needed), and runs W2
// through a Delayer with it.
func TestSmokeDeepCurator(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := &peers{root: repoRoot()}
	base := fmt.Sprintf("/zkbench-test/deep-curator-%d", time.Now().UnixNano())
	for i, c := range []deepCase{
		{Recipe: recipeMutex, Clients: 3, Waiters: 7, Leases: 1},
		{Recipe: recipeMutex, Clients: 1, Waiters: 5, Leases: 1},
		{Recipe: recipeSemaphore, Clients: 3, Waiters: 8, Leases: 2},
	} {
		t.Run(fmt.Sprintf("%s-%d-%d", c.Recipe, c.Clients, c.Waiters), func(t *testing.T) {
			r := runDrain(ctx, sysCurator, p, servers, fmt.Sprintf("%s/%d", base, i), c)
			requireDrained(t, r, c)
		})
	}
	t.Run("peer error", func(t *testing.T) {
		r := runDrain(ctx, sysCurator, p, servers, base+"/bogus", deepCase{Recipe: "bogus", Clients: 1, Waiters: 1, Leases: 1})
		require.ErrorContains(t, errors.New(r.Error), "--recipe wants mutex or semaphore", "the peer's ERR line is the error")
	})
	t.Run("W2d", func(t *testing.T) {
		const rtt = 5 * time.Millisecond
		d := zktest.Delay(t, servers[0], rtt)
		r := p.run(ctx, sysCurator, runSpec{
			workload: wDelayed2, path: base + "/w2d", servers: []string{d.Addr()}, counters: servers[0],
			clients: 2, duration: time.Second, acquireTimeout: 10 * time.Second, leases: 1, serverCPU: noCPU,
		})
		require.Empty(t, r.Error)
		require.Equal(t, wDelayed2, r.Workload, "reported as the delayed workload")
		require.Positive(t, r.Ops)
		require.Zero(t, r.Violations)
		require.GreaterOrEqual(t, r.AcquireP50Ms, float64(rtt)/float64(time.Millisecond), "an acquire takes at least a round trip")
	})
}

func requireDrained(t *testing.T, r DeepResult, c deepCase) {
	t.Helper()
	require.Empty(t, r.Error)
	require.Equal(t, c.Waiters, r.Handoffs)
	require.Equal(t, "nodes", r.QueuedBy, "every waiter's node and watch were seen")
	require.Positive(t, r.ChainSeconds)
	require.InDelta(t, float64(c.Waiters)/r.ChainSeconds, r.HandoffsPerSec, 1e-6)
	require.Zero(t, r.Violations)
	// Each handoff is at least a release: a delete.
	require.GreaterOrEqual(t, r.WritesPerHandoff, 0.99)
	require.GreaterOrEqual(t, r.RequestsPerHandoff, r.WritesPerHandoff)
	require.Positive(t, r.ResponseBytesPerHandoff)
	require.LessOrEqual(t, r.HandoffP50Ms, r.HandoffP99Ms)
}

// TestSmokeDelayed runs W1d and W2d for the Go systems through a Delayer:
// they run, exclude, and every acquire takes at least the round trip.
func TestSmokeDelayed(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rtt = 5 * time.Millisecond
	addrs, stop, err := startDelayers([]string{"W2", wDelayed2}, servers, rtt)
	require.NoError(t, err)
	defer stop()
	require.Len(t, addrs, len(servers))
	base := fmt.Sprintf("/zkbench-test/delayed-%d", time.Now().UnixNano())
	for _, w := range []string{wDelayed1, wDelayed2} {
		for _, sys := range []string{sysZklock, sysGozk} {
			t.Run(w+"/"+sys, func(t *testing.T) {
				clients := 3
				if w == wDelayed1 {
					clients = 1
				}
				r := runGo(ctx, sys, runSpec{
					workload: w, path: base + "/" + w + sys, servers: addrs, counters: servers[0],
					clients: clients, duration: 500 * time.Millisecond, acquireTimeout: 10 * time.Second,
					leases: 1, serverCPU: noCPU,
				})
				require.Empty(t, r.Error)
				require.Equal(t, w, r.Workload)
				require.Positive(t, r.Ops)
				require.Zero(t, r.Violations)
				require.Zero(t, r.TokenRegressions)
				require.GreaterOrEqual(t, r.AcquireP50Ms, float64(rtt)/float64(time.Millisecond), "an acquire takes at least a round trip")
				require.GreaterOrEqual(t, r.WritesPerOp, 1.9, "every cycle needs at least a create and a delete")
			})
		}
	}
	none, stopNone, err := startDelayers([]string{"W2", "deep"}, servers, rtt)
	require.NoError(t, err)
	stopNone()
	require.Nil(t, none, "no delayed workload, no Delayer")
}

// TestQueueProbe: the probe sees a queue complete by its nodes and
// watches, or else, for a system that queues with fewer of them, by the
// server receiving nothing but pings for a second.
func TestQueueProbe(t *testing.T) {
	servers := zktest.Servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := connectZK(servers, scaleSessionTimeout)
	require.NoError(t, err)
	defer obs.Close()
	missing := fmt.Sprintf("/zkbench-test/probe-%d", time.Now().UnixNano())
	q := queueProbe{obs: obs, addr: servers[0], paths: []string{missing}, want: 0, watches: 0, pings: 2,
		failed: func() error { return nil }}
	by, err := q.await(ctx)
	require.NoError(t, err)
	require.Equal(t, "nodes", by, "nothing to wait for")

	q.want, q.watches = 5, 1<<30
	by, err = q.await(ctx)
	require.NoError(t, err)
	require.Equal(t, "quiet", by, "no node will come: the quiet server says the queue is complete")

	q.failed = func() error { return errors.New("boom") }
	_, err = q.await(ctx)
	require.ErrorContains(t, err, "boom")
}
