package session

import (
	"fmt"
	"path"
)

// Watching what we hold.
//
// A held node that someone else deletes (an operator, a bug, a forced
// revocation) ends its lease at once: the next waiter may hold already.
// The Client learns of it from ZooKeeper's watches, never by polling a
// lease, and at no request of its own for a lease that holds on its first
// look (most of them):
//
//   - Every held node is covered by a watch that fires when it is deleted:
//     its own data watch (the one a waiter sets on its node, or one the
//     keeper sets, [keeper.arm]), or a children watch on its lock path that
//     was set after the node was created (the first look of every acquire
//     sets one, [conn.childrenStatW]) and has not fired yet.
//   - The connection's Event callback sees every watch Event
//     (go-zookeeper's sendEvent runs before the watchers' channels are
//     served, Conn.recvLoop). A node deleted ends its lease there; a data
//     change (its own watch is spent) or a children change on its path (the
//     children watch is spent) hands the node to the keeper, which sets a
//     data watch of its own: getData, which also tells if it is gone by
//     then.
//   - Whether a first look's children watch is still pending at the grant
//     is known without a request: the callback counts the children events
//     of every path with a look in flight ([register.looks]); a lease
//     whose look saw a later count is armed at once.
//
// ZooKeeper keeps one watch per path and kind for a session, however many
// leases rely on it, and go-zookeeper sets them all again after a
// reconnect (Conn.sendSetWatches, in packets of at most 128 KiB), where a
// node deleted meanwhile fires at once. go-zookeeper only logs a failure
// to set them again; the keeper's confirmation, which checks held nodes
// (up to maxChecked of them), is the backstop.

// register is the Client's record of held leases by node, and of what
// covers each node. Its methods run under c.mu.
type register struct {
	leases map[*Hold]struct{}
	byNode map[string]*Hold
	bare   map[string]map[string]struct{} // lock path -> held nodes covered only by a children watch on it
	looks  map[string]*looks              // lock path -> first looks in flight
	arm    []string                       // held nodes that need a data watch; the keeper sets it
}

// looks counts the first looks in flight on one path, and the children
// events the path has had since the first of them began.
type looks struct {
	refs   int
	events uint64
}

func newRegister() register {
	return register{
		leases: make(map[*Hold]struct{}),
		byNode: make(map[string]*Hold),
		bare:   make(map[string]map[string]struct{}),
		looks:  make(map[string]*looks),
	}
}

// lookStart records a first look about to be sent on path, and returns the
// path's count of children events so far.
func (r *register) lookStart(path string) uint64 {
	lk := r.looks[path]
	if lk == nil {
		lk = &looks{}
		r.looks[path] = lk
	}
	lk.refs++
	return lk.events
}

// lookEnd drops a look recorded by lookStart.
func (r *register) lookEnd(path string) {
	if lk := r.looks[path]; lk != nil {
		if lk.refs--; lk.refs <= 0 {
			delete(r.looks, path)
		}
	}
}

// Cover says how a node of a lease about to be granted is watched.
type Cover struct {
	Own    bool   // its own data watch is set and has not fired
	Path   string // else: the lock path of the look that set a children watch...
	Events uint64 // ...when the path had had this many children events
}

// add registers a granted lease; covers[i] goes with its i-th node.
func (r *register) add(l *Hold, covers []Cover) {
	r.leases[l] = struct{}{}
	for i, node := range l.nodes {
		r.byNode[node] = l
		cv := covers[i]
		switch lk := r.looks[cv.Path]; {
		case cv.Own:
		case lk != nil && lk.events == cv.Events:
			if r.bare[cv.Path] == nil {
				r.bare[cv.Path] = make(map[string]struct{})
			}
			r.bare[cv.Path][node] = struct{}{}
		default:
			r.arm = append(r.arm, node)
		}
	}
}

// remove forgets a lease that ended.
func (r *register) remove(l *Hold) {
	delete(r.leases, l)
	for _, node := range l.nodes {
		delete(r.byNode, node)
		dir := path.Dir(node)
		if b := r.bare[dir]; b != nil {
			delete(b, node)
			if len(b) == 0 {
				delete(r.bare, dir)
			}
		}
	}
}

// childrenChanged records a children Event of path: its pending children
// watch is spent, so the nodes it covered need a watch of their own.
func (r *register) childrenChanged(path string) bool {
	if lk := r.looks[path]; lk != nil {
		lk.events++
	}
	b := r.bare[path]
	for node := range b {
		r.arm = append(r.arm, node)
	}
	delete(r.bare, path)
	return len(b) > 0
}

// takeArm returns the nodes to give a data watch, and forgets them.
func (r *register) takeArm() []string {
	nodes := r.arm
	r.arm = nil
	return nodes
}

// onWatch follows the watch events of the connection of generation gen:
// a held node deleted ends its lease; a held node whose data changed, or
// that a spent children watch covered, goes to the keeper for a new watch.
// The connection calls it from its own goroutine: it never blocks.
func (c *Session) onWatch(gen uint64, ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != c.gen {
		return
	}
	switch {
	case Deleted(ev):
		if l := c.held.byNode[ev.Path]; l != nil {
			c.loseLocked(l, errNodeDeleted(ev.Path))
		}
	case DataChanged(ev):
		if c.held.byNode[ev.Path] != nil {
			c.held.arm = append(c.held.arm, ev.Path)
			c.keeper.wake()
		}
	case ChildrenChanged(ev):
		if c.held.childrenChanged(ev.Path) {
			c.keeper.wake()
		}
	}
}

// nodeGone ends the lease whose node someone deleted: another participant
// may hold the lock already.
func (c *Session) nodeGone(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiting, node) // its acquire finds out by its own watch
	if l := c.held.byNode[node]; l != nil {
		c.loseLocked(l, errNodeDeleted(node))
	}
}

func errNodeDeleted(node string) error {
	return fmt.Errorf("%w (%w): %s", ErrNodeDeleted, ErrLeaseExpired, node)
}
