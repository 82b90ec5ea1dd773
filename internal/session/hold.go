package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Hold is the session's side of one lease: its nodes, held in one session,
// and how it ended. The zklock package's Lease wraps it.
type Hold struct {
	s     *Session
	nodes []string // the first is the lease's Node

	tok   sync.Mutex   // held while the token is read (token.go)
	token atomic.Int64 // the fencing token...
	lazy  string       // ...or, until read, the lock path whose pzxid it is

	session int64
	granted time.Time
	Meta    any // the recipe's, for its traces

	mu       sync.Mutex
	extras   []string // deleted with its nodes, after them ([Hold.Attach])
	handoff  string   // the grant its release fires, if any ([Grant].Handoffs)...
	alone    bool     // ...unless nobody has queued behind it ([Grant].Alone)
	err      error    // set once, when the lease ends; never changes after
	until    time.Time
	released bool
	done     chan struct{}
}

// Nodes returns the lease's nodes, Node first (not its extras).
func (l *Hold) Nodes() []string { return l.nodes }

// Attach records paths (a registry entry, a marker) that go with the
// lease's nodes: every deletion of the nodes by the Session (Release, the
// janitor's after a loss) deletes them too. If the lease has ended
// already (lost between its grant and the registration), the janitor
// deletes its nodes and then paths, unless the session is gone (and they
// with it). A lease with extras never hands off ([Hold.handOff]).
//
// The invariant: an extra is never deleted before its lease's nodes, only
// in the same multi or after (deleteThen), so a reader counting entries
// never under-counts a live holder; an extra left behind only over-counts.
func (l *Hold) Attach(paths ...string) {
	if len(paths) == 0 {
		return
	}
	l.mu.Lock()
	err := l.err
	if err == nil {
		l.extras = append(l.extras, paths...)
	}
	l.mu.Unlock()
	if err != nil && !sessionGone(err) {
		l.s.janitor.enqueue(Job{Nodes: l.nodes, Then: slices.Clone(paths), Session: l.session})
	}
}

// extrasOf returns the lease's extras, fixed once it has ended.
func (l *Hold) extrasOf() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extras
}

// Session returns the id of the session that holds the lease.
func (l *Hold) Session() int64 { return l.session }

// Granted returns when the lease was granted.
func (l *Hold) Granted() time.Time { return l.granted }

// Done returns a channel that is closed when the lease ends.
func (l *Hold) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, then the one reason it ended.
// It checks the deadline itself: a process paused past it gets
// ErrLeaseExpired (and Done closed) on its first call, before any event.
func (l *Hold) Err() error {
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if ok, deadline := l.s.valid(l.session, time.Now()); !ok {
		l.s.lose(l, errLeaseExpired(deadline))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil returns the lease's deadline (see keeper.go); once it ended,
// the earlier of the deadline it had then and the time it ended.
func (l *Hold) ValidUntil() time.Time {
	l.mu.Lock()
	ended, until := l.err != nil, l.until
	l.mu.Unlock()
	if ended {
		return until
	}
	_, deadline := l.s.valid(l.session, time.Now())
	return deadline
}

// Release ends the lease (closes Done), so that it never outlives its
// nodes, then deletes each, whatever becomes of the others, and its
// extras after them ([Hold.Attach]), retrying connection errors with
// backoff until ctx is done; the janitor deletes what is left then, while
// the session lasts.
//
// It returns nil; an error wrapping the reason if the lease was lost
// already (the janitor deletes its nodes, if the session still has them);
// or a *NodeError naming the first node that cannot be deleted for good
// (no auth, a bad ACL), which stays until the session ends. A second call
// returns ErrReleased.
func (l *Hold) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("%s: %w", l.nodes[0], ErrReleased)
	}
	l.released = true
	l.mu.Unlock()
	// A lease lost (or past its deadline: Err ends it) stays lost, and
	// whoever ended it took care of its nodes.
	lost := l.Err()
	if lost == nil {
		_, deadline := l.s.valid(l.session, time.Now())
		if !l.end(ErrReleased, deadline) {
			lost = l.Err() // lost meanwhile
		}
	}
	if lost != nil {
		return fmt.Errorf("lease %s was lost: %w", l.nodes[0], lost)
	}
	if quiet := l.s.released(l); !(quiet && l.alone) && l.handOff() {
		return nil
	}
	d := l.s.deleteReleased(ctx, l.nodes, l.extrasOf(), l.session)
	if d.left != nil && l.s.Classify(d.retry) != Closing {
		l.s.Discard(Job{Nodes: d.left, Then: d.then, Session: l.session})
	}
	return d.failed
}

// handOff deletes a lease's node and fires its handoff's grant in one
// request ([Door.HandOff]), and reports whether the node is gone (by it or
// before). If not (no handoff, a connection not the lease's, any failure),
// Release deletes it with retries; the successor, told of a deletion with
// no grant, reads the queue (safe: zklock's handoff.go).
//
// The grant is safe: the lease held, so its node was first in its queue
// (the handoff's policies hold only there), and nothing queues ahead of a
// node; the multi fires the grant in the transaction that deletes it, so
// whoever the grant tells holds is then first.
func (l *Hold) handOff() bool {
	l.mu.Lock()
	grant, extras := l.handoff, len(l.extras)
	l.mu.Unlock()
	if grant == "" || extras > 0 { // HandOff deletes the node alone
		return false
	}
	zc := l.s.Conn()
	if zc.SessionID() != l.session {
		return false
	}
	err := zc.HandOff(l.nodes[0], grant, l.s.ACL(grant))
	return err == nil || GoneAt(err, l.nodes[0])
}

// NoHandOff makes the lease's release fire no grant: a downgrade's write
// lease, whose node is no longer first once the read node at its place
// sorts ahead of it (zklock's rwlock.go).
func (l *Hold) NoHandOff() {
	l.mu.Lock()
	l.handoff = ""
	l.mu.Unlock()
}

// released takes l out of the register; quiet: the granting read's children
// watch still covered its first node (no child created or deleted since).
func (c *Session) released(l *Hold) (quiet bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	quiet = c.held.bareHas(l.nodes[0])
	c.held.remove(l)
	c.hooks.Released(l)
	return quiet
}

// end ends a held lease with err; deadline is the one it had. It reports
// whether the lease was live, so that exactly one caller takes care of its
// nodes. It never blocks: the Session calls it from its state callback.
func (l *Hold) end(err error, deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err, l.until = err, time.Now()
	if deadline.Before(l.until) {
		l.until = deadline
	}
	close(l.done)
	return true
}

// releases is group commit for released leases: deletes that come while one
// is in flight go out as one multi-operation (one request and transaction)
// when it returns; an uncontended Release sends its own at once. Each lease
// ended before its nodes are deleted (Release), so one transaction for many
// participants' nodes changes nothing a successor sees but their shared zxid.
type releases struct {
	mu      sync.Mutex
	busy    bool          // a delete is in flight
	pending []*releaseReq // what came meanwhile
}

// releaseReq is one Release's delete, queued behind the one in flight.
type releaseReq struct {
	nodes   []string
	then    []string // deleted after nodes (Job.Then)
	session int64
	res     chan releaseRes // gets one message: the lead, or the outcome
	left    bool            // its Release's ctx ended; under releases.mu
}

// releaseRes is what a queued Release hears: the batch's outcome (batched),
// that it sends the next batch (lead), or neither: it deletes its own nodes.
type releaseRes struct {
	batched bool
	lead    []*releaseReq
}

// maxReleaseBatch bounds the nodes one batch deletes, far below ZooKeeper's
// 1 MiB request limit.
const maxReleaseBatch = 1000

// deleteReleased deletes a released lease's nodes, then its extras (then);
// with a delete in flight it queues, and whoever's delete returns first
// sends the queue as one multi-operation. A batch that fails in any way (a
// node gone or not ours, a lost connection) is not retried as one: each
// Release deletes its own, with retries, so no lease's undeletable node
// keeps another's in place.
func (c *Session) deleteReleased(ctx context.Context, nodes, then []string, session int64) deletion {
	if len(nodes)+len(then) > maxReleaseBatch {
		return c.deleteRetried(ctx, nodes, then, session)
	}
	r := &c.releases
	r.mu.Lock()
	if !r.busy {
		r.busy = true
		r.mu.Unlock()
		d := c.deleteRetried(ctx, nodes, then, session)
		c.nextReleases()
		return d
	}
	me := &releaseReq{nodes: nodes, then: then, session: session, res: make(chan releaseRes, 1)}
	r.pending = append(r.pending, me)
	r.mu.Unlock()
	var res releaseRes
	select {
	case res = <-me.res:
	case <-ctx.Done():
		c.leave(me)
		return deletion{left: nodes, then: then, retry: ctx.Err()} // Release hands our nodes to the janitor
	}
	if res.lead != nil {
		res = c.sendReleases(res.lead, me)
	}
	if res.batched {
		return deletion{}
	}
	return c.deleteRetried(ctx, nodes, then, session)
}

// deleteRetried deletes as deleteAllOwned does, retrying what a connection
// error left, with backoff, until ctx is done or the Session closes; the
// caller hands what is then left to the janitor.
func (c *Session) deleteRetried(ctx context.Context, nodes, then []string, session int64) deletion {
	// No closure for the first try, almost always the last (hot path).
	first := c.deleteAllOwned(c.Conn(), nodes, then, session)
	if first.retry == nil {
		return first
	}
	failed, left, then := first.failed, first.left, first.then
	err := c.Retry(ctx, func(zc Conn) error {
		d := c.deleteAllOwned(zc, left, then, session)
		left, then = d.left, d.then
		if failed == nil {
			failed = d.failed
		}
		return d.retry
	})
	if err == nil {
		left, then = nil, nil
	}
	return deletion{left: left, then: then, retry: err, failed: failed}
}

// leave takes a queued Release whose ctx ended out of the running for the
// lead: its nodes may still go out in a batch (deleting ours twice is
// harmless), but the queue must not wait for it. A lead that reached it
// already it passes on, or sends the batch if all in it have left.
func (c *Session) leave(me *releaseReq) {
	r := &c.releases
	r.mu.Lock()
	me.left = true
	var lead []*releaseReq
	select {
	case res := <-me.res:
		lead = res.lead
	default:
	}
	send := lead != nil && !r.handLeadLocked(lead)
	r.mu.Unlock()
	if send {
		c.sendReleases(lead, nil)
	}
}

// handLeadLocked gives batch's lead to its first member still waiting, or
// reports false. r.mu is held, so none leaves between being chosen and told
// (its channel has room for its one message).
func (r *releases) handLeadLocked(batch []*releaseReq) bool {
	for _, q := range batch {
		if !q.left {
			q.res <- releaseRes{lead: batch}
			return true
		}
	}
	return false
}

// nextReleases hands the queue to its first Release still waiting (or
// sends it itself if all left), or marks that no delete is in flight.
func (c *Session) nextReleases() {
	r := &c.releases
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	if len(batch) == 0 {
		r.busy = false
	}
	send := len(batch) > 0 && !r.handLeadLocked(batch)
	r.mu.Unlock()
	if send {
		c.sendReleases(batch, nil)
	}
}

// sendReleases deletes batch's nodes in one multi-operation, tells the
// others in it the outcome, passes the queue on, and returns me's.
func (c *Session) sendReleases(batch []*releaseReq, me *releaseReq) releaseRes {
	var take, rest []*releaseReq
	var nodes []string
	zc := c.Conn()
	sid := zc.SessionID()
	for _, q := range batch {
		if q.session == sid && len(nodes)+len(q.nodes)+len(q.then) <= maxReleaseBatch {
			take = append(take, q)
			nodes = append(append(nodes, q.nodes...), q.then...) // one multi: all or none
		} else {
			rest = append(rest, q) // on their own
		}
	}
	ok := len(take) > 1 && zc.DeleteAll(nodes) == nil
	var mine releaseRes
	for i, q := range append(take, rest...) {
		res := releaseRes{batched: ok && i < len(take)}
		if q == me {
			mine = res
		} else {
			q.res <- res
		}
	}
	c.nextReleases()
	return mine
}
