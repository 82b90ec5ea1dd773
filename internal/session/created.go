package session

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// createdZxids keeps each NodeCreated notification's zxid by path until
// the engine takes it: a grant's (zklock's handoff.go) is the zxid of the
// multi that fired it, so the lease's fencing token with no read.
// ZooKeeper 3.9 sends a notification's zxid in its header (ZOOKEEPER-4655:
// NIOServerCnxn/NettyServerCnxn.process write the WatchedEvent's zxid);
// 3.8 sends -1, and the engine reads the token. The reader hands on each
// notification before recvLoop gives it to its watcher's channel, so the
// zxid is here when the engine hears of it. Ones nobody takes (the waiter
// left) are dropped with the rest once maxCreated are kept: the engine
// then reads the token, as on 3.8.
type createdZxids struct {
	mu sync.Mutex
	m  map[string]int64

	carries atomic.Int32 // 0 no notification read yet, 1 one carried its zxid, 2 none did
}

// seen records a notification read. Once one carried its zxid, the server
// does (ZooKeeper 3.9): 3.9 still sends -1 in the events that setWatches
// triggers (DataTree.setWatches builds them with no zxid, NO_ZXID), which
// must not make it pass for 3.8. (Were the view ever wrong, a grant would
// only cost or save a read: zklock's handoff.go, handsOff.)
func (z *createdZxids) seen(withZxid bool) {
	if withZxid {
		z.carries.Store(1)
	} else {
		z.carries.CompareAndSwap(0, 2)
	}
}

const (
	maxCreated      = 1024
	notificationXid = -1
	eventCreated    = 1 // EventType.NodeCreated
)

// event takes a notification's body (a WatcherEvent: type, state, path),
// as far as the reader kept it, and its zxid.
func (z *createdZxids) event(b []byte, zxid int64) {
	if len(b) < 12 || int32(binary.BigEndian.Uint32(b[0:4])) != eventCreated {
		return
	}
	n := int(int32(binary.BigEndian.Uint32(b[8:12])))
	if n < 0 || 12+n > len(b) {
		return // a path longer than the reader keeps
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.m == nil || len(z.m) >= maxCreated {
		z.m = make(map[string]int64)
	}
	z.m[string(b[12:12+n])] = zxid
}

func (z *createdZxids) take(path string) int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	zxid := z.m[path]
	delete(z.m, path)
	return zxid
}

// CreatedZxid returns the zxid of the NodeCreated notification last read
// for path, once, or 0 if none was kept (ZooKeeper before 3.9 sends none).
func (c *Session) CreatedZxid(path string) int64 {
	if c.root.root != "" {
		path = c.root.abs(path)
	}
	return c.wire.made.take(path)
}

// NotificationZxids reports whether the server puts a notification's zxid
// in its header (ZooKeeper 3.9 and later): yes once one notification the
// wire read carried it, no while none did; known is false before one was
// read, and always on a connection with no wire ([Options.Connect]).
func (c *Session) NotificationZxids() (carries, known bool) {
	switch c.wire.made.carries.Load() {
	case 1:
		return true, true
	case 2:
		return false, true
	}
	return false, false
}
