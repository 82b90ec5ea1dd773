package session

import (
	"context"
	"errors"
	"time"
)

// Grant is what a participant asks the Session to hold.
type Grant struct {
	Epoch     uint64     // the epoch of the reads that decided it holds
	Session   int64      // the session of its nodes
	Groups    [][]string // the nodes of each lease, its Node first
	Token     int64      // the leases' fencing token, or 0 and...
	TokenPath string     // ...the lock path whose pzxid it is (token.go)
	Meta      any        // the recipe's, kept with each lease ([Hold.Meta])
	// Covers says, for each node in the order of Groups, what watch tells
	// the Session if someone deletes it (see held.go).
	Covers []Cover
	// Handoffs, if set, names for each group the grant its release fires
	// ([Door.HandOff]), "" for none: a group of one node whose successor
	// may hold on that grant (handoff.go in the zklock package).
	Handoffs []string
	// Alone: the deciding read listed nobody behind our nodes. While its
	// children watch is pending at the release, nobody has queued since,
	// so none waits for the grant: the release is a plain delete.
	Alone bool
}

// Grant turns a participant's nodes into leases, one per group (its first
// node is the lease's Node; a MultiLock's has more, on other paths), if
// nothing changed in the session since g.Epoch (when the deciding children
// were read) and its deadline is ahead: a lease is only handed out for a
// decision made in the connection it was read on, in a session the quorum
// has confirmed for a while yet. It returns nil if the decision must be
// made again, and ErrUnconfirmed if the deadline is behind.
func (c *Session) Grant(g Grant) ([]*Hold, error) {
	epoch, session, covers := g.Epoch, g.Session, g.Covers
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if !c.connected || c.epoch != epoch || c.zc.SessionID() != session {
		return nil, nil
	}
	if c.session != session || !time.Now().Before(c.deadline) {
		c.keeperSeq++
		c.keeper.wake()
		return nil, ErrUnconfirmed
	}
	leases := make([]*Hold, len(g.Groups))
	now := time.Now()
	for i, nodes := range g.Groups {
		l := &Hold{s: c, nodes: nodes, lazy: g.TokenPath, session: session, done: make(chan struct{}), Meta: g.Meta, granted: now}
		l.token.Store(g.Token)
		if g.Handoffs != nil && len(nodes) == 1 {
			l.handoff, l.alone = g.Handoffs[i], g.Alone
		}
		for _, node := range c.held.add(l, covers[:len(nodes)]) {
			c.armLocked(l, node, now)
		}
		covers = covers[len(nodes):]
		leases[i] = l
	}
	c.kickLocked() // its deadline timer now matters
	return leases, nil
}

// ErrUnconfirmed: a grant found the session's deadline behind it.
var ErrUnconfirmed = errors.New("session not confirmed")

// AwaitConfirmed waits until the quorum confirms the session again, its
// state changes, or ctx is done.
func (c *Session) AwaitConfirmed(ctx context.Context, st Snapshot) error {
	c.mu.Lock()
	ch := c.confirmedCh
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-st.Changed:
	case <-ch:
	}
	return nil
}

func (c *Session) lose(l *Hold, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseLocked(l, err)
}

// loseLocked ends a held lease with err; if it was live, the janitor gets
// its nodes, then its extras ([Hold.Attach]), unless the session is gone
// (and they with it).
func (c *Session) loseLocked(l *Hold, err error) {
	if !l.end(err, c.deadline) {
		return
	}
	c.held.remove(l)
	c.hooks.Lost(l, err)
	if !sessionGone(err) {
		c.janitor.enqueue(Job{Nodes: l.nodes, Then: l.extrasOf(), Session: l.session})
	}
}

// sessionGone reports a lease's end that took its session's nodes with it.
func sessionGone(err error) bool { return err == ErrSessionExpired || err == ErrClientClosed }

// valid reports whether a lease of session is within its deadline at now,
// and the deadline.
func (c *Session) valid(session int64, now time.Time) (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != session {
		return false, time.Time{}
	}
	return now.Before(c.deadline), c.deadline
}

// Look is a read of a lock path's children that leaves a children watch,
// recorded before it is sent, so a grant knows whether that watch is still
// pending and covers the nodes it found (held.go). A zero Look is inactive.
type Look struct {
	s      *Session
	path   string
	events uint64 // the path's count of children events when the look began
}

// StartLook records a look about to be sent on path. End it once no
// grant can use it.
func (c *Session) StartLook(path string) Look {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Look{s: c, path: path, events: c.held.lookStart(path)}
}

// Active reports a look started and not ended.
func (l *Look) Active() bool { return l.s != nil }

// End drops the look; a second End does nothing.
func (l *Look) End() {
	if l.s == nil {
		return
	}
	l.s.mu.Lock()
	l.s.held.lookEnd(l.path)
	l.s.mu.Unlock()
	l.s = nil
}
