package zklock

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zklock/internal/session"
)

// Sentinel errors. Match them with [errors.Is]: every error zklock's calls
// return is an [*OpError] whose cause wraps one of these, a context error,
// or a ZooKeeper error from github.com/go-zookeeper/zk.
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

	// ErrSessionReplaced reports that a reconnect gave the [Client]
	// another session than the one it had (servers such as ClickHouse
	// Keeper do this; ZooKeeper itself never does): every lease and wait of
	// the old session ends at once with it, the Client deletes the old
	// session's nodes it can, and goes on with the new session.
	// errors.Is(err, ErrSessionExpired) holds too. See docs/semantics.md,
	// "A session replaced on reconnect".
	ErrSessionReplaced = session.ErrSessionReplaced

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
	// holders. See docs/interop.md, "In brief".
	ErrUnknownNode = errors.New("unknown node under lock path")

	// ErrNodeDeleted is the cause of a lease whose node someone else
	// deleted (an operator, a revocation by force, a bug): another
	// participant may hold the lock already. The lease's error also wraps
	// ErrLeaseExpired, as it did before this sentinel existed.
	ErrNodeDeleted = session.ErrNodeDeleted

	// ErrNoLeader is returned by [Election.Leader] when there is no
	// candidate, so nobody leads.
	ErrNoLeader = errors.New("no leader")

	// ErrSizeMismatch is returned by an acquire of a [Semaphore] whose
	// path records a size it cannot take part with: under [LayoutKazoo],
	// whose participants all have the one size recorded in the path's
	// data (kazoo's Semaphore refuses another the same way). The error
	// names both sizes. Nothing is created. zklock's own layout never
	// returns it: replicas of different sizes share its path
	// (docs/semantics.md, "Resizing a semaphore").
	ErrSizeMismatch = errors.New("semaphore size mismatch")
)

// OpError is the error of every exported call of package zklock that
// fails: what was being done, on which lock path, and why. The cause (Err)
// is a sentinel above, a context's error or a ZooKeeper error from
// github.com/go-zookeeper/zk, possibly wrapped with more detail; match it
// with [errors.Is], and reach the OpError itself with [errors.As]:
//
//	var oe *zklock.OpError
//	if errors.As(err, &oe) && errors.Is(oe, zklock.ErrLocked) {
//		log.Printf("%s is busy", oe.Path)
//	}
//
// Like [os.PathError], it writes the one "zklock: <op> <path>: " prefix,
// so an error reads "zklock: try acquire /locks/a: locked".
type OpError struct {
	Op   string // "connect", "acquire", "release", "downgrade", "participants", "new mutex", ...
	Path string // the lock path (a MultiLock's, comma-separated); "" where none
	Node string // the znode concerned; "" where none
	Err  error  // the cause
}

// Error returns "zklock: <op> <path>: <cause>". The node, when set, is
// named by the cause's own words ("delete /a/_c_…-lock-0000000001: …"),
// not repeated by the prefix.
func (e *OpError) Error() string {
	s := "zklock: " + e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// opError returns err as the *OpError of op on path (nil if err is nil).
// An *OpError from a call made on the way (a Semaphore's inner lock, a
// Do's acquire) is returned as it is: its prefix already says what failed
// and where.
func opError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	if oe, ok := err.(*OpError); ok {
		return oe
	}
	return &OpError{Op: op, Path: path, Err: err}
}

// nodeError is opError for a call on one node of path.
func nodeError(op, path, node string, err error) error {
	if err == nil {
		return nil
	}
	if oe, ok := err.(*OpError); ok {
		return oe
	}
	return &OpError{Op: op, Path: path, Node: node, Err: err}
}

// causeOf returns the cause of an *OpError, to be wrapped in another
// *OpError without saying "zklock: " twice; any other error as it is.
func causeOf(err error) error {
	if oe, ok := err.(*OpError); ok {
		return oe.Err
	}
	return err
}

// invalidf returns an error wrapping ErrInvalidArgument.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
