package zklock_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// reqCounter counts the ZooKeeper requests that clients dialed through it
// write, by opcode, and the replies they read. Pings and the connect
// handshake are not requests here. It also counts, by path, the getData
// and exists requests that leave a watch.
type reqCounter struct {
	replies    atomic.Int64
	events     atomic.Int64 // watch notifications read
	zxidEvents atomic.Bool  // a notification carried its zxid

	mu      sync.Mutex
	ops     map[int32]int64
	watched map[string]int
}

// dial is a zk.Dialer.
func (rc *reqCounter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c}
	cc.out = framer{keep: maxKept, fn: rc.request}
	cc.in = framer{keep: 12, fn: rc.reply}
	return cc, nil
}

// maxKept is how much of a request is kept to read it: the header, and for
// a getData or exists the path and the watch flag (lock paths are short).
const maxKept = 8 + 4 + 1024 + 1

const (
	xidWatchEvent = -1
	xidPing       = -2
	opExists      = 3
	opGetData     = 4
)

// request records a request frame: xid int32, opcode int32, then the body.
func (rc *reqCounter) request(frame int, p []byte) {
	if frame == 0 || len(p) < 8 {
		return // the ConnectRequest has no header
	}
	xid, op := int32(binary.BigEndian.Uint32(p)), int32(binary.BigEndian.Uint32(p[4:]))
	if xid == xidPing {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.ops == nil {
		rc.ops, rc.watched = make(map[int32]int64), make(map[string]int)
	}
	rc.ops[op]++
	if op == opExists || op == opGetData {
		// Body: path (int32 length, bytes), watch (one byte).
		body := p[8:]
		if len(body) >= 4 {
			n := int(binary.BigEndian.Uint32(body))
			if n >= 0 && 4+n < len(body) && body[4+n] == 1 {
				rc.watched[string(body[4:4+n])]++
			}
		}
	}
}

// reply records a reply frame: xid int32, zxid int64, err int32, body;
// a watch notification has xid -1.
func (rc *reqCounter) reply(frame int, p []byte) {
	if frame == 0 || len(p) < 4 {
		return // the ConnectResponse
	}
	switch int32(binary.BigEndian.Uint32(p)) {
	case xidPing:
	case xidWatchEvent:
		rc.events.Add(1)
		if len(p) >= 12 && int64(binary.BigEndian.Uint64(p[4:12])) > 0 {
			rc.zxidEvents.Store(true) // ZooKeeper 3.9 and later: the event's zxid
		}
	default:
		rc.replies.Add(1)
	}
}

// watches returns how many requests have left a watch on path.
func (rc *reqCounter) watches(path string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.watched[path]
}

func (rc *reqCounter) forgetWatches() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	clear(rc.watched)
}

// outstanding returns how many requests have had no reply yet.
func (rc *reqCounter) outstanding() int64 {
	return rc.snapshot().total() - rc.replies.Load()
}

// reqs counts requests by opcode.
type reqs map[int32]int64

func (rc *reqCounter) snapshot() reqs {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := make(reqs, len(rc.ops))
	for op, n := range rc.ops {
		s[op] = n
	}
	return s
}

func (r reqs) minus(before reqs) reqs {
	d := make(reqs)
	for op, n := range r {
		if n -= before[op]; n != 0 {
			d[op] = n
		}
	}
	return d
}

func (r reqs) total() int64 {
	var t int64
	for _, n := range r {
		t += n
	}
	return t
}

// per formats r divided by n, by operation name.
func (r reqs) per(n int) string {
	ops := make([]int32, 0, len(r))
	for op := range r {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	var parts []string
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %.2f", opName(op), float64(r[op])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func opName(op int32) string {
	switch op {
	case 1:
		return "create"
	case 2:
		return "delete"
	case opExists:
		return "exists"
	case opGetData:
		return "getData"
	case 5:
		return "setData"
	case 8:
		return "getChildren"
	case 9:
		return "sync"
	case 12:
		return "getChildren2"
	case 14:
		return "multi"
	case 19:
		return "createContainer"
	case 100:
		return "auth"
	case 101:
		return "setWatches"
	case -11:
		return "closeSession"
	}
	return fmt.Sprintf("op%d", op)
}

// countingConn feeds what goes through a connection to two framers, one
// each way. go-zookeeper writes from one goroutine and reads from another,
// so each framer is used by one goroutine only.
type countingConn struct {
	net.Conn
	out, in framer
}

// Write counts a request before it can be answered, so that no reply is
// ever counted before its request.
func (c *countingConn) Write(p []byte) (int, error) {
	c.out.feed(p)
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	return n, err
}

// framer splits a ZooKeeper byte stream into frames (a four-byte length,
// then that many bytes) however the stream is chunked, and calls fn with
// each frame's number on the connection and its first keep bytes.
type framer struct {
	keep   int
	fn     func(frame int, head []byte)
	frames int
	length [4]byte
	got    int // bytes of length read
	left   int // bytes of the current frame still to come
	head   []byte
}

func (f *framer) feed(p []byte) {
	for len(p) > 0 {
		if f.got < 4 {
			k := copy(f.length[f.got:], p)
			f.got, p = f.got+k, p[k:]
			if f.got == 4 {
				f.left, f.head = int(binary.BigEndian.Uint32(f.length[:])), f.head[:0]
				if f.left == 0 {
					f.end()
				}
			}
			continue
		}
		k := min(len(p), f.left)
		if room := f.keep - len(f.head); room > 0 {
			f.head = append(f.head, p[:min(k, room)]...)
		}
		f.left, p = f.left-k, p[k:]
		if f.left == 0 {
			f.end()
		}
	}
}

func (f *framer) end() {
	f.fn(f.frames, f.head)
	f.frames++
	f.got = 0
}

var _ zk.Dialer = new(reqCounter).dial
