package zktest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Delayer puts a slow link in front of a server: it listens at 127.0.0.1
// and passes every connection it accepts on to its target (a server's
// "host:port"), byte for byte, both ways, holding every chunk of bytes it
// reads for half the round trip before it writes it on. A client that
// connects to [Delayer.Addr] sees each request answered at least one round
// trip later than it would directly, as over a link between zones (a
// millisecond or a few) or between regions (tens of milliseconds), so a
// test can see what its locks, timeouts and retries do when the server is
// not on loopback.
//
// Chunks in flight do not wait for one another: a client that sends a
// second request before the first is answered has both answered about one
// round trip after it sent them, not one round trip apart, as on a link
// with bandwidth to spare. Chunks keep their order. The delay is a floor:
// a busy machine adds its own on top. On Linux each chunk waits on a
// high-resolution timer (a 3ms round trip measures about 3.1ms through an
// echo server); elsewhere on Go's timers, which may add up to a
// millisecond each way.
//
// A Delayer is safe for concurrent use. Close it when done; [Delay] does
// it at the end of a test.
type Delayer struct {
	target string
	rtt    time.Duration
	ln     net.Listener
	ctx    context.Context // ends at Close, with the dials in progress
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of every connection through it
	closed bool
	wg     sync.WaitGroup // every goroutine: the accept loop, dials and pipes
}

// delayQueue is how many chunks one direction of a connection holds in
// flight before its reader waits for its writer: enough for any client's
// pipelined requests.
const delayQueue = 1024

// NewDelayer starts a Delayer to target that delays each direction by
// rtt/2, at a port of 127.0.0.1 chosen by the system. A zero rtt makes it
// a plain forwarder. It fails if target is not "host:port" or rtt is
// negative. Close it when done.
func NewDelayer(target string, rtt time.Duration) (*Delayer, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("zktest: delay to %q: %w", target, err)
	}
	if rtt < 0 {
		return nil, fmt.Errorf("zktest: delay to %s: round trip %v is negative", target, rtt)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zktest: delay to %s: %w", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Delayer{target: target, rtt: rtt, ln: ln, ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

// Delay starts a Delayer to target for the test, as [NewDelayer] does, and
// closes it when the test and its subtests end. It stops the test if the
// Delayer cannot start.
func Delay(tb testing.TB, target string, rtt time.Duration) *Delayer {
	tb.Helper()
	d, err := NewDelayer(target, rtt)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// Addr returns where the Delayer listens, "127.0.0.1:port": the address
// to give clients in place of its target.
func (d *Delayer) Addr() string { return d.ln.Addr().String() }

// Target returns the address the Delayer passes its connections on to.
func (d *Delayer) Target() string { return d.target }

// RTT returns the round trip the Delayer adds: rtt/2 each way.
func (d *Delayer) RTT() time.Duration { return d.rtt }

// Close closes the Delayer's listener and every connection through it
// (their clients see the connection reset, and bytes still held are
// dropped), and waits until its goroutines have returned. It returns nil;
// it makes a Delayer an io.Closer.
func (d *Delayer) Close() error {
	d.mu.Lock()
	d.closed = true // from here on, nothing is tracked and nothing starts
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	_ = d.ln.Close()
	d.cancel()
	for c := range conns {
		_ = c.Close()
	}
	d.wg.Wait()
	return nil
}

// accept passes on the connections of the listener until it is closed.
func (d *Delayer) accept() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		if !d.track(c, func() { go d.pass(c) }) {
			_ = c.Close()
		}
	}
}

// track adds c to the connections Close closes, if the Delayer is open,
// and then runs start (which must begin a goroutine, counted in wg). It
// reports whether it did. d.mu is held across both, so Close's wait
// cannot begin in between.
func (d *Delayer) track(c net.Conn, start func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.conns[c] = struct{}{}
	d.wg.Add(1)
	start()
	return true
}

func (d *Delayer) untrack(c net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.conns, c) // a no-op on the nil map once closed
}

// pass dials the target for c and starts the two directions between them.
func (d *Delayer) pass(c net.Conn) {
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(d.ctx, forwardDialTimeout)
	var dialer net.Dialer
	up, err := dialer.DialContext(ctx, "tcp", d.target)
	cancel()
	if err != nil {
		d.untrack(c)
		_ = c.Close()
		return
	}
	half := d.rtt / 2
	if !d.track(up, func() {
		d.wg.Add(1) // the second direction; track counted the first
		go d.pipe(up, c, half)
		go d.pipe(c, up, half)
	}) {
		_ = up.Close()
		_ = c.Close()
	}
}

// chunk is bytes read at one moment, to be written at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delay after it was read: a reader
// goroutine stamps and queues the chunks, this one writes them when due.
// When either side ends, both connections are closed, so the other
// direction ends too.
func (d *Delayer) pipe(dst, src net.Conn, delay time.Duration) {
	defer d.wg.Done()
	q := make(chan chunk, delayQueue)
	d.wg.Add(1)
	go d.read(src, q, delay)
	timer := newWaiter()
	defer timer.close()
	failed := false
	for ch := range q {
		if failed {
			continue // drain, so the reader is never stuck on a full queue
		}
		if wait := time.Until(ch.due); wait > 0 {
			timer.sleep(wait) // at most delay: Close waits no longer than that
		}
		if _, err := dst.Write(ch.b); err != nil {
			failed = true
			d.closeBoth(dst, src)
		}
	}
	d.closeBoth(dst, src)
}

// read queues what it reads from src, stamped with when it is due, until
// src ends; then it closes q.
func (d *Delayer) read(src net.Conn, q chan<- chunk, delay time.Duration) {
	defer d.wg.Done()
	defer close(q)
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay)}
		}
		if err != nil {
			return
		}
	}
}

func (d *Delayer) closeBoth(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
	d.untrack(a)
	d.untrack(b)
}
