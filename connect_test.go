package zklock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// A server that refuses connections: Connect waits for ctx as documented,
// and its error says why no session came, not only the context's.
func TestConnectNamesTheDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: dials are refused

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{addr})
	if err == nil {
		c.Close()
		t.Fatal("connected to a closed port")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want it to wrap the context's error", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v; want it to name the refused dial", err)
	}
	if strings.Count(err.Error(), "zklock:") != 1 {
		t.Errorf("err = %q; want one zklock: prefix", err)
	}
}

// A server without a port means ZooKeeper's 2181, and the error names the
// address dialled.
func TestConnectDefaultPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// 127.0.0.2 is loopback too, and nothing of ours listens there.
	c, err := zklock.Connect(ctx, []string{"127.0.0.2"})
	if err == nil {
		c.Close()
		return // a ZooKeeper on 127.0.0.2:2181 took it: the port was added
	}
	if !strings.Contains(err.Error(), "127.0.0.2:2181") {
		t.Errorf("err = %v; want it to name 127.0.0.2:2181", err)
	}
}
