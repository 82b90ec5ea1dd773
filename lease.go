package zklock

import (
	"context"
	"errors"
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
	err      error
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
// lost. After it closes, [Lease.Err] says why.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held. After [Lease.Done] closes it
// returns an error wrapping ErrReleased, ErrConnectionSuspended,
// ErrSessionExpired or ErrClientClosed. A lease lost to a disconnect whose
// session then expires reports both ErrSessionExpired and
// ErrConnectionSuspended.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release ends the lease and deletes its node, retrying connection errors
// with backoff until ctx is done. The lease counts as ended (Done is closed)
// before the node is deleted, so it never outlives its node. If ctx ends
// before the node is deleted, the Client keeps deleting it in the
// background, while the session lasts.
//
// Release returns nil, or, if the lease had been lost already, an error
// wrapping the reason (its node is deleted all the same, if it still
// exists). A second call returns an error wrapping ErrReleased.
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
	l.c.forget(l)

	if lost != nil {
		if errors.Is(lost, ErrConnectionSuspended) && !errors.Is(lost, ErrSessionExpired) {
			l.c.discard([]string{l.node}, l.session)
		}
		return fmt.Errorf("zklock: release %s: lease was lost: %w", l.node, lost)
	}
	err := l.c.retry(ctx, func() error { return l.c.deleteNodes([]string{l.node}, l.session) })
	if err != nil {
		if isRetryable(err) || ctx.Err() != nil {
			l.c.discard([]string{l.node}, l.session)
			return nil
		}
		return fmt.Errorf("zklock: release %s: %w", l.node, err)
	}
	return nil
}

// lose ends a held lease with err. It reports whether the lease was live.
// It never blocks: the Client calls it from its event callback.
func (l *Lease) lose(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	close(l.done)
	return true
}

// expire records that the session of a lease lost to a disconnect has
// expired too.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.err, ErrConnectionSuspended) {
		l.err = fmt.Errorf("%w (%w first)", ErrSessionExpired, ErrConnectionSuspended)
	}
}
