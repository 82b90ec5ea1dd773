package session

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// The session's sentinels; the zklock package exports them under the same
// names, with their documentation.
var (
	ErrReleased            = errors.New("lease released")
	ErrSessionExpired      = errors.New("session expired")
	ErrConnectionSuspended = errors.New("connection suspended")
	ErrLeaseExpired        = errors.New("lease expired")
	ErrNodeDeleted         = errors.New("node deleted")
	ErrClientClosed        = errors.New("client closed")
)

// Outcome is what a ZooKeeper call's result means for its caller; only
// [Session.Classify] decides it, call sites choose what to do about it.
type Outcome int

const (
	Done    Outcome = iota // the call succeeded
	Gone                   // the node (or its parent) does not exist
	Closing                // the Session is closed or closing; nothing will succeed again
	// Retry: the call may succeed if tried again, perhaps in a new session:
	// the connection dropped, no server answered, the session moved to
	// another server or expired (the Session opens a new one by itself).
	// Whether a write took effect is unknown.
	Retry
	// Permanent: trying again cannot help (no auth, a bad ACL, a bad
	// version, anything ZooKeeper rejects for what was asked).
	Permanent
)

// classify says what a ZooKeeper call's err means, as far as the error
// alone can tell: whether Closing means the Session is closed or only that
// it replaced a connection is [Session.Classify]'s to say.
func classify(err error) Outcome {
	switch {
	case err == nil:
		return Done
	case errors.Is(err, zk.ErrNoNode):
		return Gone
	case errors.Is(err, zk.ErrClosing), errors.Is(err, ErrClientClosed):
		return Closing
	case errors.Is(err, zk.ErrConnectionClosed),
		errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionMoved),
		errors.Is(err, zk.ErrSessionExpired),
		isTransport(err):
		return Retry
	default:
		return Permanent
	}
}

// isTransport reports an error of the connection itself, which
// go-zookeeper returns as is, not as ErrConnectionClosed, when writing a
// request fails (a reset or closed socket): the connection is lost.
func isTransport(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // a net.Error too, but the caller's, not the connection's
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed)
}

// Retry runs op, each time on the connection current then, until it
// succeeds, fails with an error retrying cannot fix (returned at once,
// unwrapped, so ZooKeeper's sentinel stays reachable), or ctx is done (the
// result then wraps ctx's error and the last ZooKeeper error). What
// [classify] calls Retry is retried with the Session's backoff; a closed
// Session yields ErrClientClosed. op must be safe to repeat: whether a
// write whose reply was lost took effect is unknown.
func (c *Session) Retry(ctx context.Context, op func(Conn) error) error {
	var last error
	attempt := func() error {
		if c.State().Closed {
			return backoff.Permanent(ErrClientClosed)
		}
		err := op(c.Conn())
		switch c.Classify(err) {
		case Done:
			return nil
		case Closing:
			return backoff.Permanent(ErrClientClosed)
		case Retry:
			last = err
			return err
		}
		return backoff.Permanent(err)
	}
	// The first try, almost always the last, needs no backoff machinery.
	err := attempt()
	var perm *backoff.PermanentError
	if err == nil || errors.As(err, &perm) {
		return errors.Unwrap(err) // nil, or the permanent error itself
	}
	err = backoff.RetryNotify(attempt, backoff.WithContext(c.newBackOff(), ctx), func(err error, d time.Duration) {
		c.log.Warn("zklock: retrying", "err", err, "in", d)
	})
	if err != nil && ctx.Err() != nil && last != nil && errors.Is(err, ctx.Err()) {
		return errors.Join(err, last)
	}
	return err
}

// Sleep waits d (a second if d is backoff.Stop), or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	if !sleep(ctx.Done(), d) {
		return ctx.Err()
	}
	return nil
}

// sleep is [Sleep] with stop for ctx, reporting false once stop is closed.
func sleep(stop <-chan struct{}, d time.Duration) bool {
	if d == backoff.Stop {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
