package zklock

import (
	"context"
	"fmt"
)

// RWMutex is a distributed reader/writer lock on a ZooKeeper path,
// compatible with Apache Curator's InterProcessReadWriteLock on the same
// path (nodes `_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>`).
//
// Any number of readers hold together; a writer holds alone. Order is
// first-come-first-served: a queued writer blocks the readers that arrive
// after it, so writers never starve, and a reader is never blocked by a
// writer that queued after it. Neither side is reentrant, and a lease cannot
// be upgraded or downgraded.
//
// An RWMutex is safe for concurrent use. The zero value is not usable: use
// [NewRWMutex].
type RWMutex struct {
	read, write *Lock
}

// NewRWMutex returns a reader/writer lock on path. It validates its
// arguments (errors wrap ErrInvalidArgument) and makes no ZooKeeper call.
func NewRWMutex(c *Client, path string, opts ...LockOption) (*RWMutex, error) {
	r, err := newLock(c, path, readDriver{}, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: new rwmutex: %w", err)
	}
	w := *r
	w.driver = exclusiveDriver{KindWrite}
	return &RWMutex{read: r, write: &w}, nil
}

// ReadLock returns the read side: a lease held alongside other readers, as
// long as no writer queued ahead of it.
func (rw *RWMutex) ReadLock() Locker { return rw.read }

// WriteLock returns the write side: a lease held alone.
func (rw *RWMutex) WriteLock() Locker { return rw.write }

// Participants lists the holders first, then the waiters in queue order,
// with their node data and side.
func (rw *RWMutex) Participants(ctx context.Context) ([]Participant, error) {
	return rw.read.participants(ctx, func(k Child) Driver {
		if k.Kind == KindRead {
			return readDriver{}
		}
		return rw.write.driver
	})
}
