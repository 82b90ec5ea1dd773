package zktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Forwarder gives a server an address that a test can move: it listens on a
// loopback address and passes every connection it accepts on to its target
// (a server's "host:port": a [Container.ClientEndpoint], one of an
// [Ensemble]'s [Ensemble.Servers], or a server of ZKLOCK_TEST_SERVERS),
// byte for byte, both ways. [Forwarder.Move] puts it at another loopback
// address, on the same port, and closes the old one's listener and
// connections, as a Kubernetes pod replaced on a new address leaves its old
// one dead; [Forwarder.Stop] closes them without a new one. The server
// behind it sees nothing of this but connections that come and go.
//
// Forwarders listen at addresses of 127.0.0.0/8 other than 127.0.0.1, which
// are all local on Linux; elsewhere (macOS has 127.0.0.1 alone)
// [NewForwarder] fails with an error wrapping errors.ErrUnsupported. No two
// addresses are handed out twice in a process, so an address a Forwarder
// left never answers again. A Forwarder is safe for concurrent use.
//
// A client needs a name that follows a Forwarder (see [Names]), or it
// cannot follow it: [Movable] puts several servers behind Forwarders and
// names.
//
// A Forwarder in front of a ZooKeeper server can also play a server that
// hands out a new session on reconnect ([Forwarder.SwapSessions]), and make
// its clients reconnect ([Forwarder.Drop]).
type Forwarder struct {
	target string
	port   string
	ctx    context.Context // ends at Close, with the dials in progress
	cancel context.CancelFunc

	swapping atomic.Bool  // SwapSessions (swap.go)
	swaps    atomic.Int64 // connect requests rewritten

	mu     sync.Mutex
	ln     net.Listener      // nil while stopped
	conns  map[net.Conn]bool // every connection through it: true for those to the target
	closed bool
	wg     sync.WaitGroup // every goroutine: accept loops and pipes
}

// forwardDialTimeout bounds a Forwarder's dial of its target.
const forwardDialTimeout = 5 * time.Second

// NewForwarder starts a Forwarder to target at an unused loopback address,
// on a port chosen by the system. It fails if target is not "host:port" or
// if no loopback address but 127.0.0.1 can be listened on (see
// [Forwarder]). Close it when done.
func NewForwarder(target string) (*Forwarder, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("zktest: forward to %q: %w", target, err)
	}
	ln, err := listenLoopback("0")
	if err != nil {
		return nil, fmt.Errorf("zktest: forward to %s: %w", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{target: target, ctx: ctx, cancel: cancel, conns: make(map[net.Conn]bool)}
	_, f.port, _ = net.SplitHostPort(ln.Addr().String())
	f.swap(ln)
	return f, nil
}

// Forward starts a Forwarder to target for the test, as [NewForwarder]
// does, and closes it when the test and its subtests end. It stops the test
// if the Forwarder cannot start.
func Forward(tb testing.TB, target string) *Forwarder {
	tb.Helper()
	f, err := NewForwarder(target)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// Addr returns where the Forwarder listens, "ip:port", or "" while it is
// stopped.
func (f *Forwarder) Addr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln == nil {
		return ""
	}
	return f.ln.Addr().String()
}

// Target returns the address the Forwarder passes its connections on to.
func (f *Forwarder) Target() string { return f.target }

// Move makes the Forwarder listen at a loopback address it never used, on
// the same port, then closes the old address's listener and every
// connection through it (both ends): their clients see the connection
// reset, and nothing answers at the old address any more. It returns the
// new address, "ip:port", as [Forwarder.Addr] will. It also starts a
// stopped Forwarder. It fails once the Forwarder is closed.
func (f *Forwarder) Move() (string, error) {
	ln, err := f.listen()
	if err != nil {
		return "", err
	}
	f.swap(ln)
	return ln.Addr().String(), nil
}

// listen listens at a fresh loopback address on the Forwarder's port.
func (f *Forwarder) listen() (net.Listener, error) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("zktest: move the forwarder to %s: %w", f.target, net.ErrClosed)
	}
	ln, err := listenLoopback(f.port)
	if err != nil {
		return nil, fmt.Errorf("zktest: move the forwarder to %s: %w", f.target, err)
	}
	return ln, nil
}

func (f *Forwarder) ipOf(ln net.Listener) string {
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	return host
}

// swap makes ln the Forwarder's listener (nil: none), and closes the old
// one and its connections.
func (f *Forwarder) swap(ln net.Listener) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		if ln != nil {
			_ = ln.Close()
		}
		return
	}
	old, conns := f.ln, f.conns
	f.ln, f.conns = ln, make(map[net.Conn]bool)
	if ln != nil {
		f.wg.Add(1)
		go f.accept(ln)
	}
	f.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	closeConns(conns)
}

// closeConns closes the connections of a Forwarder (true: to the target).
func closeConns(conns map[net.Conn]bool) {
	// The target's side first: once a client sees its connection reset,
	// nothing it sent can still reach the server through the old address.
	for c, up := range conns {
		if up {
			_ = c.Close()
		}
	}
	for c, up := range conns {
		if !up {
			_ = c.Close()
		}
	}
}

// Stop closes the Forwarder's listener and every connection through it:
// nothing answers at its address any more, as when a pod has died. [Forwarder.Move]
// starts it again, at another address. Stopping a stopped Forwarder does
// nothing.
func (f *Forwarder) Stop() { f.swap(nil) }

// Close stops the Forwarder for good and waits until its goroutines have
// returned. It returns nil; it makes a Forwarder an io.Closer.
func (f *Forwarder) Close() error {
	f.swap(nil)
	f.mu.Lock()
	f.closed = true // from here on, nothing starts a goroutine
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	return nil
}

// accept passes on the connections of ln until ln is closed.
func (f *Forwarder) accept(ln net.Listener) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// A connection accepted just before a move or a stop belongs to
		// the old address, which no longer answers.
		if !f.track(c, false, func() bool { return f.ln == ln }, func() { go f.pass(c) }) {
			_ = c.Close()
		}
	}
}

// track adds c (up: a connection to the target) to the connections that a
// move or a stop closes, if the Forwarder is open and current holds, and
// then runs start (which must begin a goroutine, counted in wg). It
// reports whether it did. f.mu is held across both, so Close's wait cannot
// begin in between.
func (f *Forwarder) track(c net.Conn, up bool, current func() bool, start func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || !current() {
		return false
	}
	f.conns[c] = up
	f.wg.Add(1)
	start()
	return true
}

func (f *Forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// pass connects c to the target, both ways, until either side closes or
// the Forwarder closes them.
func (f *Forwarder) pass(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	defer c.Close()
	ctx, cancel := context.WithTimeout(f.ctx, forwardDialTimeout)
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", f.target)
	cancel()
	if err != nil {
		return
	}
	// c was closed meanwhile (by a move or a stop) if it is no longer
	// tracked: the upstream connection goes with it.
	tracked := func() bool { _, ok := f.conns[c]; return ok }
	if !f.track(up, true, tracked, func() { go f.upstream(up, c) }) {
		_ = up.Close()
		return
	}
	_, _ = io.Copy(c, up)
	_ = up.Close()
	f.untrack(up)
}

// loopback hands out the addresses of 127.0.0.0/8 that Forwarders listen
// at: each once in a process, from a random block of 65,536, so that two
// test processes rarely use the same addresses (and if they do, the
// system's port, chosen free, still keeps them apart).
var loopback struct {
	sync.Mutex
	next uint32 // the low 24 bits of the next address; 0 before the first
}

// freshLoopback returns a loopback address not handed out before in this
// process, never 127.0.0.1 nor one ending in .0 or .255.
func freshLoopback() netip.Addr {
	loopback.Lock()
	defer loopback.Unlock()
	if loopback.next == 0 {
		loopback.next = uint32(1+rand.IntN(254))<<16 | uint32(rand.IntN(256))<<8
	}
	for {
		n := loopback.next & 0xffffff
		loopback.next++
		if last := n & 0xff; last != 0 && last != 255 && n != 1 {
			return netip.AddrFrom4([4]byte{127, byte(n >> 16), byte(n >> 8), byte(n)})
		}
	}
}

// listenLoopback listens on port ("0": any) at a fresh loopback address,
// trying others while the port is taken at the one tried.
func listenLoopback(port string) (net.Listener, error) {
	const attempts = 20
	var err error
	for range attempts {
		var ln net.Listener
		ln, err = net.Listen("tcp4", net.JoinHostPort(freshLoopback().String(), port))
		switch {
		case err == nil:
			return ln, nil
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, fmt.Errorf("%w: a forwarder listens at loopback addresses other than 127.0.0.1, "+
				"which are local on Linux only: %w", errors.ErrUnsupported, err)
		case !errors.Is(err, syscall.EADDRINUSE):
			return nil, err
		}
	}
	return nil, err
}
