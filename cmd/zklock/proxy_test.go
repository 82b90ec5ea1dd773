//go:build linux

package main

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock/faults"
)

// proxy forwards TCP connections on a loopback port to a ZooKeeper server
// through a faults transport, so that a test can break the connections of
// a zklock process, which takes no dialer: Drop them, Partition the
// server away, Heal.
type proxy struct {
	addr string
	*faults.Faults
}

// newProxy starts a proxy to server, stopped when the test ends.
func newProxy(t *testing.T, server string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), Faults: faults.New(nil)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			mu.Lock()
			conns[conn] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.bridge(conn, server)
				mu.Lock()
				delete(conns, conn)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.Heal() // a dial that hangs in a partition returns
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.Close()
		wg.Wait()
	})
	return p
}

// bridge carries bytes between client and a connection to server through
// the faults transport until either side closes; a dial that fails closes
// client.
func (p *proxy) bridge(client net.Conn, server string) {
	defer client.Close()
	upstream, err := p.Dialer()("tcp", server, 10*time.Second)
	if err != nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
	client.Close()
	upstream.Close()
	<-done
}
