package zklock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is one held position in a lock: a node of ours that the lock's
// driver says holds. It is safe for concurrent use.
//
// Holding is never guaranteed: a lease ends when it is released, and is lost
// when its deadline passes before the quorum confirmed the session again
// (ErrLeaseExpired; see [Lease.ValidUntil]), when the session expires
// (ErrSessionExpired), when the Client is closed (ErrClientClosed), or, with
// [WithLossOnDisconnect], at the first disconnect (ErrConnectionSuspended).
// Watch [Lease.Done], or check [Lease.Err], and stop relying on the lock when
// it is lost; pass [Lease.Token] to the resources you protect so they can
// reject a stale holder.
type Lease struct {
	c       *Client
	node    string
	others  []string // a [MultiLock]'s lease: its nodes on the other paths
	token   int64
	session int64
	meta    leaseMeta // path and kind, for traces
	granted time.Time

	mu       sync.Mutex
	err      error // set once, when the lease ends; never changes after
	until    time.Time
	released bool
	done     chan struct{}
	revoked  chan struct{} // made by the first Revoked call
}

// Node returns the full path of the lease's znode. A [MultiLock]'s lease
// has a node on each of its paths; Node returns the one on the first path.
func (l *Lease) Node() string { return l.node }

// nodes returns every node of the lease, Node's first.
func (l *Lease) nodes() []string { return append([]string{l.node}, l.others...) }

// Token returns the lease's fencing token, a ZooKeeper zxid: the one that
// created its node, or, for a lease held on its first look with nothing
// created behind it, the lock path's latest child change (its pzxid),
// which saves a request. ZooKeeper's zxids are totally ordered and a
// participant only holds after every conflicting participant queued ahead
// of it has gone, so tokens strictly increase across successive
// conflicting holders of a path (the proof is in [participant.parentToken]).
// The leases of one [Semaphore.AcquireN] share a token; a [MultiLock]'s
// lease has one, the zxid of the one transaction that created all its
// nodes.
func (l *Lease) Token() int64 { return l.token }

// Done returns a channel that is closed when the lease ends: released, or
// lost. [Lease.Err] says why, and says the same from then on.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held. Once the lease has ended it
// returns the one reason, an error wrapping ErrReleased, ErrLeaseExpired,
// ErrSessionExpired, ErrClientClosed or ErrConnectionSuspended, and never
// changes again (a lease lost to a disconnect reports ErrConnectionSuspended
// even if its session expires later).
//
// Err compares the clock with the deadline itself ([Lease.ValidUntil]): a
// process that was paused past the deadline sees ErrLeaseExpired on its
// first call, before any event or goroutine has told it; Done is closed by
// then too.
func (l *Lease) Err() error {
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if ok, deadline := l.c.valid(l.session, time.Now()); !ok {
		l.c.lose(l, errLeaseExpired(deadline))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil returns the lease's deadline: the time before which no
// ZooKeeper leader can have expired its session, by what the quorum has
// confirmed (the derivation is in keeper.go). It moves forward while the
// Client's keeper has the session confirmed, at least every third of the
// session timeout; once it passes, [Lease.Err] is non-nil on its very next
// call. Work that the lock protects and that its resource cannot fence
// with [Lease.Token] should finish before it. After the lease has ended it
// returns the deadline the lease had then, or the time it ended, whichever
// came first.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	ended, until := l.err != nil, l.until
	l.mu.Unlock()
	if ended {
		return until
	}
	_, deadline := l.c.valid(l.session, time.Now())
	return deadline
}

// Release ends the lease and deletes its node, retrying connection errors
// with backoff until ctx is done. The lease counts as ended (Done is closed)
// before the node is deleted, so it never outlives its node. If ctx ends
// before the node is deleted, the Client's janitor keeps deleting it in the
// background, while the session lasts. A [MultiLock]'s lease deletes its
// nodes on every path, in one multi-operation when it can.
//
// Release returns nil, or, if the lease had been lost already, an error
// wrapping the reason (the janitor deletes its node, if the session still
// has it). A second call returns an error wrapping ErrReleased.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("zklock: release %s: %w", l.node, ErrReleased)
	}
	l.released = true
	l.mu.Unlock()
	// End the lease before touching its node, so that it never outlives
	// the node. One that is lost (or past its deadline: Err ends it) stays
	// lost, and whoever ended it took care of its node.
	lost := l.Err()
	if lost == nil {
		_, deadline := l.c.valid(l.session, time.Now())
		if !l.end(ErrReleased, deadline) {
			lost = l.Err() // lost meanwhile
		}
	}
	if lost != nil {
		return fmt.Errorf("zklock: release %s: lease was lost: %w", l.node, lost)
	}
	l.c.forget(l)
	l.c.released(l)

	nodes := l.nodes()
	err := l.c.retry(ctx, func(zc conn) error { return deleteAllOwned(zc, nodes, l.session) })
	switch o := l.c.classify(err); {
	case o == done || o == closing:
		return nil
	case o == retry || ctx.Err() != nil:
		l.c.janitor.discard(job{nodes: nodes, session: l.session})
		return nil
	}
	return fmt.Errorf("zklock: release %s: %w", l.node, err)
}

// end ends a held lease with err; deadline is the one it had. It reports
// whether the lease was live, so that exactly one caller takes care of its
// node. It never blocks: the Client calls it from its state callback.
func (l *Lease) end(err error, deadline time.Time) bool {
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
