package session

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

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
