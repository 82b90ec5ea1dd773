package zklock

import (
	"context"
	"strings"
)

// MultiLock holds exclusive locks on several paths at once, all or nothing,
// and cannot deadlock whatever order callers list the paths in. It is the
// counterpart of Apache Curator's InterProcessMultiLock, which takes its
// locks one after another: it holds some while it waits for the rest, so
// two callers that list the same paths in different orders can deadlock,
// and its timeout applies to each lock in turn.
//
// Each Acquire creates, in one multi-operation, one node on every path:
// `_c_<uuid>-lock-<seq>`, with one uuid, the exclusive node of a [Mutex] and
// of Curator's InterProcessMutex. On each path it is one participant among
// the others, so it excludes [Mutex] holders, both sides of an [RWMutex]
// (a reader counts every node that is not a reader as a writer), other
// MultiLocks, and Curator's and kazoo's locks, and they exclude it. Acquire
// returns when its node holds on every path, and the one [Lease] covers
// them all: Release deletes every node, in one multi-operation.
//
// While it waits, a MultiLock holds nothing (no lease, and no guarantee on
// any path), but it is queued on every path at once, first come, first
// served: on a path where it has reached the front, participants that came
// after it wait for it, as they would for any waiter ahead of them. It
// never makes anyone wait who came before it.
//
// Why it cannot deadlock: every participant, on every path, waits only for
// nodes created before its own, and ZooKeeper creates all the nodes of one
// MultiLock in one transaction, so creation order is one total order across
// all paths and a cycle of waits would have to go back in it. The proof, and
// the ZooKeeper behaviour it relies on, is in docs/design.md ("MultiLock");
// the engine's one multi-operation create ([queueClaim.create]) is what
// it rests on. It covers participants that wait for one acquire at a time: MultiLocks, and
// ordinary locks on one path. A holder that acquires another lock while it
// holds (Curator's InterProcessMultiLock does, and so does nesting two
// Mutex acquires) waits with a node created earlier than the one it waits
// behind, and can deadlock against anyone, a MultiLock too.
//
// A MultiLock is safe for concurrent use; each Acquire is an independent
// participant. The zero value is not usable: use [NewMultiLock].
type MultiLock struct {
	c     *Client
	paths []string
	locks []*Lock // a mutex's engine on each path, in the order of paths
}

// NewMultiLock returns a lock on every one of paths. The order of paths
// does not matter for safety or liveness; the lease's [Lease.Node] is the
// node on paths[0]. It validates its arguments and makes no ZooKeeper
// call: a nil client, no paths, a bad path, a path listed twice, a path
// inside another path of the set, or node data that would make the one
// multi-operation exceed 512 KiB in all ([WithNodeData] on each path) fail
// with an error wrapping ErrInvalidArgument.
func NewMultiLock(c *Client, paths []string, opts ...LockOption) (*MultiLock, error) {
	m, err := newMultiLock(c, paths, opts)
	if err != nil {
		return nil, opError("new multilock", strings.Join(paths, ","), err)
	}
	return m, nil
}

func newMultiLock(c *Client, paths []string, opts []LockOption) (*MultiLock, error) {
	if c == nil {
		return nil, invalidf("nil client")
	}
	if len(paths) == 0 {
		return nil, invalidf("no paths")
	}
	m := &MultiLock{c: c, paths: append([]string(nil), paths...), locks: make([]*Lock, len(paths))}
	for i, p := range m.paths {
		l, err := newLock(c, p, exclusiveDriver{KindMutex}, opts)
		if err != nil {
			return nil, err
		}
		for _, q := range m.paths[:i] {
			switch {
			case q == p:
				return nil, invalidf("lock path %q is listed twice", p)
			case strings.HasPrefix(p, q+"/"):
				return nil, invalidf("lock path %q is inside lock path %q", p, q)
			case strings.HasPrefix(q, p+"/"):
				return nil, invalidf("lock path %q is inside lock path %q", q, p)
			}
		}
		m.locks[i] = l
	}
	if all := len(m.locks[0].data) * len(paths); all > maxNodeData {
		return nil, invalidf("node data of %d bytes on each of %d paths, %d in all, exceeds %d",
			len(m.locks[0].data), len(paths), all, maxNodeData)
	}
	return m, nil
}

// Paths returns the lock's paths, in the order NewMultiLock was given them.
func (m *MultiLock) Paths() []string { return append([]string(nil), m.paths...) }

// Acquire waits until the lock is held on every path and returns the one
// lease that covers them all, or returns when ctx is done with an error for
// which errors.Is(err, ctx.Err()) holds: ctx bounds the whole wait, not each
// path's. A done ctx returns at once. On failure no node is left on any
// path: they are deleted by a cleanup that does not depend on ctx, retried
// until it succeeds or the session ends. If the session expires while
// waiting, or one of our nodes is deleted by someone else, the participant
// queues again (at the back, on every path) while ctx allows. Errors wrap
// ErrClientClosed, ErrUnknownNode or ZooKeeper's own.
func (m *MultiLock) Acquire(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "acquire", false)
}

// TryAcquire takes the lock if it holds at once on every path, without
// waiting for anyone, and otherwise returns an error wrapping ErrLocked. It
// leaves no node on any path when it fails. It still waits for ZooKeeper
// itself (bounded by ctx).
func (m *MultiLock) TryAcquire(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try acquire", true)
}

func (m *MultiLock) acquire(ctx context.Context, op string, try bool) (*Lease, error) {
	p := newQueueParticipant(m.c, strings.Join(m.paths, ","), m.locks, 1)
	p.try, p.whole = try, true
	leases, err := p.acquire(ctx, op)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}
