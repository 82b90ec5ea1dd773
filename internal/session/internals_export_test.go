package session

import (
	"path"
	"strings"
	"time"
)

// What the tests of package session_test (on internal/zkfake, which imports
// this package) may see of a Session's insides: read-only views, taken
// under the Session's mutex; two calls the Session's own goroutines make
// (OnWatch, Replace); and the keeper's decisions, asked of a keeper with no
// goroutine (its own goroutine keeps running beside it).

// Gen returns the generation of the Session's connection.
func (c *Session) Gen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Replace opens a new connection, as the keeper does when no server takes
// the session.
func (c *Session) Replace() { c.replace() }

// OnWatch delivers ev as the connection of generation gen's callback would.
func (c *Session) OnWatch(gen uint64, ev Event) { c.onWatch(gen, ev) }

// Confirmed returns the session the deadline belongs to, and the deadline.
func (c *Session) Confirmed() (session int64, deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session, c.deadline
}

// Waiters returns, by node, when each recorded waiter began.
func (c *Session) Waiters() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.waiting))
	for n, w := range c.waiting {
		out[n] = w.since
	}
	return out
}

// LooksOn returns the first looks in flight on path, and the path's count
// of children events since the first of them began.
func (c *Session) LooksOn(path string) (refs int, events uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lk := c.held.looks[path]; lk != nil {
		return lk.refs, lk.events
	}
	return 0, 0
}

// LookedPaths returns how many paths have first looks recorded.
func (c *Session) LookedPaths() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held.looks)
}

// CoverOf says what watches a held node: "path" (the children watch of the
// look that granted it), "arm" (handed to the keeper for a data watch),
// both ("arm+path"), or "" (neither: its own data watch, or not held).
func (c *Session) CoverOf(node string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	if _, ok := c.held.arm[node]; ok {
		out = append(out, "arm")
	}
	for _, n := range c.held.bare[path.Dir(node)] {
		if n == node {
			out = append(out, "path")
		}
	}
	return strings.Join(out, "+")
}

// ArmDue returns when node is due for the keeper's data watch (zero: not
// handed to the keeper).
func (c *Session) ArmDue(node string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held.arm[node]
}

// NextArm returns when the keeper next has nodes to watch.
func (c *Session) NextArm() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held.nextArm()
}

// BarePaths returns how many lock paths have held nodes recorded as
// covered by their children watch.
func (c *Session) BarePaths() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held.bare)
}

// ReleasesState returns whether a batched delete is in flight, and how many
// Releases are queued behind it.
func (c *Session) ReleasesState() (busy bool, pending int) {
	c.releases.mu.Lock()
	defer c.releases.mu.Unlock()
	return c.releases.busy, len(c.releases.pending)
}

// LeaveWithTheLead queues a Release of each of groups (nodes of the
// current session) behind a delete in flight, every one but the first
// already left (its ctx ended), and has that delete return: the first gets
// the lead. Then the first leaves too, with the lead unread in its channel,
// as when its ctx ends in the same moment: leave must send the batch.
func (c *Session) LeaveWithTheLead(groups [][]string) {
	r := &c.releases
	sid := c.Conn().SessionID()
	var batch []*releaseReq
	for i, nodes := range groups {
		batch = append(batch, &releaseReq{nodes: nodes, session: sid, res: make(chan releaseRes, 1), left: i > 0})
	}
	r.mu.Lock()
	r.busy, r.pending = true, batch
	r.mu.Unlock()
	c.nextReleases()
	c.leave(batch[0])
}

// KeeperAsleep reports whether the keeper sleeps.
func (c *Session) KeeperAsleep() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keeperAsleep
}

// JanitorJobs returns the jobs queued for the janitor's goroutine.
func (c *Session) JanitorJobs() []Job {
	c.janitor.mu.Lock()
	defer c.janitor.mu.Unlock()
	return append([]Job(nil), c.janitor.jobs...)
}

// KeeperView is what the keeper reads of the Session at a turn.
type KeeperView struct {
	Session   int64
	Nodes     []string // the nodes a confirmation checks
	WaitSince time.Time
}

// KeeperView returns what the keeper would read now.
func (c *Session) KeeperView() KeeperView {
	v := c.keeperView()
	return KeeperView{Session: v.session, Nodes: v.nodes, WaitSince: v.waitSince}
}

// DetachedKeeper is a keeper of the Session with no goroutine: its decisions,
// taken on the Session's state as the keeper would read it, or on a view
// the test changes.
type DetachedKeeper struct{ k *keeper }

// DetachedKeeper returns a keeper of c with no goroutine.
func (c *Session) DetachedKeeper() *DetachedKeeper { return &DetachedKeeper{k: &keeper{c: c}} }

// Confirm runs the keeper's confirmation now, as its turn would when due,
// and reports whether the keeper would act at all.
func (dk *DetachedKeeper) Confirm() bool {
	k := dk.k
	_, act := k.confirmation(k.c.keeperView(), k.c.wire.hs.timeout())
	if act == nil {
		return false
	}
	act()
	return true
}

// Arm runs the keeper's arming of held nodes if it is due now, as its turn
// would, and reports whether it was.
func (dk *DetachedKeeper) Arm() bool {
	k := dk.k
	due, act := k.arming(k.c.keeperView(), k.c.wire.hs.timeout())
	if act == nil || time.Now().Before(due) {
		return false
	}
	act()
	return true
}

// ArmingDue returns when the keeper would set the watches of held nodes
// due at arm.
func (dk *DetachedKeeper) ArmingDue(arm time.Time) time.Time {
	k := dk.k
	v := k.c.keeperView()
	v.arm = arm
	due, _ := k.arming(v, k.c.wire.hs.timeout())
	return due
}

// ConfirmationDue returns when the keeper would confirm the session next
// (zero: not at all).
func (dk *DetachedKeeper) ConfirmationDue() time.Time {
	k := dk.k
	due, _ := k.confirmation(k.c.keeperView(), k.c.wire.hs.timeout())
	return due
}

// Rejoin reports when the keeper would open a new connection, for the
// connection's state as given (zero, false: never).
func (dk *DetachedKeeper) Rejoin(connected bool, downSince time.Time) (time.Time, bool) {
	k := dk.k
	v := k.c.keeperView()
	v.connected, v.downSince = connected, downSince
	due, act := k.rejoin(v, k.c.wire.hs.timeout())
	return due, act != nil
}
