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

// Outcome is what the result of a ZooKeeper call means for its caller.
// [Session.Classify] is the one place that decides it; call sites only
// choose what to do about each outcome.
type Outcome int

const (
	Done    Outcome = iota // the call succeeded
	Gone                   // the node (or its parent) does not exist
	Closing                // the Session is closed or closing; nothing will succeed again
	// Retry: the call may succeed if tried again, perhaps in a new session:
	// the connection dropped, no server answered, the session moved to
	// another server, or it expired (the Session opens a new one by
	// itself). Whether the call took effect is unknown for a write.
	Retry
	// Permanent: trying again cannot help (no auth, a bad ACL, a bad
	// version, anything ZooKeeper rejects for what was asked).
	Permanent
)

// classify says what err, returned by a ZooKeeper call, means, as far as
// the error alone can tell. Whether Closing means the Session is closed or
// only that it closed a connection to replace it is the Session's to say:
// call sites use [Session.Classify].
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

// Retry runs op on the Session's connection until it succeeds, fails with an
// error that retrying cannot fix, or ctx is done. What [classify] calls
// retry (connection loss, no server, an expired session, which the Session
// replaces by itself) is retried with the Session's backoff, each time on the
// connection current then; anything else is returned at once, unwrapped, so
// ZooKeeper's sentinel stays reachable. A closed Session yields
// ErrClientClosed. When ctx ends first, the result wraps ctx's error (and
// the last ZooKeeper error).
//
// op must be safe to repeat: retry cannot know whether a write whose reply
// was lost took effect.
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
	// The first try needs none of the backoff's machinery, and is almost
	// always the last.
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

// sleep waits d (a second if d is backoff.Stop) and reports true, or
// reports false as soon as stop is closed.
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
