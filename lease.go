package zklock

import (
	"context"
	"fmt"
	"sync"
)

// Lease is one held position in a lock: a node of ours that the lock's
// driver says holds. It is safe for concurrent use.
//
// Holding is never guaranteed: a lease ends when it is released, and is lost
// when the connection drops (ErrConnectionSuspended), the session expires
// (ErrSessionExpired) or the Client is closed (ErrClientClosed). Watch
// [Lease.Done] and stop relying on the lock when it closes; pass
// [Lease.Token] to the resources you protect so they can reject a stale
// holder.
type Lease struct {
	c       *Client
	node    string
	token   int64
	session int64

	mu       sync.Mutex
	err      error // set once, when the lease ends; never changes after
	released bool
	done     chan struct{}
}

// Node returns the full path of the lease's znode.
func (l *Lease) Node() string { return l.node }

// Token returns the lease's fencing token: the zxid that created its node.
// ZooKeeper's zxids are totally ordered and a participant only holds after
// every conflicting participant queued ahead of it has gone, so tokens
// strictly increase across successive conflicting holders of a path. The
// leases of one [Semaphore.AcquireN] share a token.
func (l *Lease) Token() int64 { return l.token }

// Done returns a channel that is closed when the lease ends: released, or
// lost. [Lease.Err] says why, and says the same from then on.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held. Once [Lease.Done] is closed it
// returns the one reason the lease ended, an error wrapping ErrReleased,
// ErrConnectionSuspended, ErrSessionExpired or ErrClientClosed, and never
// changes again: a lease lost to a disconnect reports ErrConnectionSuspended
// even if its session expires later.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release ends the lease and deletes its node, retrying connection errors
// with backoff until ctx is done. The lease counts as ended (Done is closed)
// before the node is deleted, so it never outlives its node. If ctx ends
// before the node is deleted, the Client's janitor keeps deleting it in the
// background, while the session lasts.
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
	lost := l.err
	if lost == nil {
		l.err = ErrReleased
		close(l.done)
	}
	l.mu.Unlock()
	if lost != nil {
		// Whoever ended the lease took care of its node.
		return fmt.Errorf("zklock: release %s: lease was lost: %w", l.node, lost)
	}
	l.c.forget(l)

	nodes := []string{l.node}
	err := l.c.retry(ctx, func(zc conn) error { return deleteOwned(zc, nodes, l.session) })
	switch o := classify(err); {
	case o == done || o == closing:
		return nil
	case o == retry || ctx.Err() != nil:
		l.c.janitor.discard(job{nodes: nodes, session: l.session})
		return nil
	}
	return fmt.Errorf("zklock: release %s: %w", l.node, err)
}

// end ends a held lease with err. It reports whether the lease was live,
// so that exactly one caller takes care of its node. It never blocks: the
// Client calls it from its state callback.
func (l *Lease) end(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	close(l.done)
	return true
}
