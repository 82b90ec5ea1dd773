// Package zkfake is an in-memory ZooKeeper behind the session layer's door
// (a [session.Backend]), for tests of the engine's decisions with no server: a
// tree of znodes with zxids, versions and cversions, ephemeral owners,
// sequential names, containers, one-shot data, exists and children
// watches, multi-operations that apply all or nothing, and sessions that
// can be expired, disconnected and reconnected. Errors are go-zookeeper's
// own values (zk.ErrNoNode, zk.ErrNodeExists, ...), as the door on
// go-zookeeper returns them. conformance_test.go holds it to a real
// ZooKeeper.
//
// What it models, with the ZooKeeper behaviour it follows:
//
//   - A sequential node's suffix is its parent's cversion before the
//     create, in ten digits (PrepRequestProcessor); a create of a child
//     bumps the parent's cversion, a delete does not, and both set its
//     pzxid to the transaction's zxid (DataTree.createNode, deleteNode;
//     PrepRequestProcessor's delete changes only the parent's pzxid and
//     child count, in 3.8.6 and 3.9.3 alike).
//   - One zxid per transaction: a multi's operations share it.
//   - Watches are one-shot and per session (WatchManager): a create fires
//     NodeCreated on the path's exists watches, then NodeChildrenChanged on
//     the parent's children watches; a delete fires NodeDeleted on the
//     path's data and children watches (once per session), then
//     NodeChildrenChanged on the parent; a set fires NodeDataChanged.
//   - A client sees a watch's event before the reply of any later request
//     (ZooKeeper's ordering guarantee): each reply waits until the events
//     queued before it have been delivered.
//   - Session events reach the connection's callback as go-zookeeper sends
//     them (StateDisconnected, StateExpired, StateHasSession), and an
//     expired session's connection opens a new one, as go-zookeeper does.
//
// Faults are injected through [Server.SetHooks] (before or after any
// operation) and the methods [Server.Expire], [Server.Delete],
// [Conn.Disconnect], [Conn.Reconnect].
package zkfake

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
)

// Op is one operation a connection asks of the server, as hooks see it.
type Op struct {
	Name    string   // the door's method: "CreateEach", "ChildrenStatW", ...
	Paths   []string // the paths (prefixes for CreateEach) it names
	Session int64    // the session it is made in
	Conn    *Conn
}

// Hooks inject faults. Before runs before an op is applied: a non-nil
// error fails the op with it, unapplied. After runs once the op has been
// applied (or refused), with its error: what it returns replaces that
// error (return err to keep it). Both run with no lock held, so they may
// call the Server's and Conn's methods; they run in the goroutine of the
// op.
type Hooks struct {
	Before func(op Op) error
	After  func(op Op, err error) error
}

type znode struct {
	data       []byte
	czxid      int64
	mzxid      int64
	pzxid      int64
	ctime      int64
	version    int32
	cversion   int32
	owner      int64
	container  bool
	ephemeral  bool
	children   map[string]bool
	hadChild   bool
	sequential bool
}

type sess struct {
	id        int64
	timeout   time.Duration
	conn      *Conn // the connection it is attached to
	expired   bool
	lastHeard time.Time
	dataW     map[string]bool // data and exists watches (one table, as the server's)
	childW    map[string]bool
	pending   []zk.Event // events while its connection is down
}

// Server is the in-memory ZooKeeper. Its zero value is not usable: use
// [New].
type Server struct {
	mu       sync.Mutex
	zxid     int64
	nodes    map[string]*znode
	sessions map[int64]*sess
	nextID   int64
	hooks    Hooks
	conns    []*Conn
	state    *sync.Cond // on mu: a connection's state changed
}

// New returns a server holding only "/".
func New() *Server {
	s := &Server{
		nodes:    map[string]*znode{"/": {children: map[string]bool{}}},
		sessions: map[int64]*sess{},
		nextID:   0x100,
	}
	s.state = sync.NewCond(&s.mu)
	return s
}

// SetHooks sets the hooks of every later operation.
func (s *Server) SetHooks(h Hooks) {
	s.mu.Lock()
	s.hooks = h
	s.mu.Unlock()
}

// Zxid returns the last zxid.
func (s *Server) Zxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zxid
}

// Conns returns the connections opened so far, oldest first.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Conn(nil), s.conns...)
}

// Connect opens a connection with a new session of the given timeout,
// reporting its events to events as go-zookeeper's event callback would
// (from another goroutine, in order). Its signature is
// session.Options.Connect's.
func (s *Server) Connect(timeout time.Duration, events func(zk.Event)) (session.Conn, error) {
	return s.Dial(events, timeout).Door, nil
}

// Dial is Connect with a session timeout (for the server's expiry by
// time, [Server.ExpireIdle]).
func (s *Server) Dial(events func(zk.Event), timeout time.Duration) *Conn {
	c := &Conn{srv: s, events: events, watchers: map[wkey][]chan zk.Event{}}
	c.Door = session.NewConn(c)
	c.qcond = sync.NewCond(&c.qmu)
	go c.deliver()
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.newSessionLocked(c, timeout)
	s.mu.Unlock()
	return c
}

func (s *Server) newSessionLocked(c *Conn, timeout time.Duration) {
	s.nextID++
	s.zxid++ // createSession is a transaction
	se := &sess{id: s.nextID, timeout: timeout, conn: c, dataW: map[string]bool{}, childW: map[string]bool{}, lastHeard: time.Now()}
	s.sessions[se.id] = se
	c.sid, c.connected = se.id, true
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateConnecting, Server: "zkfake"})
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateConnected, Server: "zkfake"})
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateHasSession, Server: "zkfake"})
}

// Sessions returns the ids of the live sessions, in order.
func (s *Server) Sessions() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for id, se := range s.sessions {
		if !se.expired {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Expire ends session id on the server: its ephemeral nodes are deleted
// (one transaction, as closeSession is), and its connection, if attached,
// is dropped; go-zookeeper then reconnects, is told the session expired,
// and opens a new one. It reports whether the session was live.
func (s *Server) Expire(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[id]
	if se == nil || se.expired {
		return false
	}
	s.endSessionLocked(se)
	if c := se.conn; c != nil && !c.closed {
		if c.connected {
			c.connected = false
			c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected, Server: "zkfake"})
		}
		if !c.held {
			s.reconnectLocked(c)
		}
	}
	return true
}

// ExpireIdle expires every session not heard from for its timeout (a
// server's session tracker), and returns their ids.
func (s *Server) ExpireIdle(now time.Time) []int64 {
	s.mu.Lock()
	var ids []int64
	for id, se := range s.sessions {
		down := se.conn == nil || !se.conn.connected // a connected client pings
		if !se.expired && down && now.Sub(se.lastHeard) >= se.timeout {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s.Expire(id)
	}
	return ids
}

func (s *Server) endSessionLocked(se *sess) {
	se.expired = true
	var eph []string
	for p, n := range s.nodes {
		if n.ephemeral && n.owner == se.id {
			eph = append(eph, p)
		}
	}
	// closeSession is one transaction, which deletes the ephemerals (in
	// path order here; ZooKeeper's is its set's).
	sort.Strings(eph)
	s.zxid++
	var evs []firing
	for _, p := range eph {
		evs = s.deleteLocked(p, evs)
	}
	s.fireLocked(evs)
	se.dataW, se.childW, se.pending = map[string]bool{}, map[string]bool{}, nil
}

// Delete deletes a node from outside any session (an operator's delete),
// whatever its version.
func (s *Server) Delete(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[path]
	switch {
	case n == nil:
		return zk.ErrNoNode
	case len(n.children) > 0:
		return zk.ErrNotEmpty
	}
	s.zxid++
	s.fireLocked(s.deleteLocked(path, nil))
	return nil
}

// Create makes a node from outside any session (persistent), for tests
// that set a stage.
func (s *Server) Create(path string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zxid++
	_, evs, err := s.createLocked(path, data, 0, false, false, nil)
	if err == nil {
		s.fireLocked(evs)
	}
	return err
}

// ReapContainers deletes the containers that had children and have none
// (ZooKeeper's ContainerManager, which does so every minute), and returns
// their paths.
func (s *Server) ReapContainers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for p, n := range s.nodes {
		if n.container && n.hadChild && len(n.children) == 0 {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	for _, p := range out {
		s.zxid++
		s.fireLocked(s.deleteLocked(p, nil))
	}
	return out
}

// Children lists path's children, sorted (for tests' checks).
func (s *Server) Children(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[path]
	if n == nil {
		return nil
	}
	return sortedKeys(n.children)
}

// Exists reports whether path exists.
func (s *Server) Exists(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[path] != nil
}

// Owner returns the ephemeral owner of path (0: none or no such node).
func (s *Server) Owner(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[path]; n != nil {
		return n.owner
	}
	return 0
}

// Czxid returns the zxid of path's create (0: no such node).
func (s *Server) Czxid(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[path]; n != nil {
		return n.czxid
	}
	return 0
}

// Watched returns the paths the live sessions watch (data, exists or
// children), sorted, a path once per session watching it: what ZooKeeper's
// wchp lists.
func (s *Server) Watched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, se := range s.sessions {
		if se.expired {
			continue
		}
		for p := range se.dataW {
			out = append(out, p)
		}
		for p := range se.childW {
			if !se.dataW[p] {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Nodes returns every path in the tree, sorted.
func (s *Server) Nodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.nodesSet())
}

func (s *Server) nodesSet() map[string]bool {
	m := make(map[string]bool, len(s.nodes))
	for p := range s.nodes {
		m[p] = true
	}
	return m
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func parentOf(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

func validPath(p string) bool {
	return p == "/" || strings.HasPrefix(p, "/") && !strings.HasSuffix(p, "/") && !strings.Contains(p, "//")
}

// firing is one watch trigger, applied after a transaction commits.
type firing struct {
	typ  zk.EventType
	path string
}

// createLocked creates a node at s.zxid, and returns its name and the
// triggers. It changes nothing if it fails.
func (s *Server) createLocked(path string, data []byte, owner int64, ephemeral, sequential bool, evs []firing) (string, []firing, error) {
	if !validPath(path) || path == "/" && !sequential {
		if path == "/" {
			return "", evs, zk.ErrNodeExists
		}
		return "", evs, zk.ErrInvalidPath
	}
	pp, _ := parentOf(path)
	parent := s.nodes[pp]
	if parent == nil {
		return "", evs, zk.ErrNoNode
	}
	if parent.ephemeral {
		return "", evs, zk.ErrNoChildrenForEphemerals
	}
	if sequential {
		path += fmt.Sprintf("%010d", parent.cversion)
	}
	if s.nodes[path] != nil {
		return "", evs, zk.ErrNodeExists
	}
	_, name := parentOf(path)
	now := time.Now().UnixMilli()
	n := &znode{data: append([]byte(nil), data...), czxid: s.zxid, mzxid: s.zxid, pzxid: s.zxid, ctime: now,
		owner: owner, ephemeral: ephemeral, children: map[string]bool{}, sequential: sequential}
	s.nodes[path] = n
	parent.children[name] = true
	parent.hadChild = true
	parent.cversion++
	parent.pzxid = s.zxid
	evs = append(evs, firing{zk.EventNodeCreated, path}, firing{zk.EventNodeChildrenChanged, pp})
	return path, evs, nil
}

// deleteLocked deletes an existing childless node at s.zxid.
func (s *Server) deleteLocked(path string, evs []firing) []firing {
	pp, name := parentOf(path)
	delete(s.nodes, path)
	if parent := s.nodes[pp]; parent != nil {
		delete(parent.children, name)
		parent.pzxid = s.zxid
	}
	return append(evs, firing{zk.EventNodeDeleted, path}, firing{zk.EventNodeChildrenChanged, pp})
}

// fireLocked triggers the watches of a committed transaction, in order.
func (s *Server) fireLocked(evs []firing) {
	ids := make([]int64, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, f := range evs {
		for _, id := range ids {
			se := s.sessions[id]
			if se.expired {
				continue
			}
			fire := false
			switch f.typ {
			case zk.EventNodeCreated, zk.EventNodeDataChanged:
				fire = se.dataW[f.path]
				delete(se.dataW, f.path)
			case zk.EventNodeDeleted:
				fire = se.dataW[f.path] || se.childW[f.path] // once per session
				delete(se.dataW, f.path)
				delete(se.childW, f.path)
			case zk.EventNodeChildrenChanged:
				fire = se.childW[f.path]
				delete(se.childW, f.path)
			}
			if fire {
				s.notifyLocked(se, zk.Event{Type: f.typ, State: zk.StateSyncConnected, Path: f.path})
			}
		}
	}
}

func (s *Server) notifyLocked(se *sess, ev zk.Event) {
	if c := se.conn; c != nil && c.connected && c.sid == se.id {
		c.emitLocked(ev)
		return
	}
	se.pending = append(se.pending, ev)
}

// reconnectLocked is go-zookeeper's reconnect: the session is taken up
// again, or found expired, and then a new one opened.
func (s *Server) reconnectLocked(c *Conn) {
	se := s.sessions[c.sid]
	if se != nil && !se.expired {
		c.connected = true
		se.lastHeard = time.Now()
		c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateConnected, Server: "zkfake"})
		c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateHasSession, Server: "zkfake"})
		for _, ev := range se.pending {
			c.emitLocked(ev)
		}
		se.pending = nil
		s.takeLateLocked(c, se)
		return
	}
	// Conn.authenticate: sessionID 0, StateExpired; loop: invalidate the
	// watches, StateDisconnected; then a new session.
	timeout := 10 * time.Second
	if se != nil {
		timeout = se.timeout
		se.conn = nil
	}
	c.sid = 0
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateExpired, Server: "zkfake"})
	c.invalidateLocked(zk.ErrSessionExpired)
	c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected, Server: "zkfake"})
	c.epoch++
	s.newSessionLocked(c, timeout)
	s.state.Broadcast()
}
