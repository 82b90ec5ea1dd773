package zklock

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zklock/internal/session"
)

// Sentinel errors. Match them with [errors.Is]: every error zklock returns
// wraps one of these, a context error, or a ZooKeeper error from
// github.com/go-zookeeper/zk, under one prefix that says what and where:
// "zklock: acquire /locks/a: locked".
var (
	// ErrInvalidArgument reports bad input (a malformed path, maxLeases < 1,
	// n out of range, a nil client, no servers...). It is returned before any
	// ZooKeeper call is made.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrLocked is returned by TryAcquire when the lock is held by others, or
	// no lease is free.
	ErrLocked = errors.New("locked")

	// ErrReleased is the error of a lease that was released, and the error of
	// a second [Lease.Release].
	ErrReleased = session.ErrReleased

	// ErrSessionExpired reports that the ZooKeeper session ended while the
	// lease was held: the server has deleted its node, and someone else may
	// hold the lock now.
	ErrSessionExpired = session.ErrSessionExpired

	// ErrConnectionSuspended reports that the connection to ZooKeeper was
	// lost while the lease was held, on a Client made with
	// [WithLossOnDisconnect]: the lease counts as lost at once.
	ErrConnectionSuspended = session.ErrConnectionSuspended

	// ErrLeaseExpired reports that the lease's deadline passed before the
	// quorum confirmed the session again (see [Lease.ValidUntil]): the
	// server may have expired the session, and someone else may hold the
	// lock now. Also the error of a lease whose node someone deleted.
	ErrLeaseExpired = session.ErrLeaseExpired

	// ErrClientClosed reports that the [Client] was closed.
	ErrClientClosed = session.ErrClientClosed

	// ErrUnknownNode is returned by an acquire that finds, under its lock
	// path, a child whose name is not a lock node of a format zklock
	// understands (zklock, Apache Curator or kazoo). zklock cannot tell where
	// such a node stands in the queue, so it refuses rather than risk two
	// holders. See the README's section on mixed fleets.
	ErrUnknownNode = errors.New("unknown node under lock path")

	// ErrNodeDeleted is the cause of a lease whose node someone else
	// deleted (an operator, a revocation by force, a bug): another
	// participant may hold the lock already. The lease's error also wraps
	// ErrLeaseExpired, as it did before this sentinel existed.
	ErrNodeDeleted = session.ErrNodeDeleted

	// ErrNoLeader is returned by [Election.Leader] when there is no
	// candidate, so nobody leads.
	ErrNoLeader = errors.New("no leader")
)

// invalidf returns an error wrapping ErrInvalidArgument.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
