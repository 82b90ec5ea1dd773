package zklock

import (
	"context"
	"errors"
	"time"
)

// releaseTimeout bounds the release in Do once fn has returned.
const releaseTimeout = 30 * time.Second

// Do acquires l, runs fn with a context that is cancelled (with the lease's
// error as cause) if the lease is lost, then releases the lease. The
// context's Err checks the lease's deadline itself, as [Lease.Err] does: a
// process resumed from a pause past the deadline sees the loss at fn's first
// check of ctx.Err(), not only once a goroutine has caught up. It returns
// fn's error, joined with an error wrapping the reason if the lease was
// lost while fn ran, and with any release error. If Acquire fails, fn does
// not run and Do returns Acquire's error.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) error {
	if l == nil || fn == nil {
		return opError("do", "", invalidf("nil locker or function"))
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
	ferr := fn(leaseContext{fctx, lease, cancel})
	cancel(nil)
	<-watched

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	rerr := lease.Release(rctx)
	if ferr == nil {
		return rerr // an *OpError, or nil
	}
	return errors.Join(ferr, rerr)
}

// leaseContext is fn's context in Do: a cancel-cause context whose Err first
// asks the lease. It cancels itself before it reports the loss, so Done is
// closed whenever Err is non-nil, as the context contract wants.
type leaseContext struct {
	context.Context
	lease  *Lease
	cancel context.CancelCauseFunc
}

func (c leaseContext) Err() error {
	if err := c.lease.Err(); err != nil {
		c.cancel(err)
	}
	return c.Context.Err()
}
