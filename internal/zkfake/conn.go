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

// Conn is one client connection to a [Server]: a [session.Backend], and
// the door on it (a [session.Conn], whose methods it has). Its state is
// under the server's mutex; its events go out in order from one goroutine,
// as go-zookeeper's recvLoop sends them.
type Conn struct {
	*session.Door // on the Conn itself

	srv    *Server
	events func(zk.Event)

	// Under srv.mu.
	sid       int64
	connected bool
	closed    bool
	held      bool   // Disconnect'ed: no reconnect until Reconnect
	epoch     uint64 // bumped when the session is replaced by a new one
	watchers  map[wkey][]chan zk.Event
	late      bool         // the next reconnect's setWatches comes late (LateWatches)
	lateW     *lateWatches // the watches of a late setWatches, until SetWatches

	qmu       sync.Mutex
	qcond     *sync.Cond
	queue     []item
	queued    uint64
	delivered uint64
	done      bool
}

var _ session.Backend = (*Conn)(nil)

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

// LoseWatches makes the next [Conn.Reconnect] one whose setWatches failed:
// go-zookeeper only logs that (conn.go, sendSetWatches: "Failed to set
// previous watches") and goes on, so the server keeps none of the
// session's watches, sends none of the events they would have brought,
// and the client's watchers stay registered, never to fire. Call it while
// disconnected.
func (c *Conn) LoseWatches() {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.sessions[c.sid]; se != nil && !c.connected {
		se.dataW, se.childW, se.pending = map[string]bool{}, map[string]bool{}, nil
	}
}

// Connected reports whether the connection has a live session.
func (c *Conn) Connected() bool {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.connected
}
