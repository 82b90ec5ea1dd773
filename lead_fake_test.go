package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// Election.Lead's decisions on the fake: fn runs only while leading, Lead
// resigns when fn returns and returns its error, a loss cancels fn's ctx
// with the loss as cause and is reported even when fn returns nil, and a
// cancelled campaign runs nothing and leaves no node.
func TestFakeLead(t *testing.T) {
	const path = "/lead/e"
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	a, b := newElection(t, ca, path, "a"), newElection(t, cb, path, "b")

	ta := lead(ctxT(t), a)
	actx := leading(t, ta)
	tb := lead(ctxT(t), b)
	fakeQueued(t, f, path, 2)
	notLeading(t, tb)
	boom := errors.New("boom")
	ta.ret <- boom
	err := led(t, ta)
	mustIs(t, err, boom, "Lead returns fn's error")
	mustLeadError(t, err, path)
	if cause := context.Cause(actx); !errors.Is(cause, context.Canceled) {
		t.Fatalf("fn's ctx after a resignation: cause %v, want context.Canceled", cause)
	}

	// b leads once a's node is gone; someone deletes b's node.
	bctx := leading(t, tb)
	kids := f.Children(path)
	if len(kids) != 1 {
		t.Fatalf("children %v: want b's alone", kids)
	}
	must(t, bctx.Err())
	must(t, f.Delete(path+"/"+kids[0]))
	mustIs(t, cancelled(t, bctx), zklock.ErrNodeDeleted, "fn's ctx's cause")
	tb.ret <- bctx.Err()
	err = led(t, tb)
	mustIs(t, err, zklock.ErrNodeDeleted, "Lead after the node was deleted")
	mustIs(t, err, context.Canceled, "and fn's error")
	mustLeadError(t, err, path)

	// The session expires while a leads and fn returns nil: Lead still
	// says leadership was lost.
	tc := lead(ctxT(t), a)
	cctx := leading(t, tc)
	if !f.Expire(ca.SessionID()) {
		t.Fatal("no such session")
	}
	mustIs(t, cancelled(t, cctx), zklock.ErrSessionExpired, "fn's ctx's cause")
	tc.ret <- nil
	mustIs(t, led(t, tc), zklock.ErrSessionExpired, "Lead after the session expired")

	// A campaign cancelled while b leads.
	td := lead(ctxT(t), b)
	leading(t, td)
	ctx, cancel := context.WithCancel(ctxT(t))
	te := lead(ctx, a)
	fakeQueued(t, f, path, 2)
	cancel()
	err = led(t, te)
	mustIs(t, err, context.Canceled, "a cancelled campaign")
	mustLeadError(t, err, path)
	notLeading(t, te)
	fakeQueued(t, f, path, 1)
	td.ret <- nil
	must(t, led(t, td))
	fakeQueued(t, f, path, 0)

	// The caller's ctx ends while fn runs: fn's ctx ends with it, and Lead
	// still resigns, with a context of its own.
	ctx, cancel = context.WithCancel(ctxT(t))
	tf := lead(ctx, a)
	fctx := leading(t, tf)
	tg := lead(ctxT(t), b)
	fakeQueued(t, f, path, 2)
	cancel()
	mustIs(t, cancelled(t, fctx), context.Canceled, "fn's ctx's cause")
	tf.ret <- fctx.Err()
	err = led(t, tf)
	mustIs(t, err, context.Canceled, "Lead with its ctx cancelled")
	mustLeadError(t, err, path)
	if errors.Is(err, zklock.ErrLeaseExpired) || errors.Is(err, zklock.ErrClientClosed) {
		t.Fatalf("error %v: the caller's cancel is no loss", err)
	}
	leading(t, tg)
	fakeQueued(t, f, path, 1)
	tg.ret <- nil
	must(t, led(t, tg))
}

// A panicking fn: Lead resigns, so the next candidate leads, and the
// panic goes on.
func TestFakeLeadPanics(t *testing.T) {
	const path = "/lead/panic"
	f := zkfake.New()
	a := newElection(t, fakeClient(t, f), path, "a")
	b := newElection(t, fakeClient(t, f), path, "b")
	var tb *term
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = a.Lead(ctxT(t), func(context.Context) error {
			tb = lead(ctxT(t), b)
			fakeQueued(t, f, path, 2)
			panic("boom")
		})
		t.Fatal("Lead returned: want fn's panic")
	}()
	bctx := leading(t, tb)
	fakeQueued(t, f, path, 1)
	must(t, bctx.Err(), "b's leadership")
	tb.ret <- nil
	must(t, led(t, tb))
	fakeQueued(t, f, path, 0)
}

// Bad input fails before any ZooKeeper call.
func TestFakeLeadBadInput(t *testing.T) {
	const path = "/lead/bad"
	f := zkfake.New()
	e := newElection(t, fakeClient(t, f), path, "a")
	err := e.Lead(ctxT(t), nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "a nil fn")
	mustLeadError(t, err, path)
	var none context.Context
	mustIs(t, e.Lead(none, func(context.Context) error { return nil }), zklock.ErrInvalidArgument, "a nil ctx")
	if f.Exists(path) {
		t.Fatal("bad input made the path")
	}
}

// Do, on the same machinery: a panicking fn releases the lease, and the
// panic goes on.
func TestFakeDoPanics(t *testing.T) {
	f := zkfake.New()
	m, err := zklock.NewMutex(fakeClient(t, f), "/do/panic")
	must(t, err)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = zklock.Do(ctxT(t), m, func(context.Context) error { panic("boom") })
		t.Fatal("Do returned: want fn's panic")
	}()
	fakeQueued(t, f, "/do/panic", 0)
	l, err := m.TryAcquire(ctxT(t))
	must(t, err, "the lock is free again")
	release(t, l)
}

// fn reaches its lease through LeaseFrom, under Do and under Lead, to
// fence with its token; a context of neither has none.
func TestFakeLeaseFrom(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/from/m")
	must(t, err)
	if zklock.LeaseFrom(context.Background()) != nil {
		t.Fatal("a plain context has a lease")
	}
	var token int64
	must(t, zklock.Do(ctxT(t), m, func(ctx context.Context) error {
		l := zklock.LeaseFrom(ctx)
		if l == nil || l.Err() != nil || l.Token() == 0 || !strings.HasPrefix(l.Node(), "/from/m/") {
			t.Fatalf("LeaseFrom under Do: %v", l)
		}
		inner, cancel := context.WithCancel(ctx)
		defer cancel()
		if zklock.LeaseFrom(inner) != l {
			t.Fatal("a context derived from fn's lost the lease")
		}
		token = l.Token()
		return nil
	}))
	e := newElection(t, c, "/from/e", "a")
	must(t, e.Lead(ctxT(t), func(ctx context.Context) error {
		l := zklock.LeaseFrom(ctx)
		if l == nil || l.Token() <= token || !strings.HasPrefix(l.Node(), "/from/e/") {
			t.Fatalf("LeaseFrom under Lead: %v (Do's token %d)", l, token)
		}
		return nil
	}))
}
