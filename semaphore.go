package zklock

import (
	"context"
	"fmt"
	"strconv"
)

// Semaphore is a distributed counting semaphore on a ZooKeeper path: at
// most maxLeases leases are held at once, granted in first-come-first-served
// order. A release always wakes the first waiter, and only it.
//
// Its layout (nodes `_c_<uuid>-lease-<seq>` directly under the path) is
// zklock's own: Apache Curator's InterProcessSemaphoreV2 and kazoo's
// Semaphore use other layouts and do not interoperate with it. Finding
// theirs on its path (Curator's "locks" and "leases" children, kazoo's
// 32-hex-digit lease nodes), Acquire fails with ErrUnknownNode rather than
// grant leases it cannot count.
//
// maxLeases is recorded in the path's data ("3", as kazoo's Semaphore does)
// by whoever creates the path, and checked by every Acquire: a participant
// configured with another size fails with ErrInvalidArgument and leaves no
// node, instead of granting more leases than the others allow. The path is a
// container node all the same, deleted once it has no children; the next
// participant records its size again. A Semaphore is safe for concurrent
// use. The zero value is not usable: use [NewSemaphore].
type Semaphore struct {
	lock *Lock
	max  int
}

// NewSemaphore returns a semaphore of maxLeases leases on path. It validates
// its arguments (maxLeases < 1 and the rest wrap ErrInvalidArgument) and
// makes no ZooKeeper call.
func NewSemaphore(c *Client, path string, maxLeases int, opts ...LockOption) (*Semaphore, error) {
	if maxLeases < 1 {
		return nil, fmt.Errorf("zklock: new semaphore: %w", invalidf("maxLeases %d is less than 1", maxLeases))
	}
	l, err := newLock(c, path, semaphoreDriver{maxLeases}, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: new semaphore: %w", err)
	}
	l.refuse = foreignSemaphore
	l.size = []byte(strconv.Itoa(maxLeases))
	return &Semaphore{lock: l, max: maxLeases}, nil
}

// Acquire waits for one lease; see [Lock.Acquire].
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) { return s.lock.Acquire(ctx) }

// TryAcquire takes a lease if one is free and nobody is queued ahead;
// otherwise it returns an error wrapping ErrLocked and leaves no node
// behind.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) { return s.lock.TryAcquire(ctx) }

// AcquireN waits for n leases at once: all n, or none. The n nodes are
// created in one multi-operation and queue together, so the caller never
// holds part of its request while it waits for the rest (two callers each
// holding half of what they need can never deadlock). On failure, as with
// Acquire, none of the n nodes is left behind. n < 1 or n > maxLeases fails
// with ErrInvalidArgument before any ZooKeeper call. The leases share one
// token and are released one by one.
func (s *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	if n < 1 || n > s.max {
		return nil, fmt.Errorf("zklock: acquire %d of %s: %w", n, s.lock.path, invalidf("n %d is out of range [1, %d]", n, s.max))
	}
	return s.lock.acquire(ctx, "acquire "+strconv.Itoa(n)+" of", n, false)
}

// TryAcquireN takes n leases at once if they are free and nobody is queued
// ahead, without waiting for anyone; otherwise it returns an error wrapping
// ErrLocked and leaves none of the n nodes behind. Arguments as for
// [Semaphore.AcquireN].
func (s *Semaphore) TryAcquireN(ctx context.Context, n int) ([]*Lease, error) {
	if n < 1 || n > s.max {
		return nil, fmt.Errorf("zklock: try acquire %d of %s: %w", n, s.lock.path, invalidf("n %d is out of range [1, %d]", n, s.max))
	}
	return s.lock.acquire(ctx, "try acquire "+strconv.Itoa(n)+" of", n, true)
}

// Participants lists the holders first, then the waiters in queue order,
// with their node data.
func (s *Semaphore) Participants(ctx context.Context) ([]Participant, error) {
	return s.lock.Participants(ctx)
}
