package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-zookeeper/zk"
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
	ErrReleased = errors.New("lease released")

	// ErrSessionExpired reports that the ZooKeeper session ended while the
	// lease was held: the server has deleted its node, and someone else may
	// hold the lock now.
	ErrSessionExpired = errors.New("session expired")

	// ErrConnectionSuspended reports that the connection to ZooKeeper was
	// lost while the lease was held, on a Client made with
	// [WithLossOnDisconnect]: the lease counts as lost at once.
	ErrConnectionSuspended = errors.New("connection suspended")

	// ErrLeaseExpired reports that the lease's deadline passed before the
	// quorum confirmed the session again (see [Lease.ValidUntil]): the
	// server may have expired the session, and someone else may hold the
	// lock now. Also the error of a lease whose node someone deleted.
	ErrLeaseExpired = errors.New("lease expired")

	// ErrClientClosed reports that the [Client] was closed.
	ErrClientClosed = errors.New("client closed")

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
	ErrNodeDeleted = errors.New("node deleted")

	// ErrNoLeader is returned by [Election.Leader] when there is no
	// candidate, so nobody leads.
	ErrNoLeader = errors.New("no leader")
)

// invalidf returns an error wrapping ErrInvalidArgument.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// outcome is what the result of a ZooKeeper call means for its caller.
// [classify] is the one place that decides it; call sites only choose what
// to do about each outcome.
type outcome int

const (
	// done: the call succeeded.
	done outcome = iota
	// gone: the node (or its parent) does not exist.
	gone
	// closing: the Client is closed or closing; nothing will succeed again.
	closing
	// retry: the call may succeed if tried again, perhaps in a new session:
	// the connection dropped, no server answered, the session moved to
	// another server, or it expired (the Client opens a new one by itself).
	// Whether the call took effect is unknown for a write.
	retry
	// permanent: trying again cannot help (no auth, a bad ACL, a bad
	// version, anything ZooKeeper rejects for what was asked).
	permanent
)

// classify says what err, returned by a ZooKeeper call, means.
func classify(err error) outcome {
	switch {
	case err == nil:
		return done
	case errors.Is(err, zk.ErrNoNode):
		return gone
	case errors.Is(err, zk.ErrClosing), errors.Is(err, ErrClientClosed):
		return closing
	case errors.Is(err, zk.ErrConnectionClosed),
		errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionMoved),
		errors.Is(err, zk.ErrSessionExpired),
		isTransport(err):
		return retry
	default:
		return permanent
	}
}

// isTransport reports an error of the connection itself. go-zookeeper
// returns it as is, not as ErrConnectionClosed, when writing a request
// fails (a reset or closed socket): the connection is lost all the same.
func isTransport(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // a net.Error too, but the caller's, not the connection's
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed)
}
