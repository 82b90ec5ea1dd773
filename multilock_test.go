package zklock_test

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/faults"
)

// multiPaths returns n lock paths of the test's own, side by side.
func multiPaths(t testing.TB, n int) []string {
	root := strings.TrimSuffix(lockPath(t), "/lock")
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%c", root, 'a'+i)
	}
	return paths
}

func newMulti(t testing.TB, c *zklock.Client, paths ...string) *zklock.MultiLock {
	t.Helper()
	m, err := zklock.NewMultiLock(c, paths)
	must(t, err, "new multilock %v", paths)
	return m
}

// multiNode is the name of a MultiLock's node: a mutex node, Curator's.
var multiNode = regexp.MustCompile(`^_c_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-lock-\d{10}$`)

// A MultiLock's lease has one mutex node on every path, all with one uuid
// and made by one transaction (one czxid: the token), and releasing it
// frees every path.
func TestMultiLockReleaseFreesEveryPath(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	c := connect(t)
	m := newMulti(t, c, paths[2], paths[0], paths[1]) // any order
	if got := m.Paths(); strings.Join(got, " ") != strings.Join([]string{paths[2], paths[0], paths[1]}, " ") {
		t.Fatalf("Paths() = %v, want the order given", got)
	}
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if err := l.Err(); err != nil {
		t.Fatalf("Err() of a held lease: %v", err)
	}
	if !l.ValidUntil().After(time.Now()) {
		t.Fatalf("ValidUntil() %v of a held lease is not ahead", l.ValidUntil())
	}

	var uuid string
	for _, p := range paths {
		kids := children(t, c, p)
		if len(kids) != 1 {
			t.Fatalf("%s: children %v, want our one node", p, kids)
		}
		match := multiNode.FindStringSubmatch(kids[0])
		if match == nil {
			t.Fatalf("%s: node %q is not _c_<uuid>-lock-<seq>", p, kids[0])
		}
		if uuid == "" {
			uuid = match[1]
		} else if match[1] != uuid {
			t.Fatalf("%s: node %q has another uuid than %s", p, kids[0], uuid)
		}
		_, st, err := c.Conn().Get(p + "/" + kids[0])
		must(t, err)
		if st.Czxid != l.Token() {
			t.Fatalf("%s: node made by zxid %#x, lease token %#x: want one transaction", p, st.Czxid, l.Token())
		}
		if p == paths[2] && l.Node() != p+"/"+kids[0] {
			t.Fatalf("Node() = %s, want the node on the first path, %s", l.Node(), p+"/"+kids[0])
		}
		_, err = newMutex(t, connect(t), p).TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrLocked, "a mutex on %s while the multilock holds", p)
	}

	release(t, l)
	if !closed(l.Done()) {
		t.Fatal("Done() is open after Release")
	}
	mustIs(t, l.Err(), zklock.ErrReleased)
	mustIs(t, l.Release(ctxT(t)), zklock.ErrReleased, "second release")
	other := connect(t)
	for _, p := range paths {
		if kids := children(t, c, p); len(kids) != 0 {
			t.Fatalf("%s: nodes left after release: %v", p, kids)
		}
		ml, err := newMutex(t, other, p).TryAcquire(ctxT(t))
		must(t, err, "a mutex on %s after the release", p)
		release(t, ml)
	}
}

// While one path is held, a MultiLock waits and holds nothing; its nodes
// queue on the other paths, so those who come after it there wait behind
// it.
func TestMultiLockAllOrNothing(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	a, b, cc := paths[0], paths[1], paths[2]
	c := connect(t)
	held, err := newMutex(t, connect(t), b).Acquire(ctxT(t))
	must(t, err)

	multi := async(newMulti(t, connect(t), a, b, cc).Acquire, ctxT(t))
	queued(t, c, a, 1)
	queued(t, c, b, 2)
	queued(t, c, cc, 1)
	pending(t, multi)

	// A mutex that comes later on a, which the MultiLock has reached the
	// front of, queues behind it: first come, first served on each path.
	_, err = newMutex(t, connect(t), a).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a later TryAcquire on %s", a)
	later := async(newMutex(t, connect(t), a).Acquire, ctxT(t))
	queued(t, c, a, 2)
	pending(t, multi)
	pending(t, later)

	release(t, held)
	ml := await(t, multi)
	pending(t, later)
	release(t, ml)
	release(t, await(t, later))
	for _, p := range paths {
		if kids := children(t, c, p); len(kids) != 0 {
			t.Fatalf("%s: nodes left behind: %v", p, kids)
		}
	}
}

// A cancelled or timed-out Acquire leaves no node on any path; a done
// context makes no ZooKeeper call at all.
func TestMultiLockCancelLeavesNoNode(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	c := connect(t)
	held, err := newMutex(t, connect(t), paths[2]).Acquire(ctxT(t))
	must(t, err)
	m := newMulti(t, connect(t), paths...)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.Acquire(ctx)
	mustIs(t, err, context.Canceled)
	ok, _, err := c.Conn().Exists(paths[0])
	must(t, err)
	if ok {
		t.Fatal("an Acquire on a done context made a ZooKeeper call: the lock path exists")
	}

	ctx, cancel = context.WithCancel(context.Background())
	ch := async(m.Acquire, ctx)
	queued(t, c, paths[0], 1)
	queued(t, c, paths[1], 1)
	queued(t, c, paths[2], 2)
	cancel()
	r := returned(t, ch)
	mustIs(t, r.err, context.Canceled)
	mustIs(t, r.err, ctx.Err())
	for i, p := range paths {
		want := 0
		if i == 2 {
			want = 1 // the mutex's
		}
		if kids := children(t, c, p); len(kids) != want {
			t.Fatalf("%s: children %v after a cancelled acquire, want %d", p, kids, want)
		}
	}

	// The deadline ends the wait as a whole, not path by path.
	tctx, tcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer tcancel()
	_, err = m.Acquire(tctx)
	mustIs(t, err, context.DeadlineExceeded)
	for i, p := range paths {
		want := 0
		if i == 2 {
			want = 1
		}
		if kids := children(t, c, p); len(kids) != want {
			t.Fatalf("%s: children %v after a timed-out acquire, want %d", p, kids, want)
		}
	}
	release(t, held)
}

// TryAcquire never waits for anyone: ErrLocked if any path is taken, and no
// node left anywhere.
func TestMultiLockTryAcquire(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	c := connect(t)
	m := newMulti(t, connect(t), paths...)
	for _, taken := range paths {
		held, err := newMutex(t, connect(t), taken).Acquire(ctxT(t))
		must(t, err)
		_, err = m.TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrLocked, "TryAcquire while %s is held", taken)
		for _, p := range paths {
			want := 0
			if p == taken {
				want = 1
			}
			if kids := children(t, c, p); len(kids) != want {
				t.Fatalf("%s: children %v after a failed TryAcquire, want %d", p, kids, want)
			}
		}
		release(t, held)
	}
	l, err := m.TryAcquire(ctxT(t))
	must(t, err)
	_, err = newMulti(t, connect(t), paths[1]).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a second multilock on one of the paths")
	release(t, l)
}

// On an RWMutex's path a MultiLock's node is an exclusive node: it waits for
// the readers ahead of it, and the readers and writers that come after it
// wait for it.
func TestMultiLockExcludesRWMutex(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 2)
	a, b := paths[0], paths[1]
	c := connect(t)
	r1, err := newRW(t, connect(t), a).ReadLock().Acquire(ctxT(t))
	must(t, err)

	multi := async(newMulti(t, connect(t), b, a).Acquire, ctxT(t))
	queued(t, c, a, 2)
	queued(t, c, b, 1)
	pending(t, multi)

	r2 := async(newRW(t, connect(t), a).ReadLock().Acquire, ctxT(t))
	queued(t, c, a, 3)
	w := async(newRW(t, connect(t), b).WriteLock().Acquire, ctxT(t))
	queued(t, c, b, 2)
	pending(t, multi)
	pending(t, r2)
	pending(t, w)

	release(t, r1)
	ml := await(t, multi)
	pending(t, r2)
	pending(t, w)
	release(t, ml)
	release(t, await(t, r2))
	release(t, await(t, w))
}

// A MultiLock whose node on a path where it already holds is deleted (an
// operator clearing the path) while it waits for another path must not be
// granted a lease when that other path frees: someone else may hold the
// first path by then. It queues again on every path, behind whoever came
// meanwhile.
func TestMultiLockNodeDeletedWhileWaiting(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 2)
	a, b := paths[0], paths[1]
	c := connect(t)
	held, err := newMutex(t, connect(t), b).Acquire(ctxT(t))
	must(t, err)
	multi := async(newMulti(t, connect(t), a, b).Acquire, ctxT(t))
	queued(t, c, a, 1)
	queued(t, c, b, 2)
	node := a + "/" + children(t, c, a)[0]
	must(t, c.Conn().Delete(node, -1), "delete the multilock's node on %s", a)

	// a is free now: a mutex takes it, while the MultiLock still waits for b.
	x, err := newMutex(t, connect(t), a).TryAcquire(ctxT(t))
	must(t, err, "a mutex on %s, whose queue is empty", a)
	release(t, held)
	// The MultiLock finds its node on a gone, and queues again on both
	// paths: behind x on a, alone on b.
	eventually(t, func() bool {
		kids := children(t, c, a)
		return len(kids) == 2 && len(children(t, c, b)) == 1
	}, "the multilock queued again")
	pending(t, multi)
	release(t, x)
	l := await(t, multi)
	if l.Node() == node {
		t.Fatalf("granted a lease on the deleted node %s", node)
	}
	release(t, l)
}

// Bad input fails with ErrInvalidArgument, before any ZooKeeper call.
func TestMultiLockBadInput(t *testing.T) {
	t.Parallel()
	c := connect(t)
	paths := multiPaths(t, 2)
	a, b := paths[0], paths[1]
	for name, bad := range map[string][]string{
		"no paths":         {},
		"a bad path":       {a, "relative"},
		"the root":         {a, "/"},
		"a path twice":     {a, b, a},
		"a path inside":    {a, a + "/x"},
		"a path outside":   {a + "/x", b, a},
		"under /zookeeper": {a, "/zookeeper/x"},
	} {
		_, err := zklock.NewMultiLock(c, bad)
		mustIs(t, err, zklock.ErrInvalidArgument, "%s: %q", name, bad)
	}
	_, err := zklock.NewMultiLock(c, nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil paths")
	_, err = zklock.NewMultiLock(nil, paths)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil client")
	_, err = zklock.NewMultiLock(c, paths, nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil option")
	// Each node's data is within a Mutex's bound, but the one multi-operation
	// would carry three times as much.
	_, err = zklock.NewMultiLock(c, append(paths, b+"x"), zklock.WithNodeData(make([]byte, 200<<10)))
	mustIs(t, err, zklock.ErrInvalidArgument, "node data over 512 KiB in all")
	_, err = zklock.NewMultiLock(c, paths, zklock.WithNodeData(make([]byte, 200<<10)))
	must(t, err, "node data within 512 KiB in all")
	// a and a+"x" are siblings, not one inside the other.
	_, err = zklock.NewMultiLock(c, []string{a, a + "x"})
	must(t, err, "sibling paths")

	m := newMulti(t, c, paths...)
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = m.Acquire(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil context")
	//lint:ignore SA1012 a nil context is exactly the bad input under test
	_, err = m.TryAcquire(nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil context")
	for _, p := range paths {
		ok, _, err := c.Conn().Exists(p)
		must(t, err)
		if ok {
			t.Fatalf("bad input made a node: %s exists", p)
		}
	}
}

// A lease lost to a disconnect (WithLossOnDisconnect) ends at once, and
// the janitor deletes its nodes on every path once the session is back.
func TestMultiLockLostLeaseFreesEveryPath(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	a, fa := faulty(t, 10*time.Second, zklock.WithLossOnDisconnect())
	l, err := newMulti(t, a, paths...).Acquire(ctxT(t))
	must(t, err)
	fa.Drop()
	select {
	case <-l.Done():
	case <-time.After(long):
		t.Fatal("lease not lost on disconnect")
	}
	mustIs(t, l.Err(), zklock.ErrConnectionSuspended)
	c := connect(t)
	for _, p := range paths {
		p := p
		eventually(t, func() bool { return len(children(t, c, p)) == 0 },
			"the lost lease's node on %s is deleted after reconnecting", p)
	}
	mustIs(t, l.Release(ctxT(t)), zklock.ErrConnectionSuspended, "release of a lost lease")
}

// A waiter whose session expires queues again, on every path, in the new
// session.
func TestMultiLockWaiterRequeuesAfterExpiry(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 2)
	c := connect(t)
	held, err := newMutex(t, c, paths[1]).Acquire(ctxT(t))
	must(t, err)

	a, fa := faulty(t, time.Second)
	sid := a.SessionID()
	ch := async(newMulti(t, a, paths...).Acquire, ctxT(t))
	queued(t, c, paths[0], 1)
	queued(t, c, paths[1], 2)

	fa.Partition()
	queued(t, c, paths[0], 0) // the server expired the waiter's session
	queued(t, c, paths[1], 1)
	fa.Heal()
	eventually(t, func() bool { id := a.SessionID(); return id != sid && id != 0 }, "a new session")
	queued(t, c, paths[0], 1) // queued again
	queued(t, c, paths[1], 2)
	pending(t, ch)
	release(t, held)
	l := await(t, ch)
	for _, p := range paths {
		kids := children(t, c, p)
		if len(kids) != 1 {
			t.Fatalf("%s: children %v, want the lease's one node", p, kids)
		}
		_, stat, err := c.Conn().Get(p + "/" + kids[0])
		must(t, err)
		if stat.EphemeralOwner != a.SessionID() {
			t.Fatalf("%s: node owned by session %#x, want the new session %#x", p, stat.EphemeralOwner, a.SessionID())
		}
	}
	release(t, l)
}

// A multi-create whose reply is lost is found again by its protected id,
// on every path, and never left behind, even by an acquire that gives up.
func TestMultiLockLostCreateReplyLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	paths := multiPaths(t, 3)
	c := connect(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMulti(t, a, paths...)
	warm, err := m.Acquire(ctxT(t)) // parents exist, so the next multi is the create
	must(t, err)
	release(t, warm)

	fa.DropAfter(faults.OpMulti)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	for _, p := range paths {
		if kids := children(t, c, p); len(kids) != 1 {
			t.Fatalf("%s: want exactly our node, children %v", p, kids)
		}
	}
	release(t, l)

	// And a waiter that gives up after its create was cut off. One path
	// stays held, so the acquire can only end with its deadline.
	hl, err := newMutex(t, c, paths[1]).Acquire(ctxT(t))
	must(t, err)
	fa.DropAfter(faults.OpMulti)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = m.Acquire(ctx)
	mustIs(t, err, context.DeadlineExceeded)
	for i, p := range paths {
		p, want := p, 0
		if i == 1 {
			want = 1 // the holder's
		}
		eventually(t, func() bool { return len(children(t, c, p)) == want }, "%s: only the holder's node is left", p)
	}
	release(t, hl)
}

// Many clients take overlapping sets of paths, each listing them in its own
// random order: no two exclusive holders on a path at once, and no stall.
// Creating a MultiLock's nodes one by one in the caller's order instead of
// in one transaction makes this test stall (two callers' nodes then stand
// in opposite orders on two paths), and the watchdog fails it.
func TestMultiLockNoDeadlock(t *testing.T) {
	t.Parallel()
	stressMulti(t, stress{paths: 5, multis: 8, cycles: 30})
}

// The same, with ordinary participants on the same paths: a Mutex, a
// writer and readers of an RWMutex. Their creates are transactions too, in
// the one zxid order, so the argument holds for them as well. (Writing the
// MultiLock's nodes as readers' makes readers and MultiLocks overlap here
// in most runs; TestMultiLockExcludesRWMutex catches it every time.)
func TestMultiLockMixed(t *testing.T) {
	t.Parallel()
	stressMulti(t, stress{paths: 4, multis: 5, mutexes: 1, writers: 1, readers: 3, cycles: 30})
}

type stress struct {
	paths                                     int
	multis, mutexes, writers, readers, cycles int
}

// stressMulti runs the contenders of s, each its own Client and goroutine,
// for s.cycles acquisitions each. Multis take 2 or 3 of the paths in a
// random order; the others take one path at random. A watchdog fails the
// test if no acquisition completes for `long`.
func stressMulti(t *testing.T, s stress) {
	paths := multiPaths(t, s.paths)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)

	// Per path: exclusive holders and readers inside now, and the tokens of
	// successive exclusive holders.
	type pathState struct {
		excl, read atomic.Int32
		mu         sync.Mutex
		tokens     []int64
	}
	state := make(map[string]*pathState, len(paths))
	for _, p := range paths {
		state[p] = &pathState{}
	}
	var violations atomic.Int32
	violate := func(format string, args ...any) {
		violations.Add(1)
		t.Errorf(format, args...)
	}
	enter := func(held []string, read bool, token int64) {
		for _, p := range held {
			st := state[p]
			if read {
				st.read.Add(1)
				if n := st.excl.Load(); n != 0 {
					violate("%s: a reader holds with %d exclusive holders", p, n)
				}
				continue
			}
			if n := st.excl.Add(1); n != 1 {
				violate("%s: %d exclusive holders at once", p, n)
			}
			if n := st.read.Load(); n != 0 {
				violate("%s: an exclusive holder holds with %d readers", p, n)
			}
			st.mu.Lock()
			st.tokens = append(st.tokens, token)
			st.mu.Unlock()
		}
		runtime.Gosched() // let others run into the critical section, if they can
	}
	leave := func(held []string, read bool) {
		for _, p := range held {
			if read {
				state[p].read.Add(-1)
			} else {
				state[p].excl.Add(-1)
			}
		}
	}

	progress := make(chan struct{}, 1)
	// A contender picks, for each cycle, the paths it takes and the lock
	// that takes them.
	type pick func(c *zklock.Client, r *rand.Rand) (held []string, l zklock.Locker, read bool, err error)
	type contender struct {
		name string
		c    *zklock.Client
		next pick
	}
	var all []contender
	add := func(n int, name string, next pick) {
		for i := 0; i < n; i++ {
			all = append(all, contender{fmt.Sprintf("%s#%d", name, i), connect(t), next})
		}
	}
	one := func(r *rand.Rand) []string { return []string{paths[r.Intn(len(paths))]} }
	add(s.multis, "multi", func(c *zklock.Client, r *rand.Rand) ([]string, zklock.Locker, bool, error) {
		set := append([]string(nil), paths...)
		r.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
		set = set[:2+r.Intn(2)]
		m, err := zklock.NewMultiLock(c, set)
		return set, m, false, err
	})
	add(s.mutexes, "mutex", func(c *zklock.Client, r *rand.Rand) ([]string, zklock.Locker, bool, error) {
		held := one(r)
		m, err := zklock.NewMutex(c, held[0])
		return held, m, false, err
	})
	add(s.writers, "writer", func(c *zklock.Client, r *rand.Rand) ([]string, zklock.Locker, bool, error) {
		held := one(r)
		rw, err := zklock.NewRWMutex(c, held[0])
		if err != nil {
			return nil, nil, false, err
		}
		return held, rw.WriteLock(), false, nil
	})
	add(s.readers, "reader", func(c *zklock.Client, r *rand.Rand) ([]string, zklock.Locker, bool, error) {
		held := one(r)
		rw, err := zklock.NewRWMutex(c, held[0])
		if err != nil {
			return nil, nil, false, err
		}
		return held, rw.ReadLock(), true, nil
	})

	var wg sync.WaitGroup
	for i, ct := range all {
		ct, r := ct, rand.New(rand.NewSource(seed+int64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < s.cycles; j++ {
				held, locker, read, err := ct.next(ct.c, r)
				if err != nil {
					t.Errorf("%s: %v", ct.name, err)
					return
				}
				l, err := locker.Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: acquire %v: %v", ct.name, held, err)
					}
					return
				}
				enter(held, read, l.Token())
				leave(held, read)
				if err := l.Release(ctx); err != nil {
					t.Errorf("%s: release %v: %v", ct.name, held, err)
					return
				}
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	// The watchdog: every acquisition resets it; a stall fails the test,
	// shows the queues, and ends the wait.
	observer := connect(t)
	for done := false; !done; {
		stall := time.NewTimer(long)
		select {
		case <-finished:
			done = true
		case <-progress:
		case <-stall.C:
			var queues []string
			for _, p := range paths {
				kids, _, err := observer.Conn().Children(p)
				queues = append(queues, fmt.Sprintf("%s: %v %v", p, kids, err))
			}
			t.Errorf("no acquisition completed for %v: a deadlock? queues:\n%s", long, strings.Join(queues, "\n"))
			cancel()
			<-finished
			done = true
		}
		stall.Stop()
	}
	if t.Failed() {
		return
	}
	if n := violations.Load(); n != 0 {
		t.Fatalf("%d exclusion violations", n)
	}
	for _, p := range paths {
		st := state[p]
		for i := 1; i < len(st.tokens); i++ {
			if st.tokens[i] <= st.tokens[i-1] {
				t.Fatalf("%s: tokens of successive exclusive holders must increase: %#x after %#x", p, st.tokens[i], st.tokens[i-1])
			}
		}
		if kids := children(t, observer, p); len(kids) != 0 {
			t.Fatalf("%s: nodes left behind: %v", p, kids)
		}
	}
}
