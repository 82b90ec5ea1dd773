package zktest

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
var ErrPartitioned = errors.New("zktest: partitioned")

// Faults is a transport for one ZooKeeper client that can break on demand:
// drop its connections, blackhole its traffic (a partition: bytes stop
// flowing both ways while the sockets stay open, so only timeouts notice),
// delay it, or drop the connection right after a given request has been
// sent, before its reply comes back.
//
// Plug it in with zklock.WithDialer(f.Dialer()) (or zk.WithDialer). Each
// connection is a net.Pipe for the client, pumped to a real TCP connection
// by two goroutines that end with the connection; [Faults.Close] closes
// every connection and waits for them. A Faults is safe for concurrent use.
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

// NewFaults returns a healthy transport that dials with dial (net.DialTimeout
// if nil).
func NewFaults(dial zk.Dialer) *Faults {
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
	fc := &faultConn{f: f, client: client, inner: inner, real: real, addr: addr}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		fc.close()
		return nil, net.ErrClosed
	}
	f.conns[fc] = struct{}{}
	f.wg.Add(2)
	f.mu.Unlock()
	go fc.pump(inner, real, true)
	go fc.pump(real, inner, false)
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

// Partition blackholes the client: bytes already in flight and every byte
// sent from now on are lost in both directions, sockets stay open, and new
// dials hang until their timeout. The client notices only through its own
// timeouts; the server expires the session once its timeout passes.
func (f *Faults) Partition() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.partitioned {
		f.partitioned = true
		f.healed = make(chan struct{})
	}
}

// Heal ends a partition. Connections that survived it carry bytes again
// (those sent during the partition stay lost, so the client usually times
// out and reconnects anyway).
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
	hs                  handshake   // the server's first reply; only toClient's pump uses it
}

func (c *faultConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.inner.Close()
		_ = c.real.Close()
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
}

// pump copies src to dst chunk by chunk, dropping chunks while partitioned.
// go-zookeeper writes one request per Write, so a chunk read from the pipe
// by toServer starts with a request's length, xid and opcode.
func (c *faultConn) pump(src, dst net.Conn, toServer bool) {
	defer c.f.wg.Done()
	defer c.close()
	buf := make([]byte, 1<<20)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.f.mu.Lock()
			part, delay := c.f.partitioned, c.f.delay
			drop := toServer && c.f.dropAfter != 0 && n >= 12 &&
				int32(binary.BigEndian.Uint32(buf[8:12])) == c.f.dropAfter
			if drop {
				c.f.dropAfter = 0
			}
			c.f.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay)
			}
			if drop {
				c.muted.Store(true)
			}
			if !part && !(!toServer && c.muted.Load()) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if !toServer {
					c.observe(buf[:n])
				}
			} else if !toServer {
				c.hs.lost() // the client never reads this part of the reply
			}
			if drop {
				// Let the server read the request before the reset.
				time.Sleep(50 * time.Millisecond)
				return
			}
		}
		if err != nil {
			return
		}
	}
}
