package zklock

import (
	"context"
	"errors"
	"time"
)

// releaseTimeout bounds the release in Do and Election.Lead once fn has
// returned.
const releaseTimeout = 30 * time.Second

// Do acquires l, runs fn with a context that is cancelled (with the lease's
// error as cause) if the lease is lost, then releases the lease. The
// context's Err checks the lease's deadline itself, as [Lease.Err] does: a
// process resumed from a pause past the deadline sees the loss at fn's first
// check of ctx.Err(), not only once a goroutine has caught up. It returns
// fn's error, joined with an error wrapping the reason if the lease was
// lost while fn ran, and with any release error. If Acquire fails, fn does
// not run and Do returns Acquire's error. If fn panics, Do releases the
// lease, and the panic goes on. fn reaches the lease, for its fencing token,
// with [LeaseFrom].
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) error {
	if l == nil || fn == nil {
		return opError("do", "", invalidf("nil locker or function"))
	}
	lease, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	ferr, rerr := runHeld(ctx, lease, fn)
	if ferr == nil {
		return rerr // an *OpError, or nil
	}
	return errors.Join(ferr, rerr)
}

// runHeld runs fn while lease is held, for Do and Election.Lead: fn's
// context is cancelled, with the lease's error as cause, once the lease
// ends. When fn returns, or panics, runHeld releases the lease with a
// context that keeps ctx's values but not its end (ctx may be why fn
// returned), bounded by releaseTimeout. It returns fn's error and
// Release's: nil, or an *OpError wrapping the loss if the lease was lost
// before it was released, or wrapping why its node could not be deleted.
// No Err is read after Release: that would say ErrReleased, not the loss.
func runHeld(ctx context.Context, lease *Lease, fn func(ctx context.Context) error) (ferr, rerr error) {
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
	// Deferred, so that a panicking fn leaves no lease behind (nor the
	// goroutine above) before the panic goes on.
	defer func() {
		cancel(nil)
		<-watched
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		rerr = lease.Release(rctx)
	}()
	return fn(leaseContext{fctx, lease, cancel}), nil
}

// LeaseFrom returns the lease under which fn runs, from the context that
// [Do] or [Election.Lead] gives fn (or one derived from it), or nil if ctx
// is not such a context: so that fn can hand [Lease.Token] to the resource
// it protects, or read [Lease.ValidUntil]. fn must not release the lease:
// Do and Lead do, when fn returns.
func LeaseFrom(ctx context.Context) *Lease {
	if ctx == nil {
		return nil
	}
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// leaseKey is the context key of LeaseFrom.
type leaseKey struct{}

// leaseContext is fn's context in Do: a cancel-cause context whose Err first
// asks the lease. It cancels itself before it reports the loss, so Done is
// closed whenever Err is non-nil, as the context contract wants.
type leaseContext struct {
	context.Context
	lease  *Lease
	cancel context.CancelCauseFunc
}

func (c leaseContext) Value(key any) any {
	if key == (leaseKey{}) {
		return c.lease
	}
	return c.Context.Value(key)
}

func (c leaseContext) Err() error {
	if err := c.lease.Err(); err != nil {
		c.cancel(err)
	}
	return c.Context.Err()
}
