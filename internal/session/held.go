package session

import (
	"fmt"
	"path"
)

// Watching what we hold. A held node that someone else deletes ends its
// lease at once, learnt from ZooKeeper's watches, with no request, poll or
// goroutine per lease: every held node is covered by its own data watch or
// by the children watch that its acquire's first look set on the lock path
// after creating it; the connection's callback sees every event, ends the
// lease of a deleted node, and hands a node whose watch is spent to the
// keeper, which sets a data watch of its own. Why each step is sound, and
// the race the children-event count closes, is in docs/design.md,
// "Watching what we hold"; TestDeletedHeldNodesAmongThousands fails
// without it.

// register is the Session's record of held leases by node, and of what
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
