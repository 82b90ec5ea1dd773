package zkfake

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
)

// watchType is go-zookeeper's kind of client-side watcher.
type watchType int

const (
	watchData watchType = iota
	watchExist
	watchChild
)

type wkey struct {
	path string
	typ  watchType
}

// item is one event the connection delivers: to the callback (unless it
// is only for the channels, as go-zookeeper's invalidateWatches sends),
// then to the watchers' channels.
type item struct {
	ev       zk.Event
	callback bool
	chans    []chan zk.Event
}

// Conn is one client connection to a [Server]: a [session.Conn]. Its state
// is under the server's mutex; its events go out in order from one
// goroutine, as go-zookeeper's recvLoop sends them.
type Conn struct {
	srv    *Server
	events func(zk.Event)

	// Under srv.mu.
	sid       int64
	connected bool
	closed    bool
	held      bool   // Disconnect'ed: no reconnect until Reconnect
	epoch     uint64 // bumped when the session is replaced by a new one
	watchers  map[wkey][]chan zk.Event

	qmu       sync.Mutex
	qcond     *sync.Cond
	queue     []item
	queued    uint64
	delivered uint64
	done      bool
}

var _ session.Conn = (*Conn)(nil)

// emitLocked queues a session or watch event (srv.mu held): a watch event
// takes the watchers' channels of its path and types now, as
// go-zookeeper's recvLoop does when it reads the notification
// (Conn.notifyWatches: a data change reaches exists and data watchers,
// not children watchers; found by the conformance test).
func (c *Conn) emitLocked(ev zk.Event) {
	it := item{ev: ev, callback: true}
	var types []watchType
	switch ev.Type {
	case zk.EventNodeCreated:
		types = []watchType{watchExist}
	case zk.EventNodeDataChanged:
		types = []watchType{watchExist, watchData}
	case zk.EventNodeDeleted:
		types = []watchType{watchExist, watchData, watchChild}
	case zk.EventNodeChildrenChanged:
		types = []watchType{watchChild}
	}
	for _, t := range types {
		k := wkey{ev.Path, t}
		it.chans = append(it.chans, c.watchers[k]...)
		delete(c.watchers, k)
	}
	c.push(it)
}

// invalidateLocked ends every watcher with a not-watching event carrying
// err (go-zookeeper's invalidateWatches), which only the channels get.
func (c *Conn) invalidateLocked(err error) {
	for k, chans := range c.watchers {
		c.push(item{ev: zk.Event{Type: zk.EventNotWatching, State: zk.StateDisconnected, Path: k.path, Err: err}, chans: chans})
	}
	c.watchers = map[wkey][]chan zk.Event{}
}

func (c *Conn) push(it item) {
	c.qmu.Lock()
	c.queue = append(c.queue, it)
	c.queued++
	c.qmu.Unlock()
	c.qcond.Broadcast()
}

func (c *Conn) deliver() {
	for {
		c.qmu.Lock()
		for len(c.queue) == 0 && !c.done {
			c.qcond.Wait()
		}
		if len(c.queue) == 0 {
			c.qmu.Unlock()
			return
		}
		it := c.queue[0]
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		if it.callback && c.events != nil {
			c.events(it.ev)
		}
		for _, ch := range it.chans {
			ch <- it.ev
			close(ch)
		}
		c.qmu.Lock()
		c.delivered++
		c.qmu.Unlock()
		c.qcond.Broadcast()
	}
}

// awaitDelivered waits until the events queued up to seq have gone out:
// a reply comes after the events that came before it.
func (c *Conn) awaitDelivered(seq uint64) {
	c.qmu.Lock()
	for c.delivered < seq {
		c.qcond.Wait()
	}
	c.qmu.Unlock()
}

func (c *Conn) queuedSeq() uint64 {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.queued
}

// addWatcherLocked registers a client-side watcher.
func (c *Conn) addWatcherLocked(path string, t watchType) chan zk.Event {
	ch := make(chan zk.Event, 1)
	k := wkey{path, t}
	c.watchers[k] = append(c.watchers[k], ch)
	return ch
}

// do runs one operation: the hooks around it, a wait for a connection (a
// request made while disconnected waits in go-zookeeper's queue), f under
// the server's mutex, and the wait for the events that precede its reply.
func (c *Conn) do(name string, paths []string, f func(se *sess) error) error {
	s := c.srv
	s.mu.Lock()
	h := s.hooks
	op := Op{Name: name, Paths: paths, Session: c.sid, Conn: c}
	s.mu.Unlock()
	if h.Before != nil {
		if err := h.Before(op); err != nil {
			return err
		}
	}
	s.mu.Lock()
	err := c.awaitLocked()
	if err == nil {
		se := s.sessions[c.sid]
		se.lastHeard = time.Now()
		err = f(se)
	}
	s.mu.Unlock()
	c.awaitDelivered(c.queuedSeq())
	if h.After != nil {
		err = h.After(op, err)
	}
	return err
}

// awaitLocked waits for a live session: ErrClosing once closed;
// ErrSessionExpired if the session the request was queued in ended first
// (go-zookeeper's flushRequests).
func (c *Conn) awaitLocked() error {
	epoch := c.epoch
	for {
		switch {
		case c.closed:
			return zk.ErrClosing
		case c.epoch != epoch:
			return zk.ErrSessionExpired
		case c.connected:
			return nil
		}
		c.srv.state.Wait()
	}
}

// Disconnect drops the connection, keeping the session: a
// StateDisconnected event, requests wait, watch events wait on the server
// (they reach the client when it reconnects, as setWatches has the
// server send them). No reconnect until [Conn.Reconnect].
func (c *Conn) Disconnect() {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	c.held = true
	if !c.connected || c.closed {
		return
	}
	c.connected = false
	if se := s.sessions[c.sid]; se != nil {
		se.lastHeard = time.Now()
	}
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected, Server: "zkfake"})
}

// Reconnect ends a Disconnect: the session is taken up again with the
// events it missed, or, if it expired meanwhile, a new one is opened.
func (c *Conn) Reconnect() {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	c.held = false
	if c.connected || c.closed {
		return
	}
	s.reconnectLocked(c)
	s.state.Broadcast()
}

// Connected reports whether the connection has a live session.
func (c *Conn) Connected() bool {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.connected
}

// CreateEach implements [session.Conn]: ephemeral-sequential nodes, one
// multi.
func (c *Conn) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	var out []string
	err := c.do("CreateEach", prefixes, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			out = nil
			for _, p := range prefixes {
				name, e, err := c.srv.createLocked(p, data, se.id, true, true, evs)
				if err != nil {
					return evs, err
				}
				evs = e
				out = append(out, name)
			}
			return evs, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// txn runs f as one transaction at a new zxid: if it fails, the tree is
// put back and no watch fires. srv.mu is held.
func (s *Server) txn(f func(evs []firing) ([]firing, error)) error {
	saved := s.snapshot()
	s.zxid++
	evs, err := f(nil)
	if err != nil {
		s.restore(saved)
		return err
	}
	s.fireLocked(evs)
	return nil
}

type snap struct {
	zxid  int64
	nodes map[string]znode
}

func (s *Server) snapshot() snap {
	m := make(map[string]znode, len(s.nodes))
	for p, n := range s.nodes {
		cp := *n
		cp.children = make(map[string]bool, len(n.children))
		for k := range n.children {
			cp.children[k] = true
		}
		m[p] = cp
	}
	return snap{s.zxid, m}
}

func (s *Server) restore(sn snap) {
	s.zxid = sn.zxid
	s.nodes = make(map[string]*znode, len(sn.nodes))
	for p, n := range sn.nodes {
		n := n
		s.nodes[p] = &n
	}
}

// CreateContainer implements [session.Conn].
func (c *Conn) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateContainer", []string{path}, func(se *sess) error {
		err := c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, 0, false, false, evs)
			return evs, err
		})
		if err == zk.ErrNodeExists {
			return nil
		}
		if err == nil {
			c.srv.nodes[path].container = true
		}
		return err
	})
}

// CreatePersistent implements [session.Conn].
func (c *Conn) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	err := c.do("CreatePersistent", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, 0, false, false, evs)
			return evs, err
		})
	})
	if err == zk.ErrNodeExists {
		return nil
	}
	return err
}

// Exists implements [session.Conn].
func (c *Conn) Exists(path string) (bool, error) {
	var ok bool
	err := c.do("Exists", []string{path}, func(se *sess) error {
		ok = c.srv.nodes[path] != nil
		return nil
	})
	return ok, err
}

// CreateEphemeral implements [session.Conn].
func (c *Conn) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateEphemeral", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, se.id, true, false, evs)
			return evs, err
		})
	})
}

func (s *Server) deleteChecked(path string, evs []firing) ([]firing, error) {
	n := s.nodes[path]
	switch {
	case n == nil:
		return evs, zk.ErrNoNode
	case len(n.children) > 0:
		return evs, zk.ErrNotEmpty
	}
	return s.deleteLocked(path, evs), nil
}

// CreateEphemeralIf implements [session.Conn]: one multi of a check that
// guard exists and the create.
func (c *Conn) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateEphemeralIf", []string{guard, path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			if c.srv.nodes[guard] == nil {
				return evs, session.GoneNodeError(guard, zk.ErrNoNode)
			}
			_, evs, err := c.srv.createLocked(path, data, se.id, true, false, evs)
			return evs, err
		})
	})
}

// Delete implements [session.Conn].
func (c *Conn) Delete(path string) error {
	return c.do("Delete", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) { return c.srv.deleteChecked(path, evs) })
	})
}

// DeleteAll implements [session.Conn]: one multi.
func (c *Conn) DeleteAll(paths []string) error {
	return c.do("DeleteAll", paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			for _, p := range paths {
				var err error
				if evs, err = c.srv.deleteChecked(p, evs); err != nil {
					return evs, err
				}
			}
			return evs, nil
		})
	})
}

// Children implements [session.Conn].
func (c *Conn) Children(path string) ([]string, error) {
	names, _, err := c.children("Children", path, false)
	return names, err
}

func (c *Conn) children(name, path string, watch bool) ([]string, session.ParentStat, error) {
	var names []string
	var ps session.ParentStat
	err := c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		// ZooKeeper lists children in its hash set's order; sorted here,
		// so that runs replay (the engine sorts them anyway).
		names = sortedKeys(n.children)
		ps = session.ParentStat{Pzxid: n.pzxid}
		if watch {
			se.childW[path] = true
			c.addWatcherLocked(path, watchChild)
		}
		return nil
	})
	if err != nil {
		return nil, session.ParentStat{}, err
	}
	return names, ps, nil
}

// ChildrenStatW implements [session.Conn].
func (c *Conn) ChildrenStatW(path string) ([]string, session.ParentStat, error) {
	return c.children("ChildrenStatW", path, true)
}

// ChildrenStat implements [session.Conn].
func (c *Conn) ChildrenStat(path string) ([]string, session.ParentStat, error) {
	return c.children("ChildrenStat", path, false)
}

// ChildrenW implements [session.Conn].
func (c *Conn) ChildrenW(path string) ([]string, <-chan session.Event, error) {
	var names []string
	var ch chan zk.Event
	err := c.do("ChildrenW", []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		names = sortedKeys(n.children)
		se.childW[path] = true
		ch = c.addWatcherLocked(path, watchChild)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return names, ch, nil
}

func (c *Conn) get(name, path string, watch bool) ([]byte, session.Stat, chan zk.Event, error) {
	var data []byte
	var st session.Stat
	var ch chan zk.Event
	err := c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		data = append([]byte(nil), n.data...)
		st = session.Stat{Czxid: n.czxid, EphemeralOwner: n.owner, Version: n.version, Ctime: n.ctime}
		if watch {
			se.dataW[path] = true
			ch = c.addWatcherLocked(path, watchData)
		}
		return nil
	})
	if err != nil {
		return nil, session.Stat{}, nil, err
	}
	return data, st, ch, nil
}

// Get implements [session.Conn].
func (c *Conn) Get(path string) ([]byte, session.Stat, error) {
	data, st, _, err := c.get("Get", path, false)
	return data, st, err
}

// GetW implements [session.Conn].
func (c *Conn) GetW(path string) (session.Stat, <-chan session.Event, error) {
	_, st, ch, err := c.get("GetW", path, true)
	if err != nil {
		return st, nil, err
	}
	return st, ch, nil
}

// GetDataW implements [session.Conn].
func (c *Conn) GetDataW(path string) ([]byte, session.Stat, <-chan session.Event, error) {
	data, st, ch, err := c.get("GetDataW", path, true)
	if err != nil {
		return nil, st, nil, err
	}
	return data, st, ch, nil
}

// ExistsW implements [session.Conn]: a data watch if the node exists, an
// exists watch if not (go-zookeeper's ExistsW).
func (c *Conn) ExistsW(path string) (bool, <-chan session.Event, error) {
	var ok bool
	var ch chan zk.Event
	err := c.do("ExistsW", []string{path}, func(se *sess) error {
		ok = c.srv.nodes[path] != nil
		se.dataW[path] = true
		if ok {
			ch = c.addWatcherLocked(path, watchData)
		} else {
			ch = c.addWatcherLocked(path, watchExist)
		}
		return nil
	})
	if err != nil {
		return false, nil, err
	}
	return ok, ch, nil
}

// Check implements [session.Conn]: a multi of version checks, a write
// that changes nothing but takes a zxid.
func (c *Conn) Check(paths []string) error {
	return c.do("Check", paths, func(se *sess) error {
		for _, p := range paths {
			if c.srv.nodes[p] == nil {
				return session.GoneNodeError(p, zk.ErrNoNode)
			}
		}
		c.srv.zxid++
		return nil
	})
}

// Set implements [session.Conn].
func (c *Conn) Set(path string, data []byte) error { return c.set("Set", path, data, -1) }

// SetIf implements [session.Conn].
func (c *Conn) SetIf(path string, data []byte, version int32) error {
	return c.set("SetIf", path, data, version)
}

func (c *Conn) set(name, path string, data []byte, version int32) error {
	return c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		switch {
		case n == nil:
			return zk.ErrNoNode
		case version != -1 && version != n.version:
			return zk.ErrBadVersion
		}
		c.srv.zxid++
		n.data, n.version, n.mzxid = append([]byte(nil), data...), n.version+1, c.srv.zxid
		c.srv.fireLocked([]firing{{zk.EventNodeDataChanged, path}})
		return nil
	})
}

// Sync implements [session.Conn].
func (c *Conn) Sync(path string) error {
	return c.do("Sync", []string{path}, func(se *sess) error { return nil })
}

// AddAuth implements [session.Conn]: accepted, and not checked (the fake
// has no ACLs).
func (c *Conn) AddAuth(scheme string, auth []byte) error {
	return c.do("AddAuth", nil, func(se *sess) error { return nil })
}

// SessionID implements [session.Conn].
func (c *Conn) SessionID() int64 {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.sid
}

// Raw implements [session.Conn]: there is no go-zookeeper connection.
func (c *Conn) Raw() *zk.Conn { return nil }

// Close implements [session.Conn]: the session ends (its ephemerals are
// deleted), the watchers get ErrClosing, and later requests fail with
// zk.ErrClosing.
func (c *Conn) Close() {
	s := c.srv
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return
	}
	c.closed = true
	if se := s.sessions[c.sid]; se != nil && !se.expired {
		s.endSessionLocked(se)
	}
	c.invalidateLocked(zk.ErrClosing)
	if c.connected {
		c.connected = false
		c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected, Server: "zkfake"})
	}
	s.state.Broadcast()
	s.mu.Unlock()
	c.qmu.Lock()
	c.done = true
	c.qmu.Unlock()
	c.qcond.Broadcast()
}
