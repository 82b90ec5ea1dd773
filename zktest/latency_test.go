package zktest_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// A Delayer passes bytes both ways, intact and in order, no sooner than a
// round trip after they were sent; Close ends its connections and its
// listener. Only lower bounds are asserted: a busy machine may add delay,
// never take it away.
func TestDelayer(t *testing.T) {
	t.Parallel()
	const rtt = 40 * time.Millisecond
	target, accepted := echo(t)
	d := zktest.Delay(t, target, rtt)
	require.Equal(t, target, d.Target())
	require.Equal(t, rtt, d.RTT())
	host, _, err := net.SplitHostPort(d.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)

	c, err := net.Dial("tcp", d.Addr())
	require.NoError(t, err)
	defer c.Close()
	for range 3 {
		start := time.Now()
		roundTrip(t, c, "hello through a slow link\n")
		require.GreaterOrEqual(t, time.Since(start), rtt, "a round trip takes at least the delay")
	}

	// A megabyte in many chunks comes back whole and in order.
	payload := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len(payload))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, got), "the bytes come back as sent")
	require.Equal(t, 1, accepted(), "one connection to the target")

	require.NoError(t, d.Close())
	closedByPeer(t, c)
	_, err = net.DialTimeout("tcp", d.Addr(), time.Second)
	require.Error(t, err, "nothing answers once closed")
	require.NoError(t, d.Close(), "closing twice")
}

// Through a Delayer, a ZooKeeper request takes at least the round trip,
// and a session works as it does directly.
func TestDelayerZooKeeper(t *testing.T) {
	t.Parallel()
	const rtt = 20 * time.Millisecond
	d := zktest.Delay(t, zktest.Servers(t)[0], rtt)
	conn, _, err := zk.Connect([]string{d.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()

	start := time.Now()
	_, _, err = conn.Exists("/")
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), rtt, "a request takes at least the round trip")

	path := "/" + t.Name()
	data := bytes.Repeat([]byte("slow link "), 20_000)
	_, err = conn.Create(path, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	start = time.Now()
	got, _, err := conn.Get(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), rtt)
	require.Equal(t, data, got)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start = time.Now()
	out, err := zktest.FourLetter(ctx, d.Addr(), "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", out)
	require.GreaterOrEqual(t, time.Since(start), rtt)
}

// A connection accepted while the target refuses is closed, not held; bad
// arguments are refused.
func TestDelayerTargetDownAndBadInput(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	target := ln.Addr().String()
	require.NoError(t, ln.Close())
	d := zktest.Delay(t, target, time.Millisecond)
	c, err := net.Dial("tcp", d.Addr())
	require.NoError(t, err)
	defer c.Close()
	closedByPeer(t, c)

	_, err = zktest.NewDelayer("no port", time.Millisecond)
	require.Error(t, err)
	_, err = zktest.NewDelayer(target, -time.Nanosecond)
	require.ErrorContains(t, err, "negative")
	z, err := zktest.NewDelayer(target, 0)
	require.NoError(t, err, "a zero delay is a plain forwarder")
	require.NoError(t, z.Close())
}
