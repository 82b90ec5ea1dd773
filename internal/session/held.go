package session

import (
	"fmt"
	"path"
	"slices"
	"time"
)

// Watching what we hold. A held node someone else deletes ends its lease at
// once, through ZooKeeper's watches, with no request, poll or goroutine per
// lease. Each held node is covered by its own data watch, or by the children
// watch its granting read (a first look) set on the lock path after creating
// it, or is the keeper's to watch ([armAge]), as is one whose watch is spent
// ([Session.onWatch] sees every event) or whose granting read set none (a
// waiter's, or a first look on a contended lock). Why each step is sound, and
// the race the children-event count closes: docs/design.md, "Watching what we
// hold"; without it TestDeletedHeldNodesAmongThousands fails.

// register is the Session's record of held leases by node, and of what
// covers each node. Its methods run under c.mu.
type register struct {
	leases map[*Hold]struct{}
	byNode map[string]*Hold
	bare   map[string][]string  // lock path -> held nodes covered only by a children watch on it (few per path)
	looks  map[string]*looks    // lock path -> looks in flight
	arm    map[string]time.Time // held nodes that need a data watch, from when; the keeper sets it
}

// armAge is how old a lease must be before the keeper sets a data watch on
// its node once its cover is spent; a younger lease is watched at that age,
// unless it ends first. On a busy path the next participant's create spends
// the granting read's children watch while the lease is a few milliseconds
// old; most such leases are released before armAge, saving a request per
// handoff. The cost: a node deleted while its lease is younger ends it up
// to armAge after ZooKeeper's notice; armAge is a twentieth of the session
// timeout, while ZooKeeper's own notice of a lost session takes all of it.
func armAge(t time.Duration) time.Duration { return t / 20 }

// armLocked hands node, of lease l, to the keeper for a data watch.
func (c *Session) armLocked(l *Hold, node string, now time.Time) {
	due := l.granted.Add(armAge(c.wire.hs.timeout()))
	if due.Before(now) {
		due = now
	}
	c.held.arm[node] = due
	if !c.wakeByLocked(due) { // else it wakes in time, and sees it then
		c.keeper.wake()
	}
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
		bare:   make(map[string][]string),
		looks:  make(map[string]*looks),
		arm:    make(map[string]time.Time),
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

func (r *register) lookEnd(path string) {
	if lk := r.looks[path]; lk != nil {
		if lk.refs--; lk.refs <= 0 {
			delete(r.looks, path)
		}
	}
}

// Cover says how a node of a lease about to be granted is watched.
type Cover struct {
	Own  bool // its own data watch is set and has not fired
	Look Look // else: the look that set a children watch on its path, if active
}

// add registers a granted lease; covers[i] goes with its i-th node. It
// returns the nodes that no watch covers.
func (r *register) add(l *Hold, covers []Cover) (bare []string) {
	r.leases[l] = struct{}{}
	for i, node := range l.nodes {
		r.byNode[node] = l
		cv := covers[i]
		switch lk := r.looks[cv.Look.path]; {
		case cv.Own:
		case cv.Look.Active() && lk != nil && lk.events == cv.Look.events:
			r.bare[cv.Look.path] = append(r.bare[cv.Look.path], node)
		default:
			bare = append(bare, node)
		}
	}
	return bare
}

// bareHas reports whether node is covered by a pending children watch.
func (r *register) bareHas(node string) bool {
	return slices.Contains(r.bare[path.Dir(node)], node)
}

func (r *register) remove(l *Hold) {
	delete(r.leases, l)
	for _, node := range l.nodes {
		delete(r.byNode, node)
		delete(r.arm, node)
		dir := path.Dir(node)
		b := slices.DeleteFunc(r.bare[dir], func(n string) bool { return n == node })
		if len(b) == 0 {
			delete(r.bare, dir)
		} else {
			r.bare[dir] = b
		}
	}
}

// childrenChanged records a children Event of path, and returns the nodes
// its spent children watch covered: they need a watch of their own.
func (r *register) childrenChanged(path string) []string {
	if lk := r.looks[path]; lk != nil {
		lk.events++
	}
	b := r.bare[path]
	delete(r.bare, path)
	return b
}

// takeArm returns the nodes due for a data watch at now, and forgets them.
func (r *register) takeArm(now time.Time) []string {
	var nodes []string
	for node, due := range r.arm {
		if !due.After(now) {
			nodes = append(nodes, node)
			delete(r.arm, node)
		}
	}
	return nodes
}

// nextArm returns when the next node is due for a data watch; zero: none.
func (r *register) nextArm() time.Time {
	var next time.Time
	for _, due := range r.arm {
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// onWatch follows the watch events of connection generation gen: a held
// node deleted ends its lease; one whose data changed, or whose children
// watch is spent, goes to the keeper. The connection calls it from its
// own goroutine: it never blocks.
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
		if l := c.held.byNode[ev.Path]; l != nil {
			c.armLocked(l, ev.Path, time.Now())
		}
	case ChildrenChanged(ev):
		now := time.Now()
		for _, node := range c.held.childrenChanged(ev.Path) {
			if l := c.held.byNode[node]; l != nil {
				c.armLocked(l, node, now)
			}
		}
	}
}

// nodeGone ends the lease whose node someone deleted: another participant
// may hold the lock already. An acquire waiting with the node hears of it
// on the channel [Session.Waiting] gave it, and queues again.
func (c *Session) nodeGone(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.waiting[node]; w != nil {
		delete(c.waiting, node)
		close(w.gone)
	}
	if l := c.held.byNode[node]; l != nil {
		c.loseLocked(l, errNodeDeleted(node))
	}
}

// waiter is an acquire under way, by its last node.
type waiter struct {
	session int64
	since   time.Time     // when it began waiting
	gone    chan struct{} // closed when the keeper finds the node gone
}

// Waiting records that an acquire waits with node, its last, in session: the
// keeper then confirms the session, so a grant finds the deadline ahead, and
// checks the node ([keeper.confirmation]). A waiter keeps no watch on its
// node: it learns of its deletion from gone, closed then, or the read on its
// next wake, whichever is first. done undoes the record.
func (c *Session) Waiting(node string, session int64) (gone <-chan struct{}, done func()) {
	w := &waiter{session: session, since: time.Now(), gone: make(chan struct{})}
	c.mu.Lock()
	c.waiting[node] = w
	c.kickLocked()
	c.mu.Unlock()
	return w.gone, func() {
		c.mu.Lock()
		if c.waiting[node] == w {
			delete(c.waiting, node)
		}
		c.mu.Unlock()
	}
}

func errNodeDeleted(node string) error {
	return fmt.Errorf("%w (%w): %s", ErrNodeDeleted, ErrLeaseExpired, node)
}
