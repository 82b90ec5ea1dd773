package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
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
	if p := next(t, obs); p.Node != "" {
		t.Fatalf("first observation %+v, want nobody", p)
	}
	if made.Load() != 1 {
		t.Fatal("the path was never made between the observer's reads")
	}
	ec, err := zklock.NewElection(cc, "/eo")
	must(t, err)
	l, err := ec.Campaign(ctxT(t))
	must(t, err)
	if p := next(t, obs); p.Node != l.Node() {
		t.Fatalf("observed %+v, want the leader %s", p, l.Node())
	}
	release(t, l)
}

// TestFakeElectionReads: Leader syncs, lists the candidates and reads the
// first one's node; an observer, where someone leads, watches only the
// leader's node (observers do not herd: a candidate joining the line wakes
// none of them, and sets no watch of theirs).
func TestFakeElectionReads(t *testing.T) {
	f := zkfake.New()
	co, cc := fakeClient(t, f), fakeClient(t, f)
	ec, err := zklock.NewElection(cc, "/er")
	must(t, err)
	l, err := ec.Campaign(ctxT(t))
	must(t, err)
	conn := connOf(t, f, co)
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && len(op.Paths) > 0 {
			log.add(op)
		}
		return nil
	}})
	eo, err := zklock.NewElection(co, "/er")
	must(t, err)
	p, err := eo.Leader(ctxT(t))
	must(t, err)
	if p.Node != l.Node() {
		t.Fatalf("leader %+v, want %s", p, l.Node())
	}
	want := []string{"Sync /er", "Children /er", "Get " + l.Node()}
	if got := log.since(0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Leader made %v; want %v", got, want)
	}
	from := log.len()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	obs := eo.Observe(ctx)
	if p := next(t, obs); p.Node != l.Node() {
		t.Fatalf("observed %+v, want %s", p, l.Node())
	}
	want = []string{"Sync /er", "Children /er", "GetDataW " + l.Node()}
	if got := log.since(from); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("an observer's read made %v; want %v", got, want)
	}
	release(t, l)
}

// TestFakeObserverSyncOnAMissingPath: the sync an observer sends before
// its first read may find no such path (an election nobody has joined):
// that is no error, and it reports that nobody leads.
func TestFakeObserverSyncOnAMissingPath(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	conn := connOf(t, f, c)
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Sync" && op.Paths[0] == "/es" && !f.Exists("/es") {
			return zk.ErrNoNode
		}
		return nil
	}})
	e, err := zklock.NewElection(c, "/es")
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	if p := next(t, e.Observe(ctx)); p.Node != "" {
		t.Fatalf("observed %+v, want nobody", p)
	}
	_, err = e.Leader(ctxT(t))
	mustIs(t, err, zklock.ErrNoLeader, "Leader of an election nobody joined")
}

// TestFakeObserverSyncsBeforeItReads: an observer reads nothing in a
// session before a sync in it has succeeded (a new session may be served
// by a follower behind the one that served its last report): a sync that
// fails is sent again before the first read.
func TestFakeObserverSyncsBeforeItReads(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	conn := connOf(t, f, c)
	var log opLog
	var syncs atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != conn || len(op.Paths) == 0 || op.Paths[0] != "/ey" {
			return nil
		}
		log.add(op)
		if op.Name == "Sync" && syncs.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	e, err := zklock.NewElection(c, "/ey")
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	if p := next(t, e.Observe(ctx)); p.Node != "" {
		t.Fatalf("observed %+v, want nobody", p)
	}
	ops := log.since(0)
	if len(ops) < 3 || ops[0] != "Sync /ey" || ops[1] != "Sync /ey" {
		t.Fatalf("the observer made %v; want a failed sync, a sync, then its reads", ops)
	}
}

// TestFakeObserverPathGoneBetweenReads: an empty election path that goes
// between the observer's read of its children and the watch it then sets
// (a container reaped) is read again, and the watch set on the next read:
// the first candidate after it is reported.
func TestFakeObserverPathGoneBetweenReads(t *testing.T) {
	f := zkfake.New()
	must(t, f.Create("/eg", nil))
	c := fakeClient(t, f)
	conn := connOf(t, f, c)
	var failed atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "ChildrenW" && op.Paths[0] == "/eg" && failed.Add(1) == 1 {
			return zk.ErrNoNode
		}
		return nil
	}})
	e, err := zklock.NewElection(c, "/eg")
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	obs := e.Observe(ctx)
	if p := next(t, obs); p.Node != "" {
		t.Fatalf("observed %+v, want nobody", p)
	}
	if failed.Load() < 2 {
		t.Fatalf("%d watches of the children; want the one that found the path gone and another", failed.Load())
	}
	other, err := zklock.NewElection(fakeClient(t, f), "/eg")
	must(t, err)
	l, err := other.Campaign(ctxT(t))
	must(t, err)
	if p := next(t, obs); p.Node != l.Node() {
		t.Fatalf("observed %+v, want %s", p, l.Node())
	}
	release(t, l)
}
