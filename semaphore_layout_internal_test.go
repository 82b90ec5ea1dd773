package zklock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// endable is an inner lease that a test ends.
type endable struct {
	done chan struct{}
	err  error
}

func (e *endable) Done() <-chan struct{} { return e.done }
func (e *endable) Err() error {
	select {
	case <-e.done:
		return e.err
	default:
		return nil
	}
}

// underInner: a wait that fails because the inner lock ended starts again
// (errInnerLost), unless the caller's ctx has ended since: then the
// caller hears its own ctx's error, not the Canceled of the inner lock's
// end. A failure with the inner lock held is returned as it is.
func TestUnderInnerSaysWhyItEnded(t *testing.T) {
	lost := errors.New("inner lost")
	other := errors.New("refused")
	for _, tc := range []struct {
		name      string
		loseInner bool
		endCaller bool // the caller's deadline passes after the inner lock ended
		fail      error
		want      error
	}{
		{"inner lost", true, false, nil, errInnerLost},
		{"inner lost, then the caller's deadline", true, true, nil, context.DeadlineExceeded},
		{"another failure, inner held", false, false, other, other},
		{"another failure, inner lost, the caller's deadline", true, true, other, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := time.Hour
			if tc.endCaller {
				timeout = 20 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			inner := &endable{done: make(chan struct{}), err: lost}
			var g guarded
			_, err := g.underInner(ctx, inner, func(lctx context.Context) ([]*Lease, error) {
				if tc.loseInner {
					close(inner.done)
					<-lctx.Done() // ended with the inner lock
				}
				if tc.endCaller {
					<-ctx.Done()
				}
				if tc.fail != nil {
					return nil, tc.fail
				}
				return nil, lctx.Err()
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("underInner: %v, want %v", err, tc.want)
			}
		})
	}
}
