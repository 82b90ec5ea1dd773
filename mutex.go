package zklock

import (
	"context"
)

// Locker is what [Mutex], each side of [RWMutex], [Semaphore] and [Lock]
// have in common.
type Locker interface {
	// Acquire waits until the lock is held, or ctx is done.
	Acquire(ctx context.Context) (*Lease, error)
	// TryAcquire never waits for others: ErrLocked if it would.
	TryAcquire(ctx context.Context) (*Lease, error)
}

// Mutex is a distributed mutual-exclusion lock on a ZooKeeper path,
// compatible with Apache Curator's InterProcessMutex on the same path
// (nodes `_c_<uuid>-lock-<seq>`).
//
// At most one [Lease] holds it at a time, in first-come-first-served order
// of Acquire calls across all processes. Holding is not tied to a goroutine:
// any goroutine may release a lease. The lock is not reentrant: each Acquire
// is a new participant, and a second Acquire by the holder waits for its
// own first lease (a deadlock if the holder then waits for the second).
//
// A Mutex is safe for concurrent use and holds no state of its own beyond
// its path; copying one is harmless. The zero value is not usable: use
// [NewMutex].
type Mutex struct{ lock *Lock }

// NewMutex returns a mutex on path. It validates its arguments (errors wrap
// ErrInvalidArgument) and makes no ZooKeeper call.
func NewMutex(c *Client, path string, opts ...LockOption) (*Mutex, error) {
	l, err := newLock(c, path, exclusiveDriver{KindMutex}, opts)
	if err != nil {
		return nil, opError("new mutex", path, err)
	}
	return &Mutex{l}, nil
}

// Acquire waits until the mutex is held; see [Lock.Acquire].
func (m *Mutex) Acquire(ctx context.Context) (*Lease, error) { return m.lock.Acquire(ctx) }

// TryAcquire takes the mutex if it is free, without waiting for the holder;
// otherwise it returns an error wrapping ErrLocked and leaves no node
// behind. See [Lock.TryAcquire].
func (m *Mutex) TryAcquire(ctx context.Context) (*Lease, error) { return m.lock.TryAcquire(ctx) }

// Participants lists the holder first, then the waiters in queue order,
// with their node data. Nodes of other libraries (Curator, kazoo) are
// included.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	return m.lock.Participants(ctx)
}
