package zklock_test

// A waiter's reads, and what the engine makes of a driver's decision.

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// opLog records the operations one connection makes, for the hooks of f.
type opLog struct {
	mu  sync.Mutex
	ops []string // "Name path"
}

func (o *opLog) add(op zkfake.Op) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op.Name+" "+op.Paths[0])
}

func (o *opLog) since(i int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ops[i:]...)
}

func (o *opLog) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ops)
}

// TestFakeWokenWaiterReadsWithoutAWatch: only a waiter's first look is a
// look (a children read that may leave a watch, and a semaphore's size
// check); the read it makes when woken leaves no children watch, which
// would cost a notification per handoff, and does not read the size again
// (docs/design.md; participant.read). A mutex's waiter released to with a
// grant reads no children at all, only the path's stat for its token
// (handoff.go); one whose predecessor goes with no grant reads them, and
// fires its own grant watch so that it is not left behind. The session
// timeout is long, so the keeper's own requests (a confirmation, a watch
// on the lease's node) do not fall due during the test.
func TestFakeWokenWaiterReadsWithoutAWatch(t *testing.T) {
	for _, tc := range []string{"semaphore", "mutex granted", "mutex predecessor deleted"} {
		t.Run(tc, func(t *testing.T) {
			semaphore := tc == "semaphore"
			f := zkfake.New()
			ca := fakeClient(t, f)
			cb := fakeClient(t, f, zklock.WithSessionTimeout(time.Minute))
			acquirers := make([]func(context.Context) (*zklock.Lease, error), 2)
			for i, c := range []*zklock.Client{ca, cb} {
				if semaphore {
					s, err := zklock.NewSemaphore(c, "/wr/lock", 1)
					must(t, err)
					acquirers[i] = s.Acquire
				} else {
					m, err := zklock.NewMutex(c, "/wr/lock")
					must(t, err)
					acquirers[i] = m.Acquire
				}
			}
			la, err := acquirers[0](ctxT(t))
			must(t, err)
			conn := connOf(t, f, cb)
			var log opLog
			watching := make(chan int, 1)
			// The wait's watches: the holder's node, and a mutex's grant
			// watch and own node too (sent together, in any order).
			wants := 1
			if !semaphore {
				wants = 3
			}
			// The hook runs on whichever goroutine sends: the three watches
			// are pipelined, so the count is kept under the log's lock.
			var set int
			f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
				if op.Conn != conn || len(op.Paths) == 0 || op.Name == "Check" {
					return nil
				}
				log.mu.Lock()
				defer log.mu.Unlock()
				log.ops = append(log.ops, op.Name+" "+op.Paths[0])
				if op.Name == "GetW" || op.Name == "ExistsW" {
					if set++; set == wants {
						watching <- len(log.ops)
					}
				}
				return nil
			}})
			w := async(acquirers[1], ctxT(t))
			var waited int
			select {
			case waited = <-watching:
			case <-time.After(long):
				t.Fatal("the waiter never watched the holder")
			}
			var want []string
			switch tc {
			case "semaphore":
				release(t, la)
				// The registry too (registry.go: with the read of the queue,
				// it chains the waiter), without a watch either.
				want = []string{"Children /wr/lock/_holders", "ChildrenStat /wr/lock"}
			case "mutex granted":
				heard(t, ca, "/wr/lock")
				release(t, la)
			default:
				must(t, f.Delete(la.Node()))
				want = []string{"ChildrenStat /wr/lock", "Fire"} // with the waiter's node, known below
			}
			lb := await(t, w)
			after := log.since(waited)
			if semaphore {
				want = append(want, "Register "+lb.Node()) // it tells its successors that it holds, and registers
				if len(after) >= 2 {
					slices.Sort(after[:2]) // the two reads go out in parallel
				}
			}
			if tc == "mutex predecessor deleted" {
				want[1] = "Fire " + lb.Node()
			}
			if fmt.Sprint(after) != fmt.Sprint(want) {
				t.Fatalf("woken, the waiter made %v; want %v (first: %v)", after, want, log.since(0)[:waited])
			}
			if tc == "mutex granted" {
				// Its token, asked for, is read then: the path's stat, then
				// its own node (the fake's notifications carry no zxid).
				at := log.len()
				lb.Token()
				want = []string{"Get /wr/lock", "Get " + lb.Node()}
				if got := log.since(at); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("asked for its token, the lease made %v; want %v", got, want)
				}
			}
			release(t, lb)
		})
	}
}

// badDriver holds at the front; behind it, it says what bad says.
type badDriver struct{ bad zklock.Decision }

func (badDriver) Kind() zklock.Kind { return zklock.KindMutex }

func (d badDriver) GetsTheLock(_ []zklock.Child, first, _ int) zklock.Decision {
	if first == 0 {
		return zklock.Decision{Holds: true}
	}
	return d.bad
}

// TestFakeEngineRefusesABadDecision: a user's Driver that neither holds nor
// names a node to watch, or names one not ahead of the participant, makes
// the acquire fail with ErrInvalidArgument and leaves no node, rather than
// wait for nothing or panic.
func TestFakeEngineRefusesABadDecision(t *testing.T) {
	for name, d := range map[string]zklock.Decision{
		"no watch":         {},
		"itself":           {Watch: []int{1}},
		"behind":           {Watch: []int{2}},
		"negative":         {Watch: []int{-1}},
		"one good one bad": {Watch: []int{0, 1}},
	} {
		d := d
		t.Run(name, func(t *testing.T) {
			f := zkfake.New()
			ca, cb := fakeClient(t, f), fakeClient(t, f)
			la, err := zklock.NewLock(ca, "/bd/lock", badDriver{d})
			must(t, err)
			lb, err := zklock.NewLock(cb, "/bd/lock", badDriver{d})
			must(t, err)
			held, err := la.Acquire(ctxT(t))
			must(t, err)
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			_, err = lb.Acquire(ctx)
			if !errors.Is(err, zklock.ErrInvalidArgument) {
				t.Fatalf("acquire with the decision %+v: %v, want ErrInvalidArgument", d, err)
			}
			fakeQueued(t, f, "/bd/lock", 1)
			release(t, held)
		})
	}
}

// TestFakeTraceAheadIsTheMostOnAnyPath: AcquireInfo.Ahead is the most
// participants ahead of the acquire on any of its paths when its nodes were
// made, in Queued and in Acquired: a MultiLock on /a (two ahead) and /b
// (one ahead) reports 2, though it looks at /b last.
func TestFakeTraceAheadIsTheMostOnAnyPath(t *testing.T) {
	f := zkfake.New()
	var mu sync.Mutex
	var got []string
	tr := &zklock.Trace{
		Queued: func(a zklock.AcquireInfo) { mu.Lock(); got = append(got, fmt.Sprint("queued ", a.Ahead)); mu.Unlock() },
		Acquired: func(a zklock.AcquireInfo) {
			mu.Lock()
			got = append(got, fmt.Sprint("acquired ", a.Ahead))
			mu.Unlock()
		},
	}
	cm := fakeClient(t, f, zklock.WithTrace(tr))
	c1, c2, c3 := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	a1, err := zklock.NewMutex(c1, "/ta/a")
	must(t, err)
	a2, err := zklock.NewMutex(c2, "/ta/a")
	must(t, err)
	b3, err := zklock.NewMutex(c3, "/ta/b")
	must(t, err)
	l1, err := a1.Acquire(ctxT(t))
	must(t, err)
	w2 := async(a2.Acquire, ctxT(t))
	fakeQueued(t, f, "/ta/a", 2)
	l3, err := b3.Acquire(ctxT(t))
	must(t, err)
	ml, err := zklock.NewMultiLock(cm, []string{"/ta/a", "/ta/b"})
	must(t, err)
	wm := async(ml.Acquire, ctxT(t))
	fakeQueued(t, f, "/ta/a", 3)
	fakeQueued(t, f, "/ta/b", 2)
	// It has looked and queued before anyone ahead leaves (on the fake its
	// look is a read of its own, after the create).
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, "the MultiLock queues")
	release(t, l1)
	release(t, await(t, w2)) // the MultiLock holds on /a, and looks at /b, behind l3
	release(t, l3)
	release(t, await(t, wm))
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[queued 2 acquired 2]" {
		t.Fatalf("trace %v, want [queued 2 acquired 2]", got)
	}
}

// TestFakeSemaphoreWaiterBehindAWaiter: a semaphore waiter behind another
// waiting group watches that group's last node for its hold (awaitHold),
// and its entry in the registry (registry.go), and sleeps on them at once:
// a version not yet announced (0) is no news. The group ahead registers as
// chained (nothing is ahead of it when it holds), which chains the waiter:
// from then on it decides from the registry, read twice in all (when the
// group ahead registers, and when it releases), and never reads the queue
// after its first look.
func TestFakeSemaphoreWaiterBehindAWaiter(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	cc := fakeClient(t, f, zklock.WithSessionTimeout(time.Minute))
	var sems []*zklock.Semaphore
	for _, c := range []*zklock.Client{ca, cb, cc} {
		s, err := zklock.NewSemaphore(c, "/sw", 1)
		must(t, err)
		sems = append(sems, s)
	}
	la, err := sems[0].Acquire(ctxT(t))
	must(t, err)
	wb := async(sems[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/sw", 2)
	var nodeB string // the second waiter's node: the one that is not the holder's
	for _, k := range f.Children("/sw") {
		if "/sw/"+k != la.Node() {
			nodeB = "/sw/" + k
		}
	}
	connB, connC := connOf(t, f, cb), connOf(t, f, cc)
	var reads, regReads atomic.Int32
	var announced atomic.Bool
	watching, settled := make(chan struct{}), make(chan struct{})
	var onceW, onceS sync.Once
	// The watch is seen once applied (After): seen before, the group ahead
	// could announce between the hook and the watch, and the watch's read
	// would show the announced version (TestFakeSemaphoreAnnounceBeforeTheWatch's
	// path, not this one).
	f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			switch {
			case op.Conn == connB && (op.Name == "SetIf" || op.Name == "Register") && op.Paths[0] == nodeB:
				announced.Store(true)
			case op.Conn == connC && op.Name == "ChildrenStat":
				reads.Add(1)
			case op.Conn == connC && op.Name == "ChildrenW" && op.Paths[0] == "/sw/_holders":
				regReads.Add(1)
			}
			return nil
		},
		After: func(op zkfake.Op, err error) error {
			switch {
			case op.Conn == connC && op.Name == "GetW" && op.Paths[0] == nodeB && err == nil:
				onceW.Do(func() { close(watching) })
			case op.Conn == connC && op.Name == "ChildrenW" && op.Paths[0] == "/sw/_holders" && err == nil && announced.Load():
				// Chained by B's entry, C waits for the registry to change.
				onceS.Do(func() { close(settled) })
			}
			return err
		},
	})
	wc := async(sems[2].Acquire, ctxT(t))
	for _, ch := range []chan struct{}{watching, settled} {
		select {
		case <-ch:
		case <-time.After(long):
			t.Fatal("the third waiter never watched the second")
		}
		if ch == watching {
			release(t, la)
		}
	}
	lb := await(t, wb) // it registered, and the third waiter watches the registry, now for its release
	pending(t, wc)
	release(t, lb)
	lc := await(t, wc)
	if n := reads.Load(); n != 0 {
		t.Fatalf("the third waiter read the queue %d times after its first look; want 0 (it is chained)", n)
	}
	if n := regReads.Load(); n != 2 {
		t.Fatalf("the third waiter read the registry %d times; want 2", n)
	}
	release(t, lc)
}

// TestFakeSemaphoreAnnounceBeforeTheWatch: the group ahead of a semaphore
// waiter announces that it holds between the waiter's read and its watch.
// The watch's read shows the announced version: the waiter decides again
// at once, finds itself the first waiting group, and watches every holder,
// so that the next release lets it through, whoever's it is. Waiting for
// the group ahead to change again instead would keep it waiting while a
// lease is free.
func TestFakeSemaphoreAnnounceBeforeTheWatch(t *testing.T) {
	f := zkfake.New()
	ca1, ca2, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	var sems []*zklock.Semaphore
	for _, c := range []*zklock.Client{ca1, ca2, cb, cc} {
		s, err := zklock.NewSemaphore(c, "/sa", 2)
		must(t, err)
		sems = append(sems, s)
	}
	la1, err := sems[0].Acquire(ctxT(t))
	must(t, err)
	la2, err := sems[1].Acquire(ctxT(t))
	must(t, err)
	before := map[string]bool{la1.Node(): true, la2.Node(): true}
	wb := async(sems[2].Acquire, ctxT(t))
	fakeQueued(t, f, "/sa", 3)
	var nodeB string
	for _, k := range f.Children("/sa") {
		if !before["/sa/"+k] {
			nodeB = "/sa/" + k
		}
	}
	connB, connC := connOf(t, f, cb), connOf(t, f, cc)
	announced, held := make(chan struct{}), make(chan struct{})
	var onceA, onceH sync.Once
	f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			if op.Conn == connC && op.Name == "GetW" && op.Paths[0] == nodeB {
				onceH.Do(func() {
					close(held) // the waiter read the queue, and is about to watch B
					select {
					case <-announced:
					case <-time.After(long):
					}
				})
			}
			return nil
		},
		After: func(op zkfake.Op, err error) error {
			if op.Conn == connB && (op.Name == "SetIf" || op.Name == "Register") && op.Paths[0] == nodeB {
				onceA.Do(func() { close(announced) })
			}
			return err
		},
	})
	wc := async(sems[3].Acquire, ctxT(t))
	select {
	case <-held:
	case <-time.After(long):
		t.Fatal("the waiter never came to watch the group ahead")
	}
	release(t, la1) // B holds, and announces it before the waiter's watch is read
	lb := await(t, wb)
	release(t, la2) // a lease is free: the waiter takes it, beside B
	lc := await(t, wc)
	mustLive(t, lb)
	release(t, lb)
	release(t, lc)
}

// TestFakePrefetchOfAnAbandonedAcquireEnds: the reads an acquire sends
// right behind its create (each path's first look, prefetched) are not
// all waited for when the acquire ends early: a MultiLock's TryAcquire
// that fails on its first path never looks at its second. The goroutines
// that made them must end all the same.
func TestFakePrefetchOfAnAbandonedAcquireEnds(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	m, err := zklock.NewMutex(ca, "/pa/a")
	must(t, err)
	la, err := m.Acquire(ctxT(t))
	must(t, err)
	ml, err := zklock.NewMultiLock(cb, []string{"/pa/a", "/pa/b"})
	must(t, err)
	for i := 0; i < 3; i++ {
		_, err = ml.TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrLocked)
	}
	fakeQueued(t, f, "/pa/b", 0)
	eventually(t, func() bool { return !strings.Contains(goroutines(), "zklock.(*participant).prefetch") },
		"a prefetch goroutine is left:\n%s", goroutines())
	release(t, la)
}

// goroutines is the stacks of every goroutine.
func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}

// TestFakeTraceAheadOfAnAcquireN: an AcquireN of two leases on a free
// semaphore has nobody ahead of it: its first node is the first child,
// whatever follows it.
func TestFakeTraceAheadOfAnAcquireN(t *testing.T) {
	f := zkfake.New()
	var mu sync.Mutex
	var ahead []int
	tr := &zklock.Trace{Acquired: func(a zklock.AcquireInfo) { mu.Lock(); ahead = append(ahead, a.Ahead); mu.Unlock() }}
	c := fakeClient(t, f, zklock.WithTrace(tr))
	s, err := zklock.NewSemaphore(c, "/an", 3)
	must(t, err)
	ls, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	for _, l := range ls {
		release(t, l)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(ahead) != "[0 0]" {
		t.Fatalf("Ahead of an AcquireN(2) on a free semaphore: %v, want [0 0]", ahead)
	}
}
