package zklock_test

// Semaphores on the fake: replicas made with different sizes on one path
// (docs/semantics.md, "Resizing a semaphore"), and the hand-over between
// waiters that the sizes make subtle.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// fakeSems connects a Client per size to f, each with a Semaphore of that
// size on path.
func fakeSems(t testing.TB, f *zkfake.Server, path string, sizes ...int) ([]*zklock.Client, []*zklock.Semaphore) {
	t.Helper()
	cs, sems := make([]*zklock.Client, len(sizes)), make([]*zklock.Semaphore, len(sizes))
	for i, n := range sizes {
		cs[i] = fakeClient(t, f)
		s, err := zklock.NewSemaphore(cs[i], path, n)
		must(t, err)
		sems[i] = s
	}
	return cs, sems
}

// A waiter P whose first look is late (its server lagged) holds on it at
// once, while G, queued behind P, had decided on an earlier read that P
// waits, and so watches P for its hold. P must tell G (the hand-over's
// announce), or G sleeps until P lets go while a lease is free for it.
func TestFakeSemaphoreLateFirstLookAnnounces(t *testing.T) {
	f := zkfake.New()
	cs, sems := fakeSems(t, f, "/late", 2, 2, 2, 2)
	la, err := sems[0].Acquire(ctxT(t))
	must(t, err)
	lb, err := sems[1].Acquire(ctxT(t))
	must(t, err)

	cp, cg := connOf(t, f, cs[2]), connOf(t, f, cs[3])
	lookHeld, lookGo, gWatches := make(chan struct{}), make(chan struct{}), make(chan struct{}, 8)
	var held atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		switch {
		case op.Conn == cp && (op.Name == "ChildrenStat" || op.Name == "ChildrenStatW") && held.CompareAndSwap(false, true):
			close(lookHeld)
			<-lookGo
		case op.Conn == cg && op.Name == "GetW":
			gWatches <- struct{}{}
		}
		return nil
	}})
	rp := async(sems[2].Acquire, ctxT(t))
	<-lookHeld // P's node is there; its first look waits
	rg := async(sems[3].Acquire, ctxT(t))
	select { // G read [A B P G] and watches P for its hold
	case <-gWatches:
	case <-rg:
		t.Fatal("G returned while two leases are held and P is ahead of it")
	}
	release(t, la)
	close(lookGo) // P reads [B P G]: it holds at once
	lp := await(t, rp)
	pending(t, rg)
	release(t, lb) // [P G]: G's lease is free
	lg := await(t, rg)
	release(t, lp)
	release(t, lg)
}

// sizesOf lists the participants' sizes, holders first, then waiters, as
// Participants orders them.
func sizesOf(t testing.TB, s *zklock.Semaphore) (held, waiting []int) {
	t.Helper()
	ps, err := s.Participants(ctxT(t))
	must(t, err)
	for _, p := range ps {
		if p.Holder {
			held = append(held, p.Size)
		} else {
			waiting = append(waiting, p.Size)
		}
	}
	return held, waiting
}

// A rolling resize from 2 to 3 and back: no replica fails for its size;
// the smallest size among the holders and those ahead bounds every grant;
// once the 2s are gone, three leases are held; a 2 that arrives again
// bounds the grants behind it, and not the leases held.
func TestFakeSemaphoreResize(t *testing.T) {
	f := zkfake.New()
	_, s := fakeSems(t, f, "/rs", 2, 2, 3, 3, 3, 2)
	a2, b2, c3, d3, e3, f2 := s[0], s[1], s[2], s[3], s[4], s[5]
	la, err := a2.Acquire(ctxT(t))
	must(t, err)
	lb, err := b2.Acquire(ctxT(t))
	must(t, err)
	_, err = c3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind two 2s that hold")
	rc := async(c3.Acquire, ctxT(t))
	fakeQueued(t, f, "/rs", 3)
	pending(t, rc)
	held, waiting := sizesOf(t, c3)
	if fmt.Sprint(held, waiting) != "[2 2] [3]" {
		t.Fatalf("participants' sizes: held %v, waiting %v; want [2 2] [3]", held, waiting)
	}
	ps, err := c3.Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 2 {
		t.Fatalf("size in force %d, want 2", n)
	}

	release(t, la) // [B2 C3]: C holds, within B's 2
	lc := await(t, rc)
	_, err = d3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a third lease while a 2 holds")

	release(t, lb) // [C3]: the 2s are gone
	ld, err := d3.TryAcquire(ctxT(t))
	must(t, err, "a second 3")
	le, err := e3.TryAcquire(ctxT(t))
	must(t, err, "a third 3, once the 2s are gone")
	_, err = a2.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 2 behind three holders")
	ps, err = e3.Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 3 {
		t.Fatalf("size in force %d with only 3s, want 3", n)
	}

	// A 2 arrives again: the three leases stay held; it waits until
	// fewer than 2 are ahead of it.
	rf := async(f2.Acquire, ctxT(t))
	fakeQueued(t, f, "/rs", 4)
	release(t, lc) // [D3 E3 F2]: F is third
	pending(t, rf)
	mustLive(t, ld)
	mustLive(t, le)
	release(t, ld) // [E3 F2]
	lf := await(t, rf)
	_, err = c3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind a 2 that holds, with two leases held")
	release(t, le)
	release(t, lf)
	fakeQueued(t, f, "/rs", 0)
}

// A smaller size that queues holds back the waiters ahead of it that a
// lease would put over it: when a lease frees, C (third, within every
// size up to it) does not take it while D's 2 is queued, since three
// leases would then be held; it holds once it is second. C is held back,
// not merely late: the test looks once C watches D.
func TestFakeSemaphoreSmallerNewcomerHoldsBack(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/nq", 3, 3, 3, 3, 2)
	held := acquireEach(t, s[:3])
	rc := async(s[3].Acquire, ctxT(t))
	fakeQueued(t, f, "/nq", 4)
	had := f.Children("/nq")
	rd := async(s[4].Acquire, ctxT(t))
	small := fakeNewNode(t, f, "/nq", had)
	watched := hookWatches(f)
	release(t, held[2]) // [A B C D2]: C is third, below every size up to it, not below D's
	awaitWatch(t, watched, cs[3], small)
	pending(t, rc)
	release(t, held[0]) // [B C D2]: C is second
	lc := await(t, rc)
	pending(t, rd)
	release(t, held[1]) // [C D2]
	ld := await(t, rd)
	release(t, lc)
	release(t, ld)
}

// A waiter held back by a smaller size alone (no group behind it to
// count) watches its own node too: a Revoke that replaces its mark wakes
// it, and it marks the node again in front of the revocation, which it
// finds alone there once it holds.
func TestFakeSemaphoreRevokedWhileHeldBackByASize(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/rb", 3, 3, 3, 3, 2)
	held := acquireEach(t, s[:3])
	had := f.Children("/rb")
	rd := async(s[3].Acquire, ctxT(t))
	nodeD := fakeNewNode(t, f, "/rb", had)
	had = f.Children("/rb")
	re := async(s[4].Acquire, ctxT(t))
	nodeE := fakeNewNode(t, f, "/rb", had)
	watched := hookWatches(f)
	release(t, held[2]) // [A B D E2]: D is third, held back by E alone
	awaitWatch(t, watched, cs[3], nodeE)
	raw := func() string {
		data, _, err := connOf(t, f, cs[4]).Get(nodeD)
		must(t, err)
		return string(data)
	}
	must(t, zklock.Revoke(ctxT(t), cs[4], nodeD))
	eventually(t, func() bool { return raw() == "\x00zklock:held-back\x00__REVOKE__" },
		"D did not mark its node again in front of the revocation: %q", raw())
	pending(t, rd)
	release(t, held[0]) // [B D E2]: D is second
	ld := await(t, rd)
	if got := raw(); got != "__REVOKE__" {
		t.Fatalf("D holds with its node saying %q, want \"__REVOKE__\"", got)
	}
	release(t, held[1])
	release(t, ld)
	release(t, await(t, re))
	fakeQueued(t, f, "/rb", 0)
}

// A waiter held back by smaller sizes behind it wakes when they go, by
// its watch on the first of them and then on the next: the bound rises
// and it holds, with no node ahead of it gone.
func TestFakeSemaphoreHeldBackWakes(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/hb", 3, 3, 3, 3, 2, 2)
	held := acquireEach(t, s[:3])
	rc := async(s[3].Acquire, ctxT(t))
	fakeQueued(t, f, "/hb", 4)
	ctxD, cancelD := context.WithCancel(ctxT(t))
	defer cancelD()
	ctxE, cancelE := context.WithCancel(ctxT(t))
	defer cancelE()
	had := f.Children("/hb")
	rd := async(s[4].Acquire, ctxD)
	nodeD := fakeNewNode(t, f, "/hb", had)
	had = f.Children("/hb")
	re := async(s[5].Acquire, ctxE)
	nodeE := fakeNewNode(t, f, "/hb", had)
	watched := hookWatches(f)
	release(t, held[2]) // [A B C D2 E2]: C is held back by D
	awaitWatch(t, watched, cs[3], nodeD)
	cancelD() // [A B C E2]: by E
	mustIs(t, returned(t, rd).err, context.Canceled, "D's acquire")
	awaitWatch(t, watched, cs[3], nodeE)
	pending(t, rc)
	cancelE() // [A B C]
	mustIs(t, returned(t, re).err, context.Canceled, "E's acquire")
	lc := await(t, rc)
	if got := holderNames(t, s[0]); len(got) != 3 {
		t.Fatalf("holders shown %v once C holds, want three: C's node must carry no mark", got)
	}
	for _, l := range append(held[:2], lc) {
		release(t, l)
	}
}

// fakeNewNode waits for one more child of path on f than had (its
// children before the create was started), and returns its path.
func fakeNewNode(t testing.TB, f *zkfake.Server, path string, had []string) string {
	t.Helper()
	fakeQueued(t, f, path, len(queuedOn(had))+1)
	for _, k := range queuedOn(f.Children(path)) {
		if !slices.Contains(had, k) {
			return path + "/" + k
		}
	}
	t.Fatalf("no new child of %s", path)
	return ""
}

// acquireEach acquires a lease of each semaphore in turn.
func acquireEach(t testing.TB, sems []*zklock.Semaphore) []*zklock.Lease {
	t.Helper()
	ls := make([]*zklock.Lease, len(sems))
	for i, s := range sems {
		l, err := s.Acquire(ctxT(t))
		must(t, err)
		ls[i] = l
	}
	return ls
}

// watch is a data watch set: by whom, on what.
type watch struct {
	session int64
	path    string
}

// hookWatches reports every data watch (GetW) a participant sets on f,
// from now on.
func hookWatches(f *zkfake.Server) <-chan watch {
	ch := make(chan watch, 1024)
	f.SetHooks(zkfake.Hooks{After: reportWatches(ch)})
	return ch
}

// reportWatches is an After hook that sends each data watch set on ch.
func reportWatches(ch chan<- watch) func(zkfake.Op, error) error {
	return func(op zkfake.Op, err error) error {
		if op.Name == "GetW" && err == nil {
			select {
			case ch <- watch{op.Session, op.Paths[0]}:
			default:
			}
		}
		return err
	}
}

// awaitWatch waits until c's session watches path.
func awaitWatch(t testing.TB, watched <-chan watch, c *zklock.Client, path string) {
	t.Helper()
	deadline := time.After(long)
	for {
		select {
		case w := <-watched:
			if w == (watch{c.SessionID(), path}) {
				return
			}
		case <-deadline:
			t.Fatalf("session %#x did not watch %s", c.SessionID(), path)
		}
	}
}

// A size that rises when a small holder leaves lets every waiter within
// the new bound through, the first waiter by its watch on the holders,
// the next by the first's announce.
func TestFakeSemaphoreBoundRises(t *testing.T) {
	f := zkfake.New()
	_, s := fakeSems(t, f, "/br", 2, 3, 3, 3)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	lb, err := s[1].Acquire(ctxT(t))
	must(t, err)
	rc := async(s[2].Acquire, ctxT(t))
	fakeQueued(t, f, "/br", 3)
	rd := async(s[3].Acquire, ctxT(t))
	fakeQueued(t, f, "/br", 4)
	pending(t, rc)
	pending(t, rd)
	release(t, la) // [B3 C3 D3]: both hold
	lc, ld := await(t, rc), await(t, rd)
	mustLive(t, lb)
	for _, l := range []*zklock.Lease{lb, lc, ld} {
		release(t, l)
	}
}

// An emptied path takes the next size at once: the container is still
// there (ZooKeeper reaps it a minute later at the earliest) and nothing of
// the old size is left that bounds the new.
func TestFakeSemaphoreEmptiedPathTakesANewSize(t *testing.T) {
	f := zkfake.New()
	_, s := fakeSems(t, f, "/ep", 2, 3)
	for _, l := range acquireN(t, s[0].Acquire, 2) {
		release(t, l)
	}
	if !f.Exists("/ep") {
		t.Fatal("the fake reaped the path by itself")
	}
	var ls []*zklock.Lease
	for i := 0; i < 3; i++ {
		l, err := s[1].TryAcquire(ctxT(t))
		must(t, err, "lease %d of 3 on a path emptied by 2s", i+1)
		ls = append(ls, l)
	}
	for _, l := range ls {
		release(t, l)
	}
}

// Lease nodes whose ids carry no size (builds from before sizes were
// carried in names; made here by hand) count with the size recorded in
// the path's data, or with no bound of their own when there is none.
func TestFakeSemaphoreUnsizedNodes(t *testing.T) {
	for _, tc := range []struct {
		record string
		free   bool // a third lease, of a 3, is free beside the two unsized
		size   int  // the unsized nodes' Size in Participants
	}{{"2", false, 2}, {"", true, 0}, {"no number", true, 0}, {"3", true, 3}} {
		t.Run(fmt.Sprintf("record %q", tc.record), func(t *testing.T) {
			f := zkfake.New()
			must(t, f.Create("/un", []byte(tc.record)))
			for i, u := range []string{"0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7"} {
				must(t, f.Create(fmt.Sprintf("/un/_c_%s-lease-%010d", u, i), nil))
			}
			_, s := fakeSems(t, f, "/un", 3)
			l, err := s[0].TryAcquire(ctxT(t))
			if !tc.free {
				mustIs(t, err, zklock.ErrLocked, "a 3 behind two nodes of a recorded 2")
				r := async(s[0].Acquire, ctxT(t))
				fakeQueued(t, f, "/un", 3)
				pending(t, r)
				must(t, f.Delete(fmt.Sprintf("/un/_c_%s-lease-%010d", "0f8fad5b-d9cb-469f-a165-70867728950e", 0)))
				l = await(t, r)
			} else {
				must(t, err, "a 3 beside two unsized nodes")
			}
			ps, err := s[0].Participants(ctxT(t))
			must(t, err)
			for _, p := range ps {
				want := tc.size
				if p.Node == l.Node() {
					want = 3
				}
				if p.Size != want || !p.Holder {
					t.Fatalf("participant %s: size %d, holder %v; want %d, holding", p.Node, p.Size, p.Holder, want)
				}
			}
			ps2, err := zklock.Participants(ctxT(t), fakeClient(t, f), "/un")
			must(t, err)
			if fmt.Sprint(ps2) != fmt.Sprint(ps) {
				t.Fatalf("Participants of the path %+v, of the Semaphore %+v", ps2, ps)
			}
			release(t, l)
		})
	}
}

// holdLooks makes every children read of conns wait until release is
// closed (a participant's first look may be sent twice: prefetched behind
// its create, and again if that one does not list its node), and reports
// each conn on looked at its first. GetW watches set are sent on the
// channel returned (as hookWatches). An op for which fail returns an error
// fails with it, unapplied.
func holdLooks(f *zkfake.Server, looked chan<- *zkfake.Conn, release <-chan struct{}, fail func(zkfake.Op) error, conns ...*zkfake.Conn) <-chan watch {
	var once firstTimes
	watched := make(chan watch, 1024)
	f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			if err := fail(op); err != nil {
				return err
			}
			if op.Name != "ChildrenStat" && op.Name != "ChildrenStatW" || !slices.Contains(conns, op.Conn) {
				return nil
			}
			if once.first(op.Conn) {
				looked <- op.Conn
			}
			<-release
			return nil
		},
		After: reportWatches(watched),
	})
	return watched
}

// firstTimes tells, safely from any goroutine, whether a key is seen for
// the first time.
type firstTimes struct {
	mu   sync.Mutex
	seen map[any]bool
}

func (f *firstTimes) first(key any) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[any]bool{}
	}
	was := f.seen[key]
	f.seen[key] = true
	return !was
}

// holderNames lists the node names of the participants shown holding.
func holderNames(t testing.TB, s *zklock.Semaphore) []string {
	t.Helper()
	ps, err := s.Participants(ctxT(t))
	must(t, err)
	var out []string
	for _, p := range ps {
		if p.Holder {
			out = append(out, p.Node[strings.LastIndexByte(p.Node, '/')+1:])
		}
	}
	return out
}

// lateRig is the race the count closes, on the fake: A (a 3) queues first
// and its first look waits; B and C (3s) queue behind it and hold on
// theirs; N (a 2) queues; then A's look comes, and lists them all.
type lateRig struct {
	f       *zkfake.Server
	cs      []*zklock.Client
	s       []*zklock.Semaphore
	connA   *zkfake.Conn
	nodeA   atomic.Value // A's node, once queued
	nodeN   string
	ra, rn  <-chan result
	lb, lc  *zklock.Lease
	watched <-chan watch
}

// newLateRig sets the rig up on path, up to A's look, which it lets go:
// A decides on [A B C N2]. fail (given the rig) fails the ops it returns
// an error for.
func newLateRig(t *testing.T, path string, fail func(*lateRig, zkfake.Op) error) *lateRig {
	r := &lateRig{f: zkfake.New()}
	r.nodeA.Store("")
	r.cs, r.s = fakeSems(t, r.f, path, 3, 3, 3, 2)
	r.connA = connOf(t, r.f, r.cs[0])
	looked, lookGo := make(chan *zkfake.Conn, 1), make(chan struct{})
	r.watched = holdLooks(r.f, looked, lookGo, func(op zkfake.Op) error { return fail(r, op) }, r.connA)
	r.ra = async(r.s[0].Acquire, ctxT(t))
	<-looked
	fakeQueued(t, r.f, path, 1)
	r.nodeA.Store(path + "/" + r.f.Children(path)[0])
	var err error
	r.lb, err = r.s[1].Acquire(ctxT(t))
	must(t, err, "B, second, holds on its first look")
	r.lc, err = r.s[2].Acquire(ctxT(t))
	must(t, err, "C, third, holds on its first look")
	had := r.f.Children(path)
	r.rn = async(r.s[3].Acquire, ctxT(t))
	r.nodeN = fakeNewNode(t, r.f, path, had)
	close(lookGo)
	return r
}

// raw is A's node's data, as ZooKeeper holds it.
func (r *lateRig) raw(t *testing.T) string {
	t.Helper()
	data, _, err := connOf(t, r.f, r.cs[3]).Get(r.nodeA.Load().(string))
	must(t, err)
	return string(data)
}

// isA reports whether op is A's, of kind name, on A's node.
func (r *lateRig) isA(op zkfake.Op, name string) bool {
	return op.Conn == r.connA && op.Name == name && op.Paths[0] == r.nodeA.Load().(string)
}

// A lease granted out of queue order before a smaller size queued counts
// against the grants after it: B and C (3s) hold on their first looks
// while A's, ahead of them, lags; then N (a 2) queues, and A's look comes.
// The rule lets A hold, and granting it would make three leases while N is
// queued: A counts B and C, which carry no held-back mark, and waits. It
// holds once B has gone. Participants shows A waiting, by its mark. A's
// first read of a mark fails (a connection lost): A reads again, and
// decides the same.
func TestFakeSemaphoreLateGrantCountsLeasesBehind(t *testing.T) {
	var failed atomic.Bool
	r := newLateRig(t, "/ct", func(r *lateRig, op zkfake.Op) error {
		if op.Conn == r.connA && op.Name == "Get" && strings.HasSuffix(op.Paths[0], "-lease-0000000001") && failed.CompareAndSwap(false, true) {
			return zk.ErrConnectionClosed
		}
		return nil
	})
	awaitWatch(t, r.watched, r.cs[0], r.nodeN)
	pending(t, r.ra)
	nodeA := r.nodeA.Load().(string)
	if got := holderNames(t, r.s[3]); len(got) != 2 || strings.HasSuffix(nodeA, got[0]) {
		t.Fatalf("holders shown %v, want B and C, not A (%s)", got, nodeA)
	}
	if got := r.raw(t); !strings.HasPrefix(got, "\x00zklock:held-back\x00") {
		t.Fatalf("A's node holds %q, want the held-back mark", got)
	}
	release(t, r.lb) // [A C N2]: two leases with A's
	la := await(t, r.ra)
	if got := r.raw(t); strings.Contains(got, "held-back") {
		t.Fatalf("A holds, and its node still says %q", got)
	}
	if !failed.Load() {
		t.Fatal("A never read B's mark")
	}
	if z := r.f.Czxid(r.nodeN); la.Token() < z {
		t.Fatalf("A's token %#x is below N's czxid %#x: it held on a read that did not list N", la.Token(), z)
	}
	pending(t, r.rn)
	release(t, r.lc) // [A N2]
	ln := await(t, r.rn)
	release(t, la)
	release(t, ln)
	fakeQueued(t, r.f, "/ct", 0)
}

// Three 3s whose first looks all come after a 2 queued behind them: C,
// third, is held back by the count alone and marks its node (its first
// write of the mark is lost, and it writes it again); B then counts only
// itself and A, and A counts B, so both hold: two leases, neither more
// (the rule alone would grant three) nor fewer (counting C while it waits
// would grant none, and nobody would ever hold).
func TestFakeSemaphoreLooksAfterASmallerSizeQueued(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/cl", 3, 3, 3, 2)
	looked, lookGo := make(chan *zkfake.Conn, 3), make(chan struct{})
	connC := connOf(t, f, cs[2])
	var failed atomic.Bool
	failMark := func(op zkfake.Op) error {
		if op.Conn == connC && op.Name == "SetIf" && failed.CompareAndSwap(false, true) {
			return zk.ErrConnectionClosed // C's first mark, lost unapplied: C marks again
		}
		return nil
	}
	watched := holdLooks(f, looked, lookGo, failMark, connOf(t, f, cs[0]), connOf(t, f, cs[1]), connC)
	var rs []<-chan result
	for i := 0; i < 3; i++ {
		rs = append(rs, async(s[i].Acquire, ctxT(t)))
		<-looked
		fakeQueued(t, f, "/cl", i+1)
	}
	had := f.Children("/cl")
	rn := async(s[3].Acquire, ctxT(t))
	nodeN := fakeNewNode(t, f, "/cl", had)
	close(lookGo)
	la, lb := await(t, rs[0]), await(t, rs[1])
	for _, l := range []*zklock.Lease{la, lb} {
		// Both decided on reads that listed N (and B's, or A's, on one
		// that read C's mark): each token is such a read's pzxid.
		if z := f.Czxid(nodeN); l.Token() < z {
			t.Fatalf("lease %s has token %#x, below N's czxid %#x", l.Node(), l.Token(), z)
		}
	}
	awaitWatch(t, watched, cs[2], nodeN)
	pending(t, rs[2])
	pending(t, rn)
	release(t, la) // [B C N2]: C is second
	lc := await(t, rs[2])
	pending(t, rn)
	release(t, lb)
	ln := await(t, rn)
	release(t, lc)
	release(t, ln)
	fakeQueued(t, f, "/cl", 0)
}

// A held-back waiter reads the marks of the groups behind it, then sets
// its watches: a mark written in between must not be missed. A reads B
// unmarked and is held back by B and C; B then marks its node (held back
// by its own count) before A's watch on it is set. A sees B's version
// changed when it sets the watch, decides again, and holds: with B marked
// it counts only C and itself, two leases within N's 2.
func TestFakeSemaphoreMarkBeforeTheWatch(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/mw", 3, 3, 3, 2)
	connA, connB := connOf(t, f, cs[0]), connOf(t, f, cs[1])
	aGo, bGo, bMarked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	looked, aWatchesB := make(chan *zkfake.Conn, 2), make(chan struct{})
	var nodeB atomic.Value
	nodeB.Store("")
	var once firstTimes
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		switch {
		case (op.Name == "ChildrenStat" || op.Name == "ChildrenStatW") && (op.Conn == connA || op.Conn == connB):
			if once.first(op.Conn) {
				looked <- op.Conn
			}
			if op.Conn == connA {
				<-aGo
			} else {
				<-bGo
			}
		case op.Name == "GetW" && op.Conn == connA && op.Paths[0] == nodeB.Load().(string):
			if once.first(nil) {
				close(aWatchesB)
				<-bMarked
			}
		}
		return nil
	}})
	ra := async(s[0].Acquire, ctxT(t))
	<-looked
	fakeQueued(t, f, "/mw", 1)
	had := f.Children("/mw")
	rb := async(s[1].Acquire, ctxT(t))
	<-looked
	nodeB.Store(fakeNewNode(t, f, "/mw", had))
	lc, err := s[2].Acquire(ctxT(t))
	must(t, err, "C, third, holds on its first look")
	had = f.Children("/mw")
	rn := async(s[3].Acquire, ctxT(t))
	fakeNewNode(t, f, "/mw", had)
	close(aGo) // A reads [A B C N2], B and C unmarked: held back
	<-aWatchesB
	close(bGo) // B reads [A B C N2], C unmarked: held back, it marks
	eventually(t, func() bool {
		data, _, err := connOf(t, f, cs[3]).Get(nodeB.Load().(string))
		return err == nil && strings.HasPrefix(string(data), "\x00zklock:held-back\x00")
	}, "B's node never carried the held-back mark")
	close(bMarked)
	la := await(t, ra)
	pending(t, rb)
	pending(t, rn)
	release(t, la) // [B C N2]: B holds with C
	lb := await(t, rb)
	release(t, lc)
	release(t, lb)
	ln := await(t, rn)
	release(t, ln)
	fakeQueued(t, f, "/mw", 0)
}

// A held-back waiter's mark shares its node's data with a revocation: a
// Revoke between the read and the write of the mark is kept (the mark
// goes in front of it, on a second try); a failed read of the node to
// unmark it, then a failed unmark, are tried again before the waiter
// holds; and once it holds its node says "__REVOKE__" alone, so that the
// lease is revoked at once, as Curator's would be.
func TestFakeSemaphoreHeldBackRevoked(t *testing.T) {
	var sets, gets atomic.Int32
	r := newLateRig(t, "/rv", func(r *lateRig, op zkfake.Op) error {
		switch {
		case r.isA(op, "Get") && gets.Add(1) == 3: // the unmark's read (after the mark's two)
			return zk.ErrConnectionClosed
		case !r.isA(op, "SetIf"):
			return nil
		}
		switch sets.Add(1) {
		case 1: // A's mark, after its read of the node: a revocation comes first
			if err := connOf(t, r.f, r.cs[3]).Set(op.Paths[0], []byte("__REVOKE__")); err != nil {
				t.Errorf("revoking A: %v", err)
			}
		case 3: // A's first unmark: lost with the connection, unapplied
			return zk.ErrConnectionClosed
		}
		return nil
	})
	awaitWatch(t, r.watched, r.cs[0], r.nodeN)
	if got := r.raw(t); got != "\x00zklock:held-back\x00__REVOKE__" {
		t.Fatalf("A's node holds %q, want the mark in front of the revocation", got)
	}
	release(t, r.lb)
	la := await(t, r.ra)
	if got, n, m := r.raw(t), sets.Load(), gets.Load(); got != "__REVOKE__" || n < 4 || m < 5 {
		t.Fatalf("A holds with its node saying %q after %d writes and %d reads of A's, want \"__REVOKE__\" after 4 and 5", got, n, m)
	}
	awaitRevoked(t, la)
	release(t, la)
	release(t, r.lc)
	release(t, await(t, r.rn))
	fakeQueued(t, r.f, "/rv", 0)
}

// A revocation written after the mark replaces it: the waiter, which
// watches its own node while held back, marks it again in front of the
// revocation (until then, the others count it as one that may hold); its
// node says "__REVOKE__" when it holds.
func TestFakeSemaphoreRevokedAfterTheMark(t *testing.T) {
	r := newLateRig(t, "/ra", func(*lateRig, zkfake.Op) error { return nil })
	awaitWatch(t, r.watched, r.cs[0], r.nodeA.Load().(string))
	must(t, zklock.Revoke(ctxT(t), r.cs[3], r.nodeA.Load().(string)))
	r.revokedAgain(t, "/ra")
}

// A revocation written after the mark, before the waiter's watch on its
// own node is set, replaces it too: the watch, set on the node at another
// version than the mark left it, fires nothing, so the waiter must tell
// from the version that it decides again, and mark its node again. It
// watches its node twice in all: once at the revoked version, once at
// the version its second mark left (the version it expects is exact).
func TestFakeSemaphoreRevokedBeforeItsWatch(t *testing.T) {
	var watches atomic.Int32
	r := newLateRig(t, "/rw", func(r *lateRig, op zkfake.Op) error {
		if r.isA(op, "GetW") && watches.Add(1) == 1 {
			if err := connOf(t, r.f, r.cs[3]).Set(op.Paths[0], []byte("__REVOKE__")); err != nil {
				t.Errorf("revoking A: %v", err)
			}
		}
		return nil
	})
	awaitWatch(t, r.watched, r.cs[0], r.nodeA.Load().(string)) // at the revoked version
	awaitWatch(t, r.watched, r.cs[0], r.nodeA.Load().(string)) // at its mark's: B may go now
	r.revokedAgain(t, "/rw")
	if n := watches.Load(); n != 2 {
		t.Fatalf("A watched its node %d times, want 2", n)
	}
}

// revokedAgain: A, revoked while held back, marks its node again in front
// of the revocation, and waits; it holds once B has gone, with its node
// saying "__REVOKE__" alone, and is revoked at once.
func (r *lateRig) revokedAgain(t *testing.T, path string) {
	t.Helper()
	eventually(t, func() bool { return r.raw(t) == "\x00zklock:held-back\x00__REVOKE__" },
		"A did not mark its node again in front of the revocation: %q", r.raw(t))
	pending(t, r.ra)
	release(t, r.lb)
	la := await(t, r.ra)
	if got := r.raw(t); got != "__REVOKE__" {
		t.Fatalf("A holds with its node saying %q, want \"__REVOKE__\"", got)
	}
	awaitRevoked(t, la)
	release(t, la)
	release(t, r.lc)
	release(t, await(t, r.rn))
	fakeQueued(t, r.f, path, 0)
}

// awaitRevoked waits until l is revoked.
func awaitRevoked(t *testing.T, l *zklock.Lease) {
	t.Helper()
	select {
	case <-l.Revoked():
	case <-time.After(long):
		t.Fatalf("lease %s was not revoked", l.Node())
	}
}
