package zklock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zklock"
)

func TestDo(t *testing.T) {
	t.Parallel()
	m := newMutex(t, connect(t), lockPath(t))
	ran := false
	err := zklock.Do(ctxT(t), m, func(ctx context.Context) error {
		ran = true
		return ctx.Err()
	})
	must(t, err)
	if !ran {
		t.Fatal("Do did not run fn")
	}

	boom := errors.New("boom")
	mustIs(t, zklock.Do(ctxT(t), m, func(context.Context) error { return boom }), boom)
	mustIs(t, zklock.Do(ctxT(t), nil, func(context.Context) error { return nil }), zklock.ErrInvalidArgument)
}
