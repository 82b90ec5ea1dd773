package zkfake

import "github.com/go-zookeeper/zk"

// lateWatches are a session's watches while its setWatches is late
// ([Conn.LateWatches]): what go-zookeeper's setWatches would send (data
// and exists watches apart, as it sends them), and the zxid it would send
// as relative (the last the client saw: every earlier event had reached it).
type lateWatches struct {
	rel   int64
	data  map[string]bool // true: an exists watch (the path was missing)
	child map[string]bool
}

// LateWatches makes the next [Conn.Reconnect] one whose setWatches comes
// late, as go-zookeeper's may: it sends it from a goroutine of its own
// after the connect (conn.go, sendSetWatches), so that requests queued
// while the connection was down reach the server first. From that
// reconnect until [Conn.SetWatches] the server holds none of the
// session's watches that had not fired (the events of those that had
// still come at the reconnect), and changes to their paths tell the
// client nothing. Call it while disconnected.
func (c *Conn) LateWatches() {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	c.late = true
}

// SetWatches is the late setWatches of a reconnect after [Conn.LateWatches]:
// the server sets each watch again, or sends its event at once, as
// ZooKeeper's DataTree.setWatches does, against the tree as it is now: a
// data watch on a missing node is told NodeDeleted, on a node changed
// since the relative zxid NodeDataChanged; an exists watch on a node that
// exists is told NodeCreated; a child watch on a missing node NodeDeleted,
// on one whose children changed NodeChildrenChanged; any other is set
// again. So an exists watch on a node created and deleted in between is
// set again, and told nothing. It does nothing if there is no late
// setWatches.
func (c *Conn) SetWatches() {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	lw, se := c.lateW, s.sessions[c.sid]
	c.lateW = nil
	if lw == nil || se == nil || se.expired {
		return
	}
	for _, p := range sortedKeys(lw.data) {
		n := s.nodes[p]
		switch exists := lw.data[p]; {
		case n == nil && !exists:
			s.notifyLocked(se, zk.Event{Type: zk.EventNodeDeleted, State: zk.StateSyncConnected, Path: p})
		case n != nil && exists:
			s.notifyLocked(se, zk.Event{Type: zk.EventNodeCreated, State: zk.StateSyncConnected, Path: p})
		case n != nil && n.mzxid > lw.rel:
			s.notifyLocked(se, zk.Event{Type: zk.EventNodeDataChanged, State: zk.StateSyncConnected, Path: p})
		default:
			se.dataW[p] = true
		}
	}
	for _, p := range sortedKeys(lw.child) {
		switch n := s.nodes[p]; {
		case n == nil:
			s.notifyLocked(se, zk.Event{Type: zk.EventNodeDeleted, State: zk.StateSyncConnected, Path: p})
		case n.pzxid > lw.rel:
			s.notifyLocked(se, zk.Event{Type: zk.EventNodeChildrenChanged, State: zk.StateSyncConnected, Path: p})
		default:
			se.childW[p] = true
		}
	}
}

// takeLateLocked takes the session's watches off the server for a late
// setWatches, if [Conn.LateWatches] asked for one.
func (s *Server) takeLateLocked(c *Conn, se *sess) {
	if !c.late {
		return
	}
	c.late = false
	lw := &lateWatches{rel: s.zxid, data: map[string]bool{}, child: map[string]bool{}}
	for p := range se.dataW {
		lw.data[p] = s.nodes[p] == nil
	}
	for p := range se.childW {
		lw.child[p] = true
	}
	se.dataW, se.childW = map[string]bool{}, map[string]bool{}
	c.lateW = lw
}
