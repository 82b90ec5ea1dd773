package zklock_test

// Rolling resizes of a zklock-layout semaphore, on a real ZooKeeper:
// replicas made with different sizes on one path (docs/semantics.md,
// "Resizing a semaphore"), and kazoo's layout, which keeps one size.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

// fleet tracks the leases a mixed fleet of replicas holds, and the nodes
// its size-2 replicas have queued (from their Clients' Trace.Queued), under
// one lock, so that a grant sees the counts of one moment.
type fleet struct {
	mu     sync.Mutex
	held   map[string]fleetLease // by node
	queued map[int]string        // size-2 replica -> its waiting node
}

type fleetLease struct {
	size  int
	token int64 // the zxid of the read that granted it
}

// grantCheck is what a grant saw: the leases held with it, how many by 2s,
// the largest of their tokens, and the nodes the 2s were waiting on.
type grantCheck struct {
	all, twos int
	newest    int64
	waiting   []string
}

func newFleet() *fleet {
	return &fleet{held: map[string]fleetLease{}, queued: map[int]string{}}
}

// trace records size-2 replica r's waiting node.
func (f *fleet) trace(r int) *zklock.Trace {
	set := func(node string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if node == "" {
			delete(f.queued, r)
		} else {
			f.queued[r] = node
		}
	}
	return &zklock.Trace{
		Queued:   func(i zklock.AcquireInfo) { set(i.Node) },
		Acquired: func(zklock.AcquireInfo) { set("") },
		Failed:   func(zklock.AcquireInfo) { set("") },
	}
}

// grant counts a lease just granted.
func (f *fleet) grant(l *zklock.Lease, size int) grantCheck {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[l.Node()] = fleetLease{size, l.Token()}
	var g grantCheck
	for _, h := range f.held {
		g.all++
		if h.size == 2 {
			g.twos++
		}
		g.newest = max(g.newest, h.token)
	}
	for _, node := range f.queued {
		g.waiting = append(g.waiting, node)
	}
	return g
}

// end uncounts a lease about to be released.
func (f *fleet) end(l *zklock.Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, l.Node())
}

// over says what is over the bound in g, if anything: more than 3 leases;
// more than 2 while a 2 holds; or more than 2 while a 2 waits on a node
// that the read granting any of the leases listed (it was made before that
// read, czxid at most the read's pzxid, the token, and is still there):
// only leases all granted before the 2 queued may be more than 2
// (docs/semantics.md, "Resizing").
func (g grantCheck) over(c *zklock.Client) string {
	switch {
	case g.all > 3:
		return fmt.Sprintf("%d leases held", g.all)
	case g.all > 2 && g.twos > 0:
		return fmt.Sprintf("%d leases held, %d of them by 2s", g.all, g.twos)
	case g.all <= 2:
		return ""
	}
	for _, node := range g.waiting {
		ok, st, err := c.Conn().Exists(node)
		if err == nil && ok && st.Czxid <= g.newest {
			return fmt.Sprintf("%d leases held, one granted on a read (pzxid %#x) that listed a 2 waiting (%s, made at %#x)", g.all, g.newest, node, st.Czxid)
		}
	}
	return ""
}

// A rolling resize from 2 to 3: replicas of both sizes, each on its own
// Client, acquire and release in loops on one path. None fails for its
// size; at every grant, never more than 3 leases are held, and no more
// than 2 while a size-2 replica holds one or waits on a node that the
// read granting any of them listed ([grantCheck.over]); and once the 2s' participants
// are gone, 3 leases are held at once, and no fourth.
//
// The counts are taken inside each lease's life (after Acquire returns,
// before Release is called), so at any moment the leases counted are
// among those ZooKeeper's queue lets hold: a count over the bound is a
// grant the rule forbids, whatever the timing.
func TestSemaphoreRollingResize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	const cycles = 30
	sizes := []int{2, 3, 2, 3, 3}
	var (
		fl       = newFleet()
		over     atomic.Int32
		overDesc atomic.Value
		mixed    atomic.Int32 // grants while both sizes had participants holding
	)
	var wg sync.WaitGroup
	ctx := ctxT(t)
	for r, size := range sizes {
		var opts []zklock.Option
		if size == 2 {
			opts = append(opts, zklock.WithTrace(fl.trace(r)))
		}
		c := connect(t, opts...)
		s := newSem(t, c, path, size)
		wg.Add(1)
		go func(size int) {
			defer wg.Done()
			for i := 0; i < cycles; i++ {
				l, err := s.Acquire(ctx)
				if err != nil {
					t.Errorf("a replica of size %d: %v", size, err)
					return
				}
				g := fl.grant(l, size)
				if desc := g.over(c); desc != "" {
					over.Add(1)
					overDesc.Store(desc)
				}
				if g.twos > 0 && g.all > g.twos {
					mixed.Add(1)
				}
				// Hold across a request: ZooKeeper's view of the queue
				// shows our node holding, with its size.
				ps, err := s.Participants(ctx)
				if err == nil {
					err = shownHolding(ps, l, size)
				}
				if err != nil {
					t.Error(err)
				}
				// Holds of different lengths, so that leases free out of
				// queue order and waiters meet sizes queued behind them.
				time.Sleep(time.Duration(i%5) * time.Millisecond)
				fl.end(l)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}(size)
	}
	waitGroup(t, &wg, "the replicas did not finish their cycles")
	if n := over.Load(); n != 0 {
		t.Fatalf("over the bound %d times, the last: %v", n, overDesc.Load())
	}
	t.Logf("%d grants while replicas of both sizes held", mixed.Load())

	// The 2s are still running, with no participant on the path: 3 is
	// in force.
	var ls []*zklock.Lease
	for i := 0; i < 3; i++ {
		l, err := newSem(t, connect(t), path, 3).TryAcquire(ctxT(t))
		must(t, err, "lease %d of 3, once the 2s are gone", i+1)
		ls = append(ls, l)
	}
	_, err := newSem(t, connect(t), path, 3).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a fourth lease of 3")
	ps, err := newSem(t, connect(t), path, 3).Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 3 || len(ps) != 3 {
		t.Fatalf("size in force %d over %d participants, want 3 over 3", n, len(ps))
	}
	for _, l := range ls {
		release(t, l)
	}
}

// shownHolding checks that ps shows l's node holding, with size.
func shownHolding(ps []zklock.Participant, l *zklock.Lease, size int) error {
	for _, p := range ps {
		if p.Node == l.Node() {
			if !p.Holder || p.Size != size {
				return fmt.Errorf("lease %s: shown holder %v, size %d; want holding, size %d", l.Node(), p.Holder, p.Size, size)
			}
			return nil
		}
	}
	return fmt.Errorf("lease %s is not among the participants", l.Node())
}

// TryAcquire under mixed sizes: a lease is free to a participant of any
// size when fewer are held than the smallest size among the holders and
// its own, and it is never held back by a size queued behind it.
func TestSemaphoreResizeTryAcquire(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s2, s3 := newSem(t, connect(t), path, 2), newSem(t, connect(t), path, 3)
	a2, err := s2.TryAcquire(ctxT(t))
	must(t, err)
	b2, err := s2.TryAcquire(ctxT(t))
	must(t, err)
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind two 2s")
	release(t, a2)
	c3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a 3 beside one 2")
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a second 3 while a 2 holds")
	release(t, b2)
	d3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a second 3 once the 2s are gone")
	e3, err := s3.TryAcquire(ctxT(t))
	must(t, err, "a third 3")
	_, err = s2.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 2 behind three holders")
	queued(t, c, path, 3) // the refused tries left nothing

	// A 2 queues behind the three: 2 is in force for whoever comes next.
	w2 := async(s2.Acquire, ctxT(t))
	queued(t, c, path, 4)
	ps, err := s3.Participants(ctxT(t))
	must(t, err)
	if n := zklock.SizeInForce(ps); n != 2 {
		t.Fatalf("size in force %d with a 2 queued, want 2", n)
	}
	release(t, c3) // [D3 E3 W2]: the 2 is third
	pending(t, w2)
	_, err = s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a 3 behind a queued 2")
	release(t, d3) // [E3 W2]
	w := await(t, w2)
	release(t, e3)
	release(t, w)
}

// An emptied path takes the next size at once: after every participant
// of size 2 has left, 3 leases are held together at once, on the path
// ZooKeeper has not reaped yet (its container manager runs every minute
// by default), with no wait for it. Whatever the path's data says is
// left as it is and refuses nobody.
func TestSemaphoreEmptiedPathTakesANewSize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s2 := newSem(t, connect(t), path, 2)
	for _, l := range acquireN(t, s2.TryAcquire, 2) {
		release(t, l)
	}
	queued(t, c, path, 0)
	s3 := newSem(t, connect(t), path, 3)
	ls := acquireN(t, s3.TryAcquire, 3)
	_, err := s3.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a fourth lease of 3")
	for _, l := range ls {
		release(t, l)
	}

	// A path made with data that reads as a size (by an older build, or
	// someone else): zklock's layout neither refuses nor rewrites it.
	for _, data := range []string{"2", "5", "-1", "a$", ""} {
		path := lockPath(t)
		mkParents(t, c, path)
		_, err := c.Conn().Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll))
		must(t, err)
		ls := acquireN(t, newSem(t, connect(t), path, 3).TryAcquire, 3)
		if got, _, err := c.Conn().Get(path); err != nil || string(got) != data {
			t.Fatalf("data %q became %q (%v)", data, got, err)
		}
		for _, l := range ls {
			release(t, l)
		}
	}
}

// kazoo's layout keeps kazoo's rule: one size, recorded in the path's
// data; a Semaphore of another size fails with ErrSizeMismatch, naming
// both sizes, and creates nothing.
func TestSemaphoreKazooLayoutRefusesAnotherSize(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	kazoo := zklock.WithSemaphoreLayout(zklock.LayoutKazoo)
	l, err := newLayoutSem(t, connect(t), path, 3, kazoo).Acquire(ctxT(t))
	must(t, err)
	s2 := newLayoutSem(t, connect(t), path, 2, kazoo)
	for _, acquire := range []func(context.Context) (*zklock.Lease, error){s2.Acquire, s2.TryAcquire} {
		_, err = acquire(ctxT(t))
		mustIs(t, err, zklock.ErrSizeMismatch, "a kazoo-layout semaphore of 2 on a path of 3")
		if msg := err.Error(); !strings.Contains(msg, `"3"`) || !strings.Contains(msg, "not 2") {
			t.Fatalf("the error does not name both sizes: %v", err)
		}
	}
	queued(t, c, path, 1)
	queued(t, c, path+"-__lock__", 0)
	release(t, l)
}

// A smaller size that queues holds back the waiters ahead of it that a
// lease would put over it: a 3 waiting ahead of a newly queued 2 does not
// take the lease that frees while it is third (three would then be held
// with the 2 queued); it holds once it is second, and the 2 waits until
// fewer than 2 are ahead of it. That the 3 waits is looked at after a
// pause: the test can miss a wrong grant, never see one where there is
// none (TestFakeSemaphoreSmallerNewcomerHoldsBack sees the wait itself).
func TestSemaphoreSmallerNewcomerHoldsBack(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s3 := newSem(t, connect(t), path, 3)
	held := acquireN(t, s3.Acquire, 3)
	w3 := async(s3.Acquire, ctxT(t))
	queued(t, c, path, 4)
	w2 := async(newSem(t, connect(t), path, 2).Acquire, ctxT(t))
	queued(t, c, path, 5)
	release(t, held[0]) // [3 3 W3 W2]: W3 is third, below every size up to it, not below 2
	time.Sleep(200 * time.Millisecond)
	pending(t, w3)
	release(t, held[1]) // [3 W3 W2]: W3 is second
	l3 := await(t, w3)
	pending(t, w2)
	release(t, held[2]) // [W3 W2]
	l2 := await(t, w2)
	release(t, l3)
	release(t, l2)
}
