package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// retry runs op until it succeeds, fails with an error that retrying cannot
// fix, or ctx is done. Connection loss and "no server" are retried with the
// Client's backoff (exponential with jitter by default); anything else is
// returned at once, unwrapped, so ZooKeeper's sentinel stays reachable. A
// closed Client yields ErrClientClosed. When ctx ends first, the result
// wraps ctx's error (and the last ZooKeeper error).
func (c *Client) retry(ctx context.Context, op func() error) error {
	var last error
	err := backoff.RetryNotify(func() error {
		if c.state().closed {
			return backoff.Permanent(ErrClientClosed)
		}
		err := op()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrClosing):
			return backoff.Permanent(ErrClientClosed)
		case isRetryable(err):
			last = err
			return err
		default:
			return backoff.Permanent(err)
		}
	}, backoff.WithContext(c.newBackOff(), ctx), func(err error, d time.Duration) {
		c.log.Warn("zklock: retrying", "err", err, "in", d)
	})
	if err != nil && ctx.Err() != nil && last != nil && errors.Is(err, ctx.Err()) {
		return errors.Join(err, last)
	}
	return err
}
