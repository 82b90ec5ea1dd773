package faults

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper request opcodes, for [Faults.DropAfter].
const (
	OpCreate       int32 = 1
	OpDelete       int32 = 2
	OpGetData      int32 = 4
	OpGetChildren2 int32 = 12
	OpMulti        int32 = 14
)

// ErrPartitioned is what dials fail with while a [Faults] is partitioned.
var ErrPartitioned = errors.New("faults: partitioned")

// Faults is a transport for one ZooKeeper client that can break on demand:
// drop its connections, blackhole its traffic (a partition: bytes stop
// flowing both ways while the sockets stay open, so only timeouts notice;
// like TCP, a connection that survives delivers them late, never loses them),
// delay it, or drop the connection right after a given request has been
// sent, before its reply comes back.
//
// Plug it in with zklock.WithDialer(f.Dialer()) (or zk.WithDialer). Each
// connection is a net.Pipe for the client, pumped to a real TCP connection
// by four goroutines (a reader and a writer each way) that end with the
// connection; [Faults.Close] closes every connection and waits for them. A
// Faults is safe for concurrent use.
type Faults struct {
	dial zk.Dialer

	mu          sync.Mutex
	conns       map[*faultConn]struct{}
	partitioned bool
	healed      chan struct{} // closed when a partition heals
	delay       time.Duration
	dropAfter   int32 // opcode; 0: off
	closed      bool
	wg          sync.WaitGroup
	wire        wire // what the handshakes said (expire.go)
}

// New returns a healthy transport that dials with dial (net.DialTimeout
// if nil).
func New(dial zk.Dialer) *Faults {
	if dial == nil {
		dial = net.DialTimeout
	}
	return &Faults{dial: dial, conns: make(map[*faultConn]struct{}), healed: make(chan struct{})}
}

// Dialer returns the zk.Dialer to give the client.
func (f *Faults) Dialer() zk.Dialer { return f.dialFn }

func (f *Faults) dialFn(network, addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, net.ErrClosed
	}
	f.wire.dialed(addr)
	if f.partitioned {
		healed := f.healed
		f.mu.Unlock()
		// An unreachable host: the dial hangs until it times out.
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-t.C:
		case <-healed:
		}
		return nil, ErrPartitioned
	}
	f.mu.Unlock()
	real, err := f.dial(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	client, inner := net.Pipe()
	fc := &faultConn{f: f, client: client, inner: inner, real: real, addr: addr,
		watchesSent: make(chan struct{}), done: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		fc.close()
		return nil, net.ErrClosed
	}
	f.conns[fc] = struct{}{}
	f.wg.Add(4)
	f.mu.Unlock()
	toServer, toClient := make(chan []byte, queueLen), make(chan []byte, queueLen)
	go fc.read(inner, toServer, true)
	go fc.write(toServer, real, true)
	go fc.read(real, toClient, false)
	go fc.write(toClient, inner, false)
	return client, nil
}

// Drop closes every open connection at once, as a server restart or a reset
// would. New dials succeed.
func (f *Faults) Drop() {
	f.mu.Lock()
	conns := make([]*faultConn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Partition blackholes the client: bytes stop flowing in both directions,
// sockets stay open, and new dials hang until their timeout. The client
// notices only through its own timeouts (its requests and heartbeats go
// unanswered); the server expires the session once its timeout passes.
//
// As with TCP, bytes are held back, not lost: a connection that outlives
// the partition delivers them, in order, once it heals. Losing bytes in the
// middle of a live stream would lose a reply or a watch event on a
// connection that goes on working, which real networks never do and no
// ZooKeeper client survives: it would wait for that reply forever.
func (f *Faults) Partition() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.partitioned {
		f.partitioned = true
		f.healed = make(chan struct{})
	}
}

// Heal ends a partition. Connections that survived it deliver what was held
// back, then carry bytes as before. Usually the client has timed out and
// reconnected by then.
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partitioned {
		f.partitioned = false
		close(f.healed)
	}
}

// Partitioned reports whether a partition is in force.
func (f *Faults) Partitioned() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.partitioned
}

// SetDelay delays every chunk of bytes, in both directions, by d (0: none).
func (f *Faults) SetDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// DropAfter arms a one-shot fault: the next request with this opcode (for
// example [OpCreate]) is delivered to the server, and then the connection
// is dropped before the reply can come back, so the client cannot know
// whether the request took effect.
func (f *Faults) DropAfter(opcode int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropAfter = opcode
}

// Close closes every connection, makes new dials fail, and waits for the
// pumping goroutines to exit.
func (f *Faults) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.Drop()
	f.wg.Wait()
}

type faultConn struct {
	f                   *Faults
	client, inner, real net.Conn
	once                sync.Once
	muted               atomic.Bool // replies are lost from now on
	addr                string      // the server dialed
	hs                  handshake   // the server's first reply; only the writer to the client uses it
	watchesSent         chan struct{}
	watchesOnce         sync.Once
	done                chan struct{} // closed by close
}

// opSetWatches is the request a go-zookeeper client sends on a new
// connection to register its watches again.
const opSetWatches int32 = 101

// awaitWatches holds back the first reply after the handshake until the
// client has sent setWatches, or for 100ms if it sends none (it has no
// watches). go-zookeeper v1.0.4 reads the last zxid it saw, to put it into
// setWatches, while the goroutine that receives replies may already write
// it: a data race (go-zookeeper/zk PR #35, samuel/go-zookeeper#260) that
// -race reports in tests that reconnect a lot. Holding replies back until
// setWatches is on its way orders the two. Only the writer to the client
// calls it.
func (c *faultConn) awaitWatches() {
	if !c.hs.done || c.hs.replied {
		return
	}
	c.hs.replied = true
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-c.watchesSent:
	case <-t.C:
	}
}

func (c *faultConn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.client.Close()
		_ = c.inner.Close()
		_ = c.real.Close()
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
}

// queueLen bounds the chunks held back in each direction, as a socket's
// buffers would: once it is full, the sender's writes block.
const queueLen = 256

// read copies src into q chunk by chunk, as the kernel fills a socket's
// buffer: it goes on reading while write holds chunks back (a partition),
// so the sender's writes do not block, as they would not on TCP.
// go-zookeeper writes one request per Write, so a chunk read from the pipe
// by toServer starts with a request's length, xid and opcode.
func (c *faultConn) read(src net.Conn, q chan<- []byte, toServer bool) {
	defer c.f.wg.Done()
	defer close(q) // write delivers what is queued, then closes the connection
	buf := make([]byte, 1<<20)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if toServer && n >= 12 && int32(binary.BigEndian.Uint32(buf[8:12])) == opSetWatches {
				c.watchesOnce.Do(func() { close(c.watchesSent) })
			}
			select {
			case q <- append([]byte(nil), buf[:n]...):
			case <-c.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write delivers the chunks of q to dst: delayed, held back while
// partitioned, and cut off after a [Faults.DropAfter] request. It closes the
// connection when q ends or a write fails.
func (c *faultConn) write(q <-chan []byte, dst net.Conn, toServer bool) {
	defer c.f.wg.Done()
	defer c.close()
	for chunk := range q {
		delay, drop := c.chunkFaults(chunk, toServer)
		if delay > 0 {
			time.Sleep(delay)
		}
		if drop {
			c.muted.Store(true)
		}
		if !toServer {
			c.awaitWatches()
		}
		if !c.awaitHealed() || !c.deliver(chunk, dst, toServer) {
			return
		}
		if drop {
			// Let the server read the request before the reset.
			time.Sleep(50 * time.Millisecond)
			return
		}
	}
}

// chunkFaults returns the delay for a chunk, and whether it is the request
// [Faults.DropAfter] names (which it then disarms).
func (c *faultConn) chunkFaults(chunk []byte, toServer bool) (delay time.Duration, drop bool) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	drop = toServer && c.f.dropAfter != 0 && len(chunk) >= 12 &&
		int32(binary.BigEndian.Uint32(chunk[8:12])) == c.f.dropAfter
	if drop {
		c.f.dropAfter = 0
	}
	return c.f.delay, drop
}

// awaitHealed waits while the faults partition the connection; false if
// the connection closed meanwhile.
func (c *faultConn) awaitHealed() bool {
	for {
		c.f.mu.Lock()
		part, healed := c.f.partitioned, c.f.healed
		c.f.mu.Unlock()
		if !part {
			return true
		}
		select {
		case <-healed:
		case <-c.done:
			return false
		}
	}
}

// deliver writes a chunk to dst, unless it is a reply on a muted
// connection; false if the write failed.
func (c *faultConn) deliver(chunk []byte, dst net.Conn, toServer bool) bool {
	if !toServer && c.muted.Load() {
		return true
	}
	var read func()
	if !toServer {
		read = c.observe(chunk)
	}
	if _, err := dst.Write(chunk); err != nil {
		return false
	}
	if read != nil {
		read()
	}
	return true
}
