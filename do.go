package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// releaseTimeout bounds the release in Do once fn has returned.
const releaseTimeout = 30 * time.Second

// Do acquires l, runs fn with a context that is cancelled (with the lease's
// error as cause) if the lease is lost, then releases the lease. It returns
// fn's error, joined with an error wrapping the reason if the lease was
// lost while fn ran, and with any release error. If Acquire fails, fn does
// not run and Do returns Acquire's error.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) error {
	if l == nil || fn == nil {
		return fmt.Errorf("zklock: do: %w", invalidf("nil locker or function"))
	}
	lease, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Done():
			cancel(lease.Err())
		case <-fctx.Done():
		}
	}()
	ferr := fn(fctx)
	cancel(nil)
	<-watched

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	return errors.Join(ferr, lease.Release(rctx))
}
