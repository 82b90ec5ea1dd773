package zktest_test

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

func TestWithHostPortsRejectsBadRanges(t *testing.T) {
	for name, r := range map[string][2]int{
		"zero low":  {0, 100},
		"reversed":  {30010, 30000},
		"too high":  {65000, 65536},
		"negatives": {-5, -1},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := zktest.Run(t.Context(), zktest.Image(), zktest.WithHostPorts(r[0], r[1]))
			require.ErrorContains(t, err, "host ports")
			require.Nil(t, c, "nothing is started for a bad range")
		})
	}
}

func TestBadPortsEnvFailsRun(t *testing.T) {
	t.Setenv("ZKTEST_PORTS", "30000")
	c, err := zktest.Run(t.Context(), zktest.Image())
	require.ErrorContains(t, err, `ZKTEST_PORTS="30000"`)
	require.Nil(t, c, "nothing is started for a bad ZKTEST_PORTS")
}

// portIn fails the test unless endpoint's port is in [lo, hi].
func portIn(t *testing.T, endpoint string, lo, hi int) {
	t.Helper()
	_, p, err := net.SplitHostPort(endpoint)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	require.True(t, port >= lo && port <= hi, "port %d outside %d-%d", port, lo, hi)
}

// A container's client port is published within the range asked for, by
// the option or by ZKTEST_PORTS, and serves there.
func TestHostPortsPublishWithinTheRange(t *testing.T) {
	if zktest.External() {
		t.Skip("host ports: ZKLOCK_TEST_SERVERS is set: no containers")
	}
	lo := 22000 + 20*rand.IntN(400) // 20 ports somewhere in 22000-29999
	c := zktest.Start(t, zktest.WithHostPorts(lo, lo+19))
	portIn(t, c.ClientEndpoint(), lo, lo+19)
	connect(t, c.Servers(), 10*time.Second)

	lo2 := lo + 20
	if lo2 > 29980 {
		lo2 = 22000
	}
	t.Setenv("ZKTEST_PORTS", strconv.Itoa(lo2)+"-"+strconv.Itoa(lo2+19))
	c2 := zktest.Start(t)
	portIn(t, c2.ClientEndpoint(), lo2, lo2+19)
	connect(t, c2.Servers(), 10*time.Second)
}
