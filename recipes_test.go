package zklock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/faults"
)

func TestMutexExclusion(t *testing.T) {
	t.Parallel()
	const clients, cycles = 8, 25
	path := lockPath(t)
	var (
		inside, violations atomic.Int32
		mu                 sync.Mutex
		tokens             []int64
	)
	hammer(t, clients, cycles, func() contender {
		m := newMutex(t, connect(t), path)
		return contender{acquire: one(m.Acquire), held: func(_ context.Context, ls []*zklock.Lease) error {
			if inside.Add(1) != 1 {
				violations.Add(1)
			}
			defer inside.Add(-1)
			mu.Lock()
			tokens = append(tokens, ls[0].Token())
			mu.Unlock()
			return nil
		}}
	})
	if n := violations.Load(); n != 0 {
		t.Fatalf("two holders at once, %d times", n)
	}
	if len(tokens) != clients*cycles {
		t.Fatalf("%d acquisitions, want %d", len(tokens), clients*cycles)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens must strictly increase across holders: #%d is %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	if kids := children(t, connect(t), path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// contender is one client of hammer: how it acquires, and what it checks
// while it holds.
type contender struct {
	acquire func(context.Context) ([]*zklock.Lease, error)
	held    func(context.Context, []*zklock.Lease) error // runs between acquire and release
}

// hammer runs clients goroutines, each with a contender from open (each its
// own Client), doing cycles of acquire, held, release. It fails the test if
// any step fails, or if the goroutines do not all finish in time.
func hammer(t *testing.T, clients, cycles int, open func() contender) {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				ls, err := c.acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.held(ctx, ls); err != nil {
					t.Error(err)
				}
				for _, l := range ls {
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * long):
		t.Fatal("contending clients did not finish: deadlock?")
	}
}

// one adapts a single-lease acquire to hammer.
func one(acquire func(context.Context) (*zklock.Lease, error)) func(context.Context) ([]*zklock.Lease, error) {
	return func(ctx context.Context) ([]*zklock.Lease, error) {
		l, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		return []*zklock.Lease{l}, nil
	}
}

func TestMutexFIFO(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	first, err := m.Acquire(ctxT(t))
	must(t, err)

	const waiters = 5
	ctx := ctxT(t)
	order := make(chan int, waiters)
	for i := 0; i < waiters; i++ {
		i := i
		wm := newMutex(t, connect(t), path)
		go func() {
			l, err := wm.Acquire(ctx)
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i // before releasing: the next waiter cannot have sent yet
			_ = l.Release(context.Background())
		}()
		queued(t, c, path, i+2) // queue them one after the other
	}
	release(t, first)
	for i := 0; i < waiters; i++ {
		select {
		case got := <-order:
			if got != i {
				t.Fatalf("FIFO order: waiter %d acquired in turn %d", got, i)
			}
		case <-time.After(long):
			t.Fatal("waiter did not acquire")
		}
	}
}

func TestTryAcquire(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.TryAcquire(ctxT(t))
	must(t, err)

	other := newMutex(t, connect(t), path)
	_, err = other.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked)
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("a failed TryAcquire leaves no node: children %v", kids)
	}

	release(t, l)
	l2, err := other.TryAcquire(ctxT(t))
	must(t, err)
	release(t, l2)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestAcquireOnDoneContextReturnsAtOnce(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Acquire(ctx)
	mustIs(t, err, context.Canceled)
	ok, _, err := c.Conn().Exists(path)
	must(t, err)
	if ok {
		t.Fatal("a ZooKeeper call was made: the lock path exists")
	}
}

func TestCancelledAcquireLeavesNoNode(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	w := newMutex(t, connect(t), path)

	// Deadline. The lock stays held throughout, so the acquire can only
	// end with its deadline, whenever that comes.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = w.Acquire(ctx)
	mustIs(t, err, context.DeadlineExceeded)
	mustIs(t, err, ctx.Err())
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("the timed-out waiter's node is gone: children %v", kids)
	}

	// Cancel while queued.
	ctx, cancel = context.WithCancel(context.Background())
	ch := async(w.Acquire, ctx)
	queued(t, c, path, 2)
	cancel()
	mustIs(t, returned(t, ch).err, context.Canceled)
	if kids := children(t, c, path); len(kids) != 1 {
		t.Fatalf("the cancelled waiter's node is gone: children %v", kids)
	}

	release(t, held)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestRWMutexReadersShare(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var leases []*zklock.Lease
	for i := 0; i < 3; i++ {
		rw := newRW(t, connect(t), path)
		l, err := rw.ReadLock().TryAcquire(ctxT(t))
		must(t, err, "readers share")
		leases = append(leases, l)
	}
	rw := newRW(t, connect(t), path)
	_, err := rw.WriteLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a writer excludes readers")
	parts, err := rw.Participants(ctxT(t))
	must(t, err)
	held, read := holders(parts)
	if want := []bool{true, true, true}; !slices.Equal(held, want) || !slices.Equal(read, want) {
		t.Fatalf("three holding readers: holder %v, read %v", held, read)
	}
	for _, l := range leases {
		release(t, l)
	}
}

func TestRWMutexWriterExcludes(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, c, path)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)

	other := newRW(t, connect(t), path)
	_, err = other.ReadLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a reader while a writer holds")
	_, err = other.WriteLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a writer while a writer holds")

	r := async(other.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	pending(t, r)
	release(t, w)
	release(t, await(t, r))
}

// A queued writer blocks the readers that arrive after it.
func TestRWMutexWriterBeforeLaterReaders(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, c, path)
	r1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)

	wrw := newRW(t, connect(t), path)
	w := async(wrw.WriteLock().Acquire, ctxT(t))
	queued(t, c, path, 2)

	rrw := newRW(t, connect(t), path)
	r2 := async(rrw.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 3)

	parts, err := rw.Participants(ctxT(t))
	must(t, err)
	held, read := holders(parts)
	if !slices.Equal(held, []bool{true, false, false}) || !slices.Equal(read, []bool{true, false, true}) {
		t.Fatalf("want reader holding, then writer and reader queued: holder %v, read %v", held, read)
	}
	pending(t, w)
	pending(t, r2)

	release(t, r1)
	wl := await(t, w)
	parts, err = rw.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, false}) {
		t.Fatalf("the later reader waits for the writer: holder %v", held)
	}
	pending(t, r2)

	release(t, wl)
	rl := await(t, r2)
	if !(rl.Token() > wl.Token() && wl.Token() > r1.Token()) {
		t.Fatalf("tokens must increase across conflicting holders: read %d, write %d, read %d",
			r1.Token(), wl.Token(), rl.Token())
	}
	release(t, rl)
}

// A reader is never blocked by a writer that queued after it.
func TestRWMutexReaderNotBlockedByLaterWriter(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, c, path)
	w1, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)

	rrw := newRW(t, connect(t), path)
	r := async(rrw.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	wrw := newRW(t, connect(t), path)
	w2 := async(wrw.WriteLock().Acquire, ctxT(t))
	queued(t, c, path, 3)

	release(t, w1)
	rl := await(t, r)
	pending(t, w2)
	release(t, rl)
	release(t, await(t, w2))
}

// Every lease gets used: max clients hold at once, and the next is refused
// until one lets go. And never more than max hold, at any acquisition, as
// the holders count themselves and as ZooKeeper's children say. No check
// depends on how the holders' timing happens to overlap.
func TestSemaphoreBound(t *testing.T) {
	t.Parallel()
	const max, clients, cycles = 2, 6, 10
	path := lockPath(t)
	c := connect(t)

	// max acquires from max sessions, at once: each returns while the
	// others still hold (nobody releases until all have returned), so all
	// max leases are held together.
	var all []*zklock.Lease
	var chs []<-chan result
	for i := 0; i < max; i++ {
		chs = append(chs, async(newSem(t, connect(t), path, max).Acquire, ctxT(t)))
	}
	for _, ch := range chs {
		all = append(all, await(t, ch))
	}
	parts, err := newSem(t, c, path, max).Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, true}) {
		t.Fatalf("want %d holders at once: holder %v", max, held)
	}
	extra := newSem(t, connect(t), path, max)
	_, err = extra.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "lease %d of %d", max+1, max)
	next := async(extra.Acquire, ctxT(t))
	queued(t, c, path, max+1)
	pending(t, next)
	release(t, all[0])
	all[0] = await(t, next)
	for _, l := range all {
		release(t, l)
	}

	// The bound, at every acquisition of clients contending for cycles each.
	var inside, over, unseen atomic.Int32
	hammer(t, clients, cycles, func() contender {
		s := newSem(t, connect(t), path, max)
		return contender{acquire: one(s.Acquire), held: func(ctx context.Context, ls []*zklock.Lease) error {
			if inside.Add(1) > max {
				over.Add(1)
			}
			defer inside.Add(-1)
			parts, err := s.Participants(ctx)
			if err != nil {
				return err
			}
			return checkHolders(parts, ls, max, &over, &unseen)
		}}
	})
	if n := over.Load(); n != 0 {
		t.Fatalf("more than maxLeases holders, %d times", n)
	}
	if n := unseen.Load(); n != 0 {
		t.Fatalf("a lease whose node ZooKeeper's children do not show holding, %d times", n)
	}
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// checkHolders counts, in over, a snapshot of parts with more than max
// holders and, in unseen, one where ours (held leases) are not all holders.
func checkHolders(parts []zklock.Participant, ours []*zklock.Lease, max int, over, unseen *atomic.Int32) error {
	n := 0
	holding := make(map[string]bool)
	for _, p := range parts {
		if p.Holder {
			n++
			holding[p.Node] = true
		}
	}
	if n > max {
		over.Add(1)
	}
	for _, l := range ours {
		if !holding[l.Node()] {
			unseen.Add(1)
			return fmt.Errorf("held lease %s is not a holder in %+v", l.Node(), parts)
		}
	}
	return nil
}

// Curator's deprecated InterProcessSemaphore leaves C asleep here: with 2
// leases and queue [A B C D], B's release must wake C at once.
func TestSemaphoreOutOfOrderRelease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	sem := func() *zklock.Semaphore { return newSem(t, connect(t), path, 2) }
	a, err := sem().Acquire(ctxT(t))
	must(t, err)
	b, err := sem().Acquire(ctxT(t))
	must(t, err)
	cc := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 3)
	d := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 4)
	pending(t, cc)

	release(t, b)
	cl := await(t, cc)
	pending(t, d)
	if closed(a.Done()) {
		t.Fatalf("A's lease ended: %v", a.Err())
	}

	release(t, a)
	dl := await(t, d)
	release(t, cl)
	release(t, dl)
}

// Three clients each asking for 2 of 3 leases must all finish: none may hold
// part of its request while it waits for the rest.
func TestSemaphoreAcquireN(t *testing.T) {
	t.Parallel()
	const max, n, clients, cycles = 3, 2, 3, 5
	path := lockPath(t)
	var inside, over, wrong, unseen atomic.Int32
	hammer(t, clients, cycles, func() contender {
		s := newSem(t, connect(t), path, max)
		return contender{
			acquire: func(ctx context.Context) ([]*zklock.Lease, error) { return s.AcquireN(ctx, n) },
			held: func(ctx context.Context, ls []*zklock.Lease) error {
				if len(ls) != n {
					wrong.Add(1)
				}
				if inside.Add(int32(len(ls))) > max {
					over.Add(1)
				}
				defer inside.Add(-int32(len(ls)))
				parts, err := s.Participants(ctx)
				if err != nil {
					return err
				}
				return checkHolders(parts, ls, max, &over, &unseen)
			},
		}
	})
	if k := wrong.Load(); k != 0 {
		t.Fatalf("AcquireN returned a part of its request, %d times", k)
	}
	if k := over.Load(); k != 0 {
		t.Fatalf("more than maxLeases held, %d times", k)
	}
	if k := unseen.Load(); k != 0 {
		t.Fatalf("a lease whose node ZooKeeper's children do not show holding, %d times", k)
	}
	if kids := children(t, connect(t), path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

func TestSemaphoreAcquireNWaitsWhole(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newSem(t, c, path, 3)
	one, err := s.Acquire(ctxT(t))
	must(t, err)
	two, err := s.Acquire(ctxT(t))
	must(t, err)

	s2 := newSem(t, connect(t), path, 3)
	ctx := ctxT(t)
	ch := make(chan []*zklock.Lease, 1)
	go func() {
		ls, err := s2.AcquireN(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		ch <- ls
	}()
	queued(t, c, path, 4)
	parts, err := s.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, true, false, false}) {
		t.Fatalf("a free lease is not taken by part of a request: holder %v", held)
	}
	release(t, one)
	var ls []*zklock.Lease
	select {
	case ls = <-ch:
	case <-time.After(long):
		t.Fatal("AcquireN did not finish")
	}
	if len(ls) != 2 {
		t.Fatalf("AcquireN(2) returned %d leases", len(ls))
	}
	if ls[0].Token() != ls[1].Token() {
		t.Fatalf("the leases of one AcquireN share a token: %d, %d", ls[0].Token(), ls[1].Token())
	}
	release(t, two)
	for _, l := range ls {
		release(t, l)
	}
}

func TestParticipants(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	data := []byte("holder")
	m := newMutex(t, c, path, zklock.WithNodeData(data))
	copy(data, "xxxxxx") // WithNodeData copied it
	parts, err := m.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 0 {
		t.Fatalf("no lock path yet, but participants %+v", parts)
	}

	l, err := m.Acquire(ctxT(t))
	must(t, err)
	w := newMutex(t, connect(t), path)
	ch := async(w.Acquire, ctxT(t))
	queued(t, c, path, 2)

	parts, err = m.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, false}) {
		t.Fatalf("want a holder and a waiter: %+v", parts)
	}
	if parts[0].Node != l.Node() {
		t.Fatalf("the holder is %s, want our %s", parts[0].Node, l.Node())
	}
	if !bytes.Equal(parts[0].Data, []byte("holder")) {
		t.Fatalf("holder's data %q, want %q as given to WithNodeData", parts[0].Data, "holder")
	}
	if !strings.Contains(string(parts[1].Data), "/") {
		t.Fatalf("default data is host/pid, got %q", parts[1].Data)
	}
	release(t, l)
	release(t, await(t, ch))
}

// A user's Driver (example_test.go's oldestFirst) writes mutex nodes, so it
// and a Mutex on the same path exclude each other, in one queue.
func TestNewLockUserDriver(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	lk, err := zklock.NewLock(c, path, oldestFirst{})
	must(t, err)
	l, err := lk.Acquire(ctxT(t))
	must(t, err)
	if !regexp.MustCompile(`/_c_[0-9a-f-]{36}-lock-\d{10}$`).MatchString(l.Node()) {
		t.Fatalf("a KindMutex driver writes mutex nodes, got %s", l.Node())
	}

	m := newMutex(t, connect(t), path)
	_, err = m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "a Mutex while the user's lock holds")
	ch := async(m.Acquire, ctxT(t))
	queued(t, c, path, 2)
	parts, err := lk.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); !slices.Equal(held, []bool{true, false}) || parts[0].Node != l.Node() {
		t.Fatalf("want our node holding, the Mutex queued: %+v", parts)
	}
	pending(t, ch)
	release(t, l)
	ml := await(t, ch)
	if ml.Token() <= l.Token() {
		t.Fatalf("tokens must increase: %d after %d", ml.Token(), l.Token())
	}
	_, err = lk.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "the user's lock while a Mutex holds")
	release(t, ml)
}

func TestNodeFormat(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	mutexNode := regexp.MustCompile(`^` + regexp.QuoteMeta(path) +
		`/_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$`)
	if !mutexNode.MatchString(l.Node()) {
		t.Fatalf("mutex node %s does not match %s", l.Node(), mutexNode)
	}
	_, stat, err := c.Conn().Get(l.Node())
	must(t, err)
	if stat.EphemeralOwner != c.SessionID() {
		t.Fatalf("node owned by session %#x, want ours %#x", stat.EphemeralOwner, c.SessionID())
	}
	if l.Token() != stat.Czxid {
		t.Fatalf("token %d, want the node's czxid %d", l.Token(), stat.Czxid)
	}
	release(t, l)

	rw := newRW(t, c, path+"rw")
	r, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	if !regexp.MustCompile(`/_c_[0-9a-f-]{36}-__READ__\d{10}$`).MatchString(r.Node()) {
		t.Fatalf("read node %s", r.Node())
	}
	release(t, r)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	if !regexp.MustCompile(`/_c_[0-9a-f-]{36}-__WRIT__\d{10}$`).MatchString(w.Node()) {
		t.Fatalf("write node %s", w.Node())
	}
	release(t, w)
}

func TestReleaseTwice(t *testing.T) {
	t.Parallel()
	m := newMutex(t, connect(t), lockPath(t))
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if err := l.Err(); err != nil {
		t.Fatalf("a held lease has Err %v", err)
	}
	if closed(l.Done()) {
		t.Fatal("a held lease is done")
	}
	must(t, l.Release(ctxT(t)))
	if !closed(l.Done()) {
		t.Fatal("a released lease is not done")
	}
	mustIs(t, l.Err(), zklock.ErrReleased)
	mustIs(t, l.Release(ctxT(t)), zklock.ErrReleased, "a second Release")
}

// Parents are container nodes, recreated if they vanish.
func TestParentsAreContainersAndComeBack(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
	must(t, c.Conn().Delete(path, -1)) // as the server's container reaper would
	l, err = m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
}

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

// A holder that loses its connection hears it (Done, Err) before anyone
// else can acquire; after the session expires, another client acquires.
// The lost lease keeps saying why it ended first: its deadline passed.
//
// The one real-time property of these tests, kept on purpose because it is
// the guarantee itself: the cut-off holder's deadline is at most 19/20 of
// the session timeout after a packet the server saw, and the server expires
// the session no sooner than a full timeout after it, so the holder must be
// done before the other client's Acquire returns.
func TestHolderSessionExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []zklock.Option
		want error
	}{
		{"deadline", nil, zklock.ErrLeaseExpired},
		{"loss on disconnect", []zklock.Option{zklock.WithLossOnDisconnect()}, zklock.ErrConnectionSuspended},
	} {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			a, fa := faulty(t, time.Second, tc.opts...)
			m := newMutex(t, a, path)
			held, err := m.Acquire(ctxT(t))
			must(t, err)
			sid := a.SessionID()

			bm := newMutex(t, connect(t), path)
			b := async(bm.Acquire, ctxT(t))
			queued(t, a, path, 2)

			fa.Partition()
			bl := await(t, b)
			if !closed(held.Done()) {
				t.Fatal("another client acquired before the cut-off holder heard that it may have lost the lock")
			}
			if err := held.Err(); !errors.Is(err, tc.want) {
				t.Fatalf("Err = %v, want %v", err, tc.want)
			}
			if bl.Token() <= held.Token() {
				t.Fatalf("tokens must increase: %d after %d", bl.Token(), held.Token())
			}
			if !held.ValidUntil().Before(time.Now()) {
				t.Fatalf("ValidUntil %v is not in the past", held.ValidUntil())
			}

			fa.Heal()
			eventually(t, func() bool { id := a.SessionID(); return id != sid && id != 0 },
				"the client learns that its session expired and gets a new one")
			// The client works again in its new session.
			ch := async(m.Acquire, ctxT(t))
			release(t, bl)
			release(t, await(t, ch))

			// By now the client has surely handled the expiry: the lease
			// still says what ended it.
			mustIs(t, held.Err(), tc.want, "Err after the session expired")
			if errors.Is(held.Err(), zklock.ErrSessionExpired) {
				t.Fatalf("Err changed after Done closed: %v", held.Err())
			}
			mustIs(t, held.Release(ctxT(t)), tc.want, "releasing the lost lease")
		})
	}
}

// With WithLossOnDisconnect, Done closes while the session lives on: a
// disconnect alone ends the lease, and its node is deleted once the
// connection is back.
func TestHolderDisconnectSuspendsLease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, 10*time.Second, zklock.WithLossOnDisconnect())
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sid := a.SessionID()

	fa.Drop()
	select {
	case <-held.Done():
	case <-time.After(long):
		t.Fatal("lease not lost on disconnect")
	}
	mustIs(t, held.Err(), zklock.ErrConnectionSuspended)
	c := connect(t)
	eventually(t, func() bool { return len(children(t, c, path)) == 0 },
		"the lost lease's node is deleted after reconnecting")
	if id := a.SessionID(); id != sid {
		t.Fatalf("session %#x, want the same session %#x", id, sid)
	}
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
}

// By default a lease rides out a disconnect: the same session comes back,
// the quorum confirms it again, and the lease goes on without a gap, its
// node untouched and its deadline moved forward. (A leader election or a
// rolling restart drops connections this way and keeps sessions.)
func TestLeaseRidesOutDisconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sid := a.SessionID()
	before := held.ValidUntil()
	if !before.After(time.Now()) {
		t.Fatalf("a fresh lease's deadline %v is not ahead", before)
	}

	dropped := time.Now()
	fa.Drop()
	eventually(t, func() bool {
		return closed(held.Done()) || held.ValidUntil().After(dropped.Add(time.Second))
	}, "the lease is confirmed again after the drop, or lost")
	must(t, held.Err(), "the lease after the drop")
	if id := a.SessionID(); id != sid {
		t.Fatalf("session %#x, want the same session %#x", id, sid)
	}
	if kids := children(t, connect(t), path); len(kids) != 1 || path+"/"+kids[0] != held.Node() {
		t.Fatalf("children %v, want only the held node", kids)
	}
	_, err = newMutex(t, connect(t), path).TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "the lock is still held")
	release(t, held)
}

// A waiter whose session expires queues again in its new session.
func TestWaiterRequeuesAfterExpiry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	a, fa := faulty(t, time.Second)
	am := newMutex(t, a, path)
	sid := a.SessionID()
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	queued(t, c, path, 1) // the server expired the waiter's session
	fa.Heal()
	eventually(t, func() bool { id := a.SessionID(); return id != sid && id != 0 }, "a new session")
	queued(t, c, path, 2) // queued again
	release(t, held)
	l := await(t, ch)
	_, stat, err := c.Conn().Get(l.Node())
	must(t, err)
	if stat.EphemeralOwner != a.SessionID() {
		t.Fatalf("node owned by session %#x, want the new session %#x", stat.EphemeralOwner, a.SessionID())
	}
	release(t, l)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// A waiter re-reads the children after a reconnect: a release it missed
// while disconnected still wakes it.
func TestWaiterRereadsAfterReconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)

	a, fa := faulty(t, 10*time.Second)
	am := newMutex(t, a, path)
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	eventually(t, func() bool { return a.Conn().State() != zk.StateHasSession }, "the waiter notices the partition")
	release(t, held)
	fa.Heal()
	release(t, await(t, ch))
}

// A connection drop between a create and its reply leaves no orphan: the
// node is found again by its protected id.
func TestDropDuringCreateLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a, fa := faulty(t, 10*time.Second)

	m := newMutex(t, a, path)
	warm, err := m.Acquire(ctxT(t)) // parents exist, so the next request is the create
	must(t, err)
	release(t, warm)

	fa.DropAfter(faults.OpCreate)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if kids := children(t, c, path); !slices.Equal(kids, []string{l.Node()[len(path)+1:]}) {
		t.Fatalf("want exactly our node %s, children %v", l.Node(), kids)
	}
	release(t, l)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}

	s := newSem(t, a, path+"sem", 3)
	warmN, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	for _, l := range warmN {
		release(t, l)
	}
	fa.DropAfter(faults.OpMulti)
	ls, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	if kids := children(t, c, path+"sem"); len(kids) != 2 {
		t.Fatalf("want exactly our 2 nodes, children %v", kids)
	}
	for _, l := range ls {
		release(t, l)
	}
	if kids := children(t, c, path+"sem"); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}

	// And a waiter cancelled after its create was cut off. The mutex stays
	// held, so the acquire can only end with its deadline.
	h := newMutex(t, c, path)
	hl, err := h.Acquire(ctxT(t))
	must(t, err)
	fa.DropAfter(faults.OpCreate)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = m.Acquire(ctx)
	mustIs(t, err, context.DeadlineExceeded)
	eventually(t, func() bool { return len(children(t, c, path)) == 1 }, "only the holder's node is left")
	release(t, hl)
}

func TestClientClose(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, err := zklock.Connect(ctxT(t), servers(t))
	must(t, err)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sem := newSem(t, a, path+"sem", 1)
	s1, err := sem.Acquire(ctxT(t))
	must(t, err)
	waiting := async(sem.Acquire, ctxT(t))
	queued(t, connect(t), path+"sem", 2)

	must(t, a.Close())
	if !closed(held.Done()) {
		t.Fatal("a lease of a closed Client is not done")
	}
	mustIs(t, held.Err(), zklock.ErrClientClosed)
	mustIs(t, s1.Err(), zklock.ErrClientClosed)
	mustIs(t, returned(t, waiting).err, zklock.ErrClientClosed, "a waiter when the Client closes")
	_, err = m.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrClientClosed)
	must(t, a.Close(), "Close twice")
	c := connect(t)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// An acquire that gives up (its ctx ends) while the fate of its create is
// unknown, because the reply was cut off, must still delete the node the
// create may have made: only its protected id names it. Left behind, it
// would hold the mutex for everyone until the client closed.
func TestGiveUpAfterLostCreateReplyLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMutex(t, a, path)
	warm, err := m.Acquire(ctxT(t)) // parents exist, so the next request is the create
	must(t, err)
	release(t, warm)

	h := newMutex(t, c, path)
	held, err := h.Acquire(ctxT(t))
	must(t, err)
	fa.DropAfter(faults.OpCreate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := async(m.Acquire, ctx)
	// The create reached the server and its connection dropped before the
	// reply. Keep the client from reconnecting (go-zookeeper pauses a second
	// before it redials a lone server, so the partition comes first), and
	// give up while it cannot know what became of the create.
	eventually(t, func() bool { return a.Conn().State() != zk.StateHasSession }, "the client notices the drop")
	fa.Partition()
	cancel()
	mustIs(t, returned(t, ch).err, context.Canceled)
	release(t, held)
	fa.Heal()
	eventually(t, func() bool { return len(children(t, c, path)) == 0 },
		"the cut-off create's node is deleted once the client reconnects")
	l, err := h.Acquire(ctxT(t))
	must(t, err, "the mutex is free")
	release(t, l)
}

func newMutex(t testing.TB, c *zklock.Client, path string, opts ...zklock.LockOption) *zklock.Mutex {
	t.Helper()
	m, err := zklock.NewMutex(c, path, opts...)
	must(t, err, "new mutex %s", path)
	return m
}

func newRW(t testing.TB, c *zklock.Client, path string) *zklock.RWMutex {
	t.Helper()
	rw, err := zklock.NewRWMutex(c, path)
	must(t, err, "new rwmutex %s", path)
	return rw
}

func newSem(t testing.TB, c *zklock.Client, path string, max int) *zklock.Semaphore {
	t.Helper()
	s, err := zklock.NewSemaphore(c, path, max)
	must(t, err, "new semaphore %s", path)
	return s
}

// TryAcquireN takes n leases only if they are all free now, and leaves no
// node behind when they are not.
func TestSemaphoreTryAcquireN(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s := newSem(t, c, path, 3)
	held, err := s.AcquireN(ctxT(t), 2)
	must(t, err)
	_, err = newSem(t, connect(t), path, 3).TryAcquireN(ctxT(t), 2)
	mustIs(t, err, zklock.ErrLocked, "two leases of three with two held")
	if kids := children(t, c, path); len(kids) != 2 {
		t.Fatalf("children %v: want only the holder's two", kids)
	}
	for _, l := range held {
		release(t, l)
	}
	got, err := newSem(t, connect(t), path, 3).TryAcquireN(ctxT(t), 3)
	must(t, err, "all three leases, free")
	if len(got) != 3 {
		t.Fatalf("%d leases, want 3", len(got))
	}
	for _, l := range got {
		release(t, l)
	}
	_, err = s.TryAcquireN(ctxT(t), 4)
	mustIs(t, err, zklock.ErrInvalidArgument, "n above maxLeases")
}
