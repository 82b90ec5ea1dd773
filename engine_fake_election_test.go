package zklock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeObserverSeesAPathMadeBetweenItsReads: an observer finds the
// election's path missing, and the path is made before it sets its watch
// for it. It reads the path again (an exists watch on a path that already
// exists would only fire on a change of the path's own data, never on a
// candidate's arrival), and reports the first leader.
func TestFakeObserverSeesAPathMadeBetweenItsReads(t *testing.T) {
	f := zkfake.New()
	co, cc := fakeClient(t, f), fakeClient(t, f)
	conn := connOf(t, f, co)
	var made atomic.Int32
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "Children" && op.Paths[0] == "/eo" && errors.Is(err, zk.ErrNoNode) && made.Add(1) == 1 {
			must(t, f.Create("/eo", nil), "make the election's path")
		}
		return err
	}})
	eo, err := zklock.NewElection(co, "/eo")
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	obs := eo.Observe(ctx)
	next := func() zklock.Participant {
		t.Helper()
		select {
		case p := <-obs:
			return p
		case <-time.After(long):
			t.Fatal("no observation")
			return zklock.Participant{}
		}
	}
	if p := next(); p.Node != "" {
		t.Fatalf("first observation %+v, want nobody", p)
	}
	if made.Load() != 1 {
		t.Fatal("the path was never made between the observer's reads")
	}
	ec, err := zklock.NewElection(cc, "/eo")
	must(t, err)
	l, err := ec.Campaign(ctxT(t))
	must(t, err)
	if p := next(); p.Node != l.Node() {
		t.Fatalf("observed %+v, want the leader %s", p, l.Node())
	}
	release(t, l)
}
