package zktest_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// A connection whose server never answers ends at the handshake's bound,
// whatever deadline go-zookeeper asks for (ten times two-thirds of the
// session timeout, then none). Without the bound the read below blocks for
// an hour.
func TestHandshakeDialerBoundsASilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 2)
	done := make(chan struct{})
	go func() { // accept, and never answer
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})
	for _, later := range []time.Duration{time.Hour, 0} {
		c, err := zktest.HandshakeDialer(200*time.Millisecond)("tcp", l.Addr().String(), time.Second)
		require.NoError(t, err)
		var d time.Time
		if later > 0 {
			d = time.Now().Add(later)
		}
		require.NoError(t, c.SetReadDeadline(d))
		_, err = c.Read(make([]byte, 4))
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "read: %v", err)
		require.NoError(t, c.Close())
	}
}
