package zklock

import (
	"context"
	"errors"
	"strings"
)

// RWMutex is a distributed reader/writer lock on a ZooKeeper path,
// compatible with Apache Curator's InterProcessReadWriteLock on the same
// path (nodes `_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>`).
//
// Any number of readers hold together; a writer holds alone. Order is
// first-come-first-served: a queued writer blocks the readers that arrive
// after it, so writers never starve, and a reader is never blocked by a
// writer that queued after it. Neither side is reentrant. A write lease can
// be downgraded to a read lease ([RWMutex.Downgrade]); a read lease cannot
// be upgraded.
//
// An RWMutex is safe for concurrent use. The zero value is not usable: use
// [NewRWMutex].
type RWMutex struct {
	read, write *Lock
	shared      *sharedReads // WithSharedReads: the read side (rwlock_shared.go)
}

// NewRWMutex returns a reader/writer lock on path. It validates its
// arguments (errors wrap ErrInvalidArgument) and makes no ZooKeeper call.
func NewRWMutex(c *Client, path string, opts ...LockOption) (*RWMutex, error) {
	cfg, o, err := newLockConfig(c, path, adapt(readDriver{}), opts)
	if err == nil {
		err = o.only(false, true)
	}
	if err != nil {
		return nil, opError("new rwmutex", path, err)
	}
	rw := &RWMutex{read: cfg.build(), write: cfg.on(path, adapt(exclusiveDriver{KindWrite})).build()}
	if o.shared {
		rw.shared = newSharedReads(cfg)
	}
	return rw, nil
}

// ReadLock returns the read side: a lease held alongside other readers, as
// long as no writer queued ahead of it. With [WithSharedReads], the
// goroutines reading through rw share one node.
func (rw *RWMutex) ReadLock() Locker {
	if rw.shared != nil {
		return rw.shared
	}
	return rw.read
}

// WriteLock returns the write side: a lease held alone.
func (rw *RWMutex) WriteLock() Locker { return rw.write }

// Participants lists the holders first, then the waiters in queue order,
// with their node data and side.
func (rw *RWMutex) Participants(ctx context.Context) ([]Participant, error) {
	return rw.read.participants(ctx, func(k Child) policy {
		if k.Kind == KindRead {
			return rw.read.pol
		}
		return rw.write.pol
	})
}

// Downgrade turns write, a held write lease of rw, into a read lease,
// without letting a writer in between: it creates the read node at the
// writer's own place in the queue, then releases the write lease. It
// returns the read lease, which holds at once.
//
// The read node is a plain ephemeral node named `_c_<uuid>-__READ__<seq>`,
// where <seq> is the write node's sequence: the format Apache Curator 5.5
// uses to downgrade (CURATOR-621), so Curator sees a reader where the
// writer was. Why no writer gets in: the read node is created while the
// write lease holds, in the same session, so no other writer holds then;
// every writer queued behind the write node has a greater sequence, so it
// is behind the read node too, and waits for it; readers queued behind
// the writer hold together with it once the write node goes. So the engine
// does not ask a driver: it only reads the node back (its owner must be
// the write lease's session, its czxid is the token).
//
// write must be a live write lease of rw (otherwise ErrInvalidArgument, or
// the lease's own error if it was lost). Upgrade does not exist: passing a
// read lease fails with ErrInvalidArgument, since a reader that waits for
// a write lease waits behind itself. If ctx ends first, or the session
// changes, the read node is deleted and the write lease is left as it was.
func (rw *RWMutex) Downgrade(ctx context.Context, write *Lease) (*Lease, error) {
	path := rw.write.path
	fail := func(err error) (*Lease, error) {
		return nil, opError("downgrade", path, err)
	}
	if ctx == nil {
		return fail(invalidf("nil context"))
	}
	if write == nil {
		return fail(invalidf("nil lease"))
	}
	ch, ok, _ := parseChild(strings.TrimPrefix(write.node, path+"/"))
	switch {
	case !strings.HasPrefix(write.node, path+"/") || !ok || write.c != rw.write.c:
		return fail(invalidf("lease %s is not a lease of this lock", write.node))
	case ch.Kind == KindRead:
		return fail(invalidf("lease %s is a read lease: a read lease cannot be upgraded; release it and acquire the write lock", write.node))
	case ch.Kind != KindWrite:
		return fail(invalidf("lease %s is not a write lease", write.node))
	}
	if err := write.Err(); err != nil {
		return fail(err)
	}
	c := rw.write.c
	// The read node will sort ahead of the write node at its place: the
	// write lease's release must not tell its successor that it holds
	// (handoff.go), before that node exists.
	write.h.NoHandOff()
	seq := write.node[strings.LastIndex(write.node, lockNameWrite)+len(lockNameWrite):]
	id, err := newID()
	if err != nil {
		return fail(err)
	}
	cl := placeClaim{l: rw.read, node: path + "/" + nodePrefix(id, KindRead) + seq, id: id, guard: write.node, sid: write.h.Session()}
	leases, err := newParticipant(c, path, cl).acquire(ctx, "downgrade")
	if err != nil {
		if werr := write.Err(); werr != nil && errors.Is(err, errGuardGone) {
			// Lost meanwhile, and its node deleted since (the janitor's,
			// after a disconnect or the deadline): its loss says why.
			return fail(werr)
		}
		return nil, err
	}
	if err := write.Release(ctx); err != nil {
		c.s.Log().Debug("zklock: downgrade: release the write lease", "node", write.node, "err", err)
	}
	return leases[0], nil
}
