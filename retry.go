package zklock

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retries. Every ZooKeeper call of the library goes through one retry
// loop, the session's (internal/session: Session.Retry), and one table of
// errors (Session.Classify): connection loss, no server, a moved or
// expired session and a connection the Client closed to replace it are
// retried, each time on the connection current then, with the backoff
// chosen here; anything else is returned at once, unwrapped, so
// ZooKeeper's sentinels stay reachable. The acquire loop backs off with
// the same policy. Retries are always bounded by the caller's context.

// WithRetry sets the backoff used to retry ZooKeeper errors that may go away
// (connection loss, no server). Each retried operation gets a fresh BackOff
// from newBackOff; the retries are always bounded by the caller's context.
// Default: exponential, 50ms doubling to at most 2s, with ±50% jitter, no
// time limit of its own. A nil function makes [Connect] fail with
// ErrInvalidArgument.
func WithRetry(newBackOff func() backoff.BackOff) Option {
	return func(o *clientOptions) error {
		if newBackOff == nil {
			return invalidf("nil backoff")
		}
		o.newBackOff = newBackOff
		return nil
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 2 * time.Second
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	return b
}
