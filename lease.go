package zklock

import (
	"context"
	"sync"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// Lease is one held position in a lock: a node of ours that the lock's
// driver says holds. It is safe for concurrent use.
//
// Holding is never guaranteed: a lease ends when it is released, and is lost
// when its deadline passes before the quorum confirmed the session again
// (ErrLeaseExpired; see [Lease.ValidUntil]), when the session expires
// (ErrSessionExpired; ErrSessionReplaced, which is also ErrSessionExpired,
// when a reconnect brought another session), when the Client is closed (ErrClientClosed), or, with
// [WithLossOnDisconnect], at the first disconnect (ErrConnectionSuspended).
// Watch [Lease.Done], or check [Lease.Err], and stop relying on the lock when
// it is lost; pass [Lease.Token] to the resources you protect so they can
// reject a stale holder.
type Lease struct {
	c     *Client
	h     *session.Hold // the session's side: nodes, deadline, end
	node  string
	token int64     // the token known at the grant (a shared read's sub-leases copy it)
	meta  leaseMeta // path and kind, for traces
	sub   *subLease // a lease on a shared read node (rwlock_shared.go); h is nil then

	mu      sync.Mutex
	revoked chan struct{} // made by the first Revoked call
}

// newLease wraps a hold the session granted.
func newLease(c *Client, h *session.Hold) *Lease {
	// token: known at the grant, except a handed-over lease's from a
	// server before 3.9, which Token reads through h when asked.
	return &Lease{c: c, h: h, node: h.Nodes()[0], token: h.KnownToken(), meta: h.Meta.(leaseMeta)}
}

// Node returns the full path of the lease's znode. A [MultiLock]'s lease
// has a node on each of its paths; Node returns the one on the first path.
func (l *Lease) Node() string { return l.node }

// Token returns the lease's fencing token, a ZooKeeper zxid: the lock
// path's pzxid (the zxid of its latest child create or delete) in the read
// of the queue that decided the lease holds, which the acquire makes
// anyway, so the token costs no request. A participant holds only on a
// read that no longer lists any conflicting node ahead of it, so tokens
// strictly increase across successive conflicting holders of a path (the
// proof is in docs/design.md, "Tokens"). The leases of one
// [Semaphore.AcquireN] share a token, and so do the leases on one shared
// read node ([WithSharedReads]); a [MultiLock]'s lease has the
// largest of its paths' tokens; a lease of [RWMutex.Downgrade] (and of
// kazoo's semaphore layout) has its node's czxid, which falls between the
// write lease's token and the next writer's.
//
// A token orders the holders of one path, and only while the ensemble
// keeps its history:
//   - Compare only tokens of one lock path: other paths' tokens say nothing
//     about this one's holders. A [MultiLock]'s token is above the tokens
//     of the earlier holders of each of its paths, and below the later ones'.
//   - Tokens go back when the ensemble is rebuilt with empty data (zxids
//     start again) or restored from a backup (they return to the backup's).
//     A fenced resource must then forget the tokens it has seen, or it
//     refuses every holder after it.
//   - Curator and kazoo holders of the same path have no token. A resource
//     fenced by these tokens must refuse writes that come without one, or
//     those holders write past the fencing.
//
// A lease that its predecessor handed off (a [Mutex]'s, a write lease's,
// an [Election] leader's: docs/design.md, "The handoff") has the zxid of
// the release that granted it, which ZooKeeper 3.9 sends with the grant.
// From a server before 3.9, which does not, the first lease of a lock
// whose token is asked for reads it on that call, while it is held (two
// reads, and a wait for their replies); a lease that has ended first has
// the token 0, which a fenced resource must refuse as it refuses a missing
// one. From then on that lock takes no part in the handoff while its
// queue is short (below 32 nodes): its waiters read the queue, which gives
// their tokens (one read: the cost every handoff had before). In a deeper
// queue it still hands off, and each handed-over lease reads the path's
// stat for its token as it is granted, instead of every node's name.
//
// Under [Do] and [Election.Lead], fn reaches its lease, and so its token,
// with [LeaseFrom]. The docs/semantics.md section "Fencing" says more.
func (l *Lease) Token() int64 {
	if t := l.meta.tokens; t != nil && !t.Load() {
		t.Store(true) // its lock's next handed-over leases read theirs at once
	}
	if l.h != nil {
		return l.h.Token()
	}
	return l.token
}

// Done returns a channel that is closed when the lease ends: released, or
// lost. [Lease.Err] says why, and says the same from then on.
func (l *Lease) Done() <-chan struct{} {
	if l.sub != nil {
		return l.sub.Done()
	}
	return l.h.Done()
}

// Err returns nil while the lease is held. Once the lease has ended it
// returns the one reason, an error wrapping ErrReleased, ErrLeaseExpired
// (also ErrNodeDeleted, if someone deleted its node), ErrSessionExpired
// (also ErrSessionReplaced, if a reconnect brought another session),
// ErrClientClosed or ErrConnectionSuspended, and never changes again (a
// lease lost to a disconnect reports ErrConnectionSuspended even if its
// session expires later). Like ctx.Err(), it is the bare cause, without
// the "zklock: " prefix of the errors the library's calls return.
//
// Err compares the clock with the deadline itself ([Lease.ValidUntil]): a
// process that was paused past the deadline sees ErrLeaseExpired on its
// first call, before any event or goroutine has told it; Done is closed by
// then too.
func (l *Lease) Err() error {
	if l.sub != nil {
		return l.sub.Err()
	}
	return l.h.Err()
}

// ValidUntil returns the lease's deadline: the time before which no
// ZooKeeper leader can have expired its session, by what the quorum has
// confirmed (the derivation is in docs/design.md, "The lease deadline"). It
// moves forward while the Client's keeper has the session confirmed, at
// least every third of the session timeout; once it passes, [Lease.Err] is
// non-nil on its very next call. Work that the lock protects and that its
// resource cannot fence with [Lease.Token] should finish before it. After
// the lease has ended it returns the deadline the lease had then, or the
// time it ended, whichever came first.
func (l *Lease) ValidUntil() time.Time {
	if l.sub != nil {
		return l.sub.ValidUntil()
	}
	return l.h.ValidUntil()
}

// Release ends the lease and deletes its node, retrying connection errors
// with backoff until ctx is done. The lease counts as ended (Done is closed)
// before the node is deleted, so it never outlives its node. If ctx ends
// before the node is deleted, the Client's janitor keeps deleting it in the
// background, while the session lasts. A [MultiLock]'s lease deletes its
// nodes on every path, in one multi-operation when it can. A lease on a
// shared read node ([WithSharedReads]) ends alone, with no request; the
// last one on the node deletes it.
//
// Release returns nil; or, if the lease had been lost already, an error
// wrapping the reason (the janitor deletes its node, if the session still
// has it); or, if a node cannot be deleted for good (the path's ACL no
// longer lets this Client delete, say), an error naming that node and
// wrapping ZooKeeper's (zk.ErrNoAuth): every other node of the lease is
// deleted all the same, and that one stays until the session ends. A
// second call returns an error wrapping ErrReleased.
func (l *Lease) Release(ctx context.Context) error {
	release := l.releaseHold
	if l.sub != nil {
		release = l.sub.Release
	}
	if err := release(ctx); err != nil {
		return nodeError("release", l.meta.path, l.node, err)
	}
	return nil
}

func (l *Lease) releaseHold(ctx context.Context) error { return l.h.Release(ctx) }
