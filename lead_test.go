package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// term is one Election.Lead run in the background. Its fn hands the test
// its ctx once it runs, then returns whatever the test sends on ret.
type term struct {
	running chan context.Context // fn's ctx, once fn runs
	ret     chan error           // what fn returns
	done    chan error           // what Lead returns
}

func lead(ctx context.Context, e *zklock.Election) *term {
	tm := &term{make(chan context.Context, 1), make(chan error, 1), make(chan error, 1)}
	go func() {
		tm.done <- e.Lead(ctx, func(ctx context.Context) error {
			tm.running <- ctx
			return <-tm.ret
		})
	}()
	return tm
}

// leading waits until the term's fn runs, and returns its ctx.
func leading(t testing.TB, tm *term) context.Context {
	t.Helper()
	select {
	case ctx := <-tm.running:
		return ctx
	case err := <-tm.done:
		t.Fatalf("Lead returned %v before fn ran", err)
	case <-time.After(long):
		t.Fatal("fn did not run: the candidate does not lead")
	}
	return nil
}

// notLeading asserts that the term's fn has not run.
func notLeading(t testing.TB, tm *term) {
	t.Helper()
	select {
	case <-tm.running:
		t.Fatal("fn runs, but another candidate leads")
	default:
	}
}

// led waits for the term's Lead to return, and returns its error.
func led(t testing.TB, tm *term) error {
	t.Helper()
	select {
	case err := <-tm.done:
		return err
	case <-time.After(long):
		t.Fatal("Lead did not return")
		return nil
	}
}

// cancelled waits until ctx is done, and returns its cause.
func cancelled(t testing.TB, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(long):
		t.Fatal("fn's ctx was not cancelled")
		return nil
	}
}

// mustLeadError asserts that err is Lead's *OpError on path.
func mustLeadError(t testing.TB, err error, path string) {
	t.Helper()
	var oe *zklock.OpError
	if !errors.As(err, &oe) || oe.Op != "lead" || oe.Path != path {
		t.Fatalf("error %v (%T): want an *OpError of op \"lead\" on %s", err, err, path)
	}
	if n := strings.Count(err.Error(), "zklock: "); n != 1 {
		t.Fatalf("error %q says \"zklock: \" %d times, want once", err, n)
	}
}

// Lead runs fn only while it leads: a second candidate's fn waits until the
// first one's returns; then Lead resigns (its node is gone) and returns
// fn's error, and the next candidate leads.
func TestLeadRunsOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a := lead(ctxT(t), newElection(t, connect(t), path, "a"))
	actx := leading(t, a)
	queued(t, c, path, 1)
	b := lead(ctxT(t), newElection(t, connect(t), path, "b"))
	queued(t, c, path, 2)
	notLeading(t, b) // a leads: b's node is queued behind a's

	boom := errors.New("boom")
	a.ret <- boom
	err := led(t, a)
	mustIs(t, err, boom, "Lead returns fn's error")
	mustLeadError(t, err, path)
	if errors.Is(err, zklock.ErrLeaseExpired) || errors.Is(err, zklock.ErrReleased) {
		t.Fatalf("error %v: a resignation is no loss", err)
	}
	if cause := context.Cause(actx); !errors.Is(cause, context.Canceled) {
		t.Fatalf("fn's ctx after it returned: cause %v, want context.Canceled (no loss)", cause)
	}

	bctx := leading(t, b)
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("children %v: want b's node alone, a's deleted at resign", kids)
	}
	must(t, bctx.Err(), "the new leader's ctx")
	b.ret <- nil
	must(t, led(t, b), "a term that ends well")
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// Lead cancels fn's ctx, with the loss as its cause, when leadership is
// lost, and returns an error that says so, even when fn returns nil.
func TestLeadLossCancelsFn(t *testing.T) {
	t.Parallel()
	t.Run("node deleted", func(t *testing.T) {
		t.Parallel()
		path := lockPath(t)
		c := connect(t)
		a := lead(ctxT(t), newElection(t, connect(t), path, "a"))
		actx := leading(t, a)
		kids := children(t, c, path)
		if len(kids) != 1 {
			t.Fatalf("children %v: want the leader's", kids)
		}
		deleteNode(t, c, path+"/"+kids[0])
		cause := cancelled(t, actx)
		mustIs(t, cause, zklock.ErrNodeDeleted, "fn's ctx's cause")
		a.ret <- nil // fn had finished its work anyway
		err := led(t, a)
		mustIs(t, err, zklock.ErrNodeDeleted, "Lead after the leader's node was deleted")
		mustLeadError(t, err, path)
	})
	t.Run("session expired", func(t *testing.T) {
		t.Parallel()
		path := lockPath(t)
		c := connect(t)
		ac, fa := faulty(t, 4*time.Second)
		a := lead(ctxT(t), newElection(t, ac, path, "a"))
		actx := leading(t, a)
		b := lead(ctxT(t), newElection(t, connect(t), path, "b"))
		queued(t, c, path, 2)
		must(t, fa.ExpireSession(ctxT(t)), "expire the leader's session")
		cause := cancelled(t, actx)
		// The client hears of the expiry, or its keeper finds its node
		// gone first (ExpireSession deletes it before telling the client).
		if !errors.Is(cause, zklock.ErrSessionExpired) && !errors.Is(cause, zklock.ErrLeaseExpired) {
			t.Fatalf("fn's ctx's cause %v: want the session's end", cause)
		}
		a.ret <- actx.Err()
		err := led(t, a)
		mustIs(t, err, cause, "Lead's error wraps the loss")
		mustIs(t, err, context.Canceled, "and fn's error")
		mustLeadError(t, err, path)
		leading(t, b)
		b.ret <- nil
		must(t, led(t, b))
	})
	t.Run("partitioned", func(t *testing.T) {
		// The order of a real failure: the leader cut off stops before
		// the next candidate's fn runs.
		t.Parallel()
		path := lockPath(t)
		c := connect(t)
		ac, fa := faulty(t, time.Second)
		a := lead(ctxT(t), newElection(t, ac, path, "a"))
		actx := leading(t, a)
		b := lead(ctxT(t), newElection(t, connect(t), path, "b"))
		queued(t, c, path, 2)
		fa.Partition()
		bctx := leading(t, b)
		select {
		case <-actx.Done():
		default:
			t.Fatal("b leads while the cut-off leader's fn still runs")
		}
		mustIs(t, context.Cause(actx), zklock.ErrLeaseExpired, "fn's ctx's cause")
		a.ret <- nil
		mustIs(t, led(t, a), zklock.ErrLeaseExpired, "Lead of the cut-off leader")
		fa.Heal()
		must(t, bctx.Err())
		b.ret <- nil
		must(t, led(t, b))
	})
}

// A campaign that ends with its ctx runs nothing and leaves no node.
func TestLeadCancelledCampaign(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a := lead(ctxT(t), newElection(t, connect(t), path, "a"))
	leading(t, a)
	ctx, cancel := context.WithCancel(ctxT(t))
	b := lead(ctx, newElection(t, connect(t), path, "b"))
	queued(t, c, path, 2)
	cancel()
	err := led(t, b)
	mustIs(t, err, context.Canceled, "a cancelled campaign")
	mustLeadError(t, err, path)
	notLeading(t, b)
	queued(t, c, path, 1)
	a.ret <- nil
	must(t, led(t, a))
	queued(t, c, path, 0)
}

// Replicas that call Lead in a loop lead in turn, never two at once, each
// seeing itself as the leader while its fn runs; closing their Clients
// ends their loops with ErrClientClosed.
func TestLeadRequeueLoop(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	const replicas, termsEach = 3, 4
	var (
		running, most atomic.Int32
		mu            sync.Mutex
		terms         = map[string]int{}
		clients       []*zklock.Client
		wg            sync.WaitGroup
		enough        = make(chan struct{})
		once          sync.Once
	)
	last := make([]error, replicas)
	for i := 0; i < replicas; i++ {
		c := connect(t)
		clients = append(clients, c)
		id := fmt.Sprint("replica-", i)
		e := newElection(t, c, path, id)
		work := func(ctx context.Context) error {
			raise(&most, running.Add(1))
			defer running.Add(-1)
			// A round trip while leading: ZooKeeper agrees.
			l, err := e.Leader(ctx)
			if err != nil {
				return err
			}
			if string(l.Data) != id {
				return fmt.Errorf("%s runs fn while ZooKeeper says %s leads", id, l.Data)
			}
			mu.Lock()
			defer mu.Unlock()
			terms[id]++
			if len(terms) == replicas {
				done := true
				for _, n := range terms {
					done = done && n >= termsEach
				}
				if done {
					once.Do(func() { close(enough) })
				}
			}
			return nil
		}
		ctx := ctxT(t)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for ctx.Err() == nil {
				err := e.Lead(ctx, work)
				if errors.Is(err, zklock.ErrClientClosed) {
					last[i] = err
					return
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
			}
		}(i)
	}
	select {
	case <-enough:
	case <-time.After(long):
		t.Fatalf("replicas did not lead %d times each within %v: %v", termsEach, long, terms)
	}
	for _, c := range clients {
		must(t, c.Close())
	}
	waitGroup(t, &wg, "the loops did not end when their Clients closed")
	for i, err := range last {
		mustIs(t, err, zklock.ErrClientClosed, "replica %d's last Lead", i)
	}
	t.Logf("terms led: %v; at most %d fn at once", terms, most.Load())
	if m := most.Load(); m != 1 {
		t.Fatalf("at most %d fns ran at once, want 1", m)
	}
}

// raise sets most to n if n is larger.
func raise(most *atomic.Int32, n int32) {
	for {
		m := most.Load()
		if n <= m || most.CompareAndSwap(m, n) {
			return
		}
	}
}
