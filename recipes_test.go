package zklock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
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
	hammer(t, clients, cycles, func() (func(context.Context) ([]*zklock.Lease, error), error) {
		m, err := zklock.NewMutex(connect(t), path)
		return one(m.Acquire), err
	}, func([]*zklock.Lease) func() {
		if inside.Add(1) != 1 {
			violations.Add(1)
		}
		return func() { inside.Add(-1) }
	}, func(ls []*zklock.Lease) {
		mu.Lock()
		tokens = append(tokens, ls[0].Token())
		mu.Unlock()
	})
	require.Zero(t, violations.Load(), "two holders at once")
	require.Len(t, tokens, clients*cycles)
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "tokens must strictly increase across holders")
	}
	require.Empty(t, children(t, connect(t), path), "no node left behind")
}

// hammer runs clients goroutines, each with its own acquire function from
// open (each its own Client), doing cycles of acquire, enter (which returns
// its exit), release. record runs inside the critical section. It fails the
// test if the goroutines do not all finish in time.
func hammer(t *testing.T, clients, cycles int,
	open func() (func(context.Context) ([]*zklock.Lease, error), error),
	enter func([]*zklock.Lease) func(), record func([]*zklock.Lease),
) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		acquire, err := open()
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				ls, err := acquire(ctxT(t))
				if err != nil {
					t.Error(err)
					return
				}
				exit := enter(ls)
				if record != nil {
					record(ls)
				}
				exit()
				for _, l := range ls {
					if err := l.Release(ctxT(t)); err != nil {
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
	require.NoError(t, err)

	const waiters = 5
	order := make(chan int, waiters)
	for i := 0; i < waiters; i++ {
		wm := newMutex(t, connect(t), path)
		go func() {
			l, err := wm.Acquire(ctxT(t))
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i
			_ = l.Release(context.Background())
		}()
		queued(t, c, path, i+2) // queue them one after the other
	}
	release(t, first)
	for i := 0; i < waiters; i++ {
		select {
		case got := <-order:
			require.Equal(t, i, got, "FIFO order")
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
	require.NoError(t, err)

	other := newMutex(t, connect(t), path)
	_, err = other.TryAcquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.Len(t, children(t, c, path), 1, "a failed TryAcquire leaves no node")

	release(t, l)
	l2, err := other.TryAcquire(ctxT(t))
	require.NoError(t, err)
	release(t, l2)
	require.Empty(t, children(t, c, path))
}

func TestAcquireOnDoneContextReturnsAtOnce(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	ok, _, err := c.Conn().Exists(path)
	require.NoError(t, err)
	require.False(t, ok, "no ZooKeeper call was made")
}

func TestCancelledAcquireLeavesNoNode(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)

	w := newMutex(t, connect(t), path)

	// Deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = w.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ctx.Err())
	require.Len(t, children(t, c, path), 1, "the timed-out waiter's node is gone")

	// Cancel while queued.
	ctx, cancel = context.WithCancel(context.Background())
	ch := async(w.Acquire, ctx)
	queued(t, c, path, 2)
	cancel()
	r := <-ch
	require.ErrorIs(t, r.err, context.Canceled)
	require.Len(t, children(t, c, path), 1, "the cancelled waiter's node is gone")

	release(t, held)
	require.Empty(t, children(t, c, path))
}

func TestRWMutexReadersShare(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var leases []*zklock.Lease
	for i := 0; i < 3; i++ {
		rw := newRW(t, connect(t), path)
		l, err := rw.ReadLock().TryAcquire(ctxT(t))
		require.NoError(t, err, "readers share")
		leases = append(leases, l)
	}
	rw := newRW(t, connect(t), path)
	_, err := rw.WriteLock().TryAcquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrLocked, "a writer excludes readers")
	parts, err := rw.Participants(ctxT(t))
	require.NoError(t, err)
	require.Len(t, parts, 3)
	for _, p := range parts {
		require.True(t, p.Holder)
		require.True(t, p.Read)
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
	require.NoError(t, err)

	other := newRW(t, connect(t), path)
	_, err = other.ReadLock().TryAcquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrLocked)
	_, err = other.WriteLock().TryAcquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrLocked)

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
	require.NoError(t, err)

	wrw := newRW(t, connect(t), path)
	w := async(wrw.WriteLock().Acquire, ctxT(t))
	queued(t, c, path, 2)

	rrw := newRW(t, connect(t), path)
	r2 := async(rrw.ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 3)

	parts, err := rw.Participants(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false}, []bool{parts[0].Holder, parts[1].Holder, parts[2].Holder})
	require.Equal(t, []bool{true, false, true}, []bool{parts[0].Read, parts[1].Read, parts[2].Read})
	pending(t, w)
	pending(t, r2)

	release(t, r1)
	wl := await(t, w)
	parts, err = rw.Participants(ctxT(t))
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.False(t, parts[1].Holder, "the later reader waits for the writer")
	pending(t, r2)

	release(t, wl)
	rl := await(t, r2)
	require.Greater(t, rl.Token(), wl.Token())
	require.Greater(t, wl.Token(), r1.Token())
	release(t, rl)
}

// A reader is never blocked by a writer that queued after it.
func TestRWMutexReaderNotBlockedByLaterWriter(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, c, path)
	w1, err := rw.WriteLock().Acquire(ctxT(t))
	require.NoError(t, err)

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

func TestSemaphoreBound(t *testing.T) {
	t.Parallel()
	const max, clients, cycles = 2, 6, 10
	path := lockPath(t)
	var inside, peak, over atomic.Int32
	hammer(t, clients, cycles, func() (func(context.Context) ([]*zklock.Lease, error), error) {
		s, err := zklock.NewSemaphore(connect(t), path, max)
		return one(s.Acquire), err
	}, func([]*zklock.Lease) func() {
		n := inside.Add(1)
		if n > max {
			over.Add(1)
		}
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond) // hold a little, so holders overlap
		return func() { inside.Add(-1) }
	}, nil)
	require.Zero(t, over.Load(), "more than maxLeases holders")
	require.EqualValues(t, max, peak.Load(), "all leases were used")
}

// Curator's deprecated InterProcessSemaphore leaves C asleep here: with 2
// leases and queue [A B C D], B's release must wake C at once.
func TestSemaphoreOutOfOrderRelease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	sem := func() *zklock.Semaphore {
		s, err := zklock.NewSemaphore(connect(t), path, 2)
		require.NoError(t, err)
		return s
	}
	a, err := sem().Acquire(ctxT(t))
	require.NoError(t, err)
	b, err := sem().Acquire(ctxT(t))
	require.NoError(t, err)
	cc := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 3)
	d := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 4)
	pending(t, cc)

	release(t, b)
	cl := await(t, cc)
	pending(t, d)
	require.False(t, closed(a.Done()))

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
	var inside, over, wrong atomic.Int32
	hammer(t, clients, cycles, func() (func(context.Context) ([]*zklock.Lease, error), error) {
		s, err := zklock.NewSemaphore(connect(t), path, max)
		return func(ctx context.Context) ([]*zklock.Lease, error) { return s.AcquireN(ctx, n) }, err
	}, func(ls []*zklock.Lease) func() {
		if len(ls) != n {
			wrong.Add(1)
		}
		if inside.Add(n) > max {
			over.Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		return func() { inside.Add(-n) }
	}, nil)
	require.Zero(t, wrong.Load(), "AcquireN returned a part")
	require.Zero(t, over.Load())
	require.Empty(t, children(t, connect(t), path))
}

func TestSemaphoreAcquireNWaitsWhole(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s, err := zklock.NewSemaphore(c, path, 3)
	require.NoError(t, err)
	one, err := s.Acquire(ctxT(t))
	require.NoError(t, err)
	two, err := s.Acquire(ctxT(t))
	require.NoError(t, err)

	s2, err := zklock.NewSemaphore(connect(t), path, 3)
	require.NoError(t, err)
	ch := make(chan []*zklock.Lease, 1)
	go func() {
		ls, err := s2.AcquireN(ctxT(t), 2)
		if err != nil {
			t.Error(err)
		}
		ch <- ls
	}()
	queued(t, c, path, 4)
	parts, err := s.Participants(ctxT(t))
	require.NoError(t, err)
	require.Len(t, parts, 4)
	require.Equal(t, []bool{true, true, false, false},
		[]bool{parts[0].Holder, parts[1].Holder, parts[2].Holder, parts[3].Holder},
		"a free lease is not taken by part of a request")
	release(t, one)
	var ls []*zklock.Lease
	select {
	case ls = <-ch:
	case <-time.After(long):
		t.Fatal("AcquireN did not finish")
	}
	require.Len(t, ls, 2)
	require.Equal(t, ls[0].Token(), ls[1].Token())
	release(t, two)
	for _, l := range ls {
		release(t, l)
	}
}

func TestParticipants(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m, err := zklock.NewMutex(c, path, zklock.WithNodeData([]byte("holder")))
	require.NoError(t, err)
	parts, err := m.Participants(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, parts, "no lock path yet")

	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	w := newMutex(t, connect(t), path)
	ch := async(w.Acquire, ctxT(t))
	queued(t, c, path, 2)

	parts, err = m.Participants(ctxT(t))
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Equal(t, l.Node(), parts[0].Node)
	require.True(t, parts[0].Holder)
	require.Equal(t, []byte("holder"), parts[0].Data)
	require.False(t, parts[1].Holder)
	require.Contains(t, string(parts[1].Data), "/", "default data is host/pid")
	release(t, l)
	release(t, await(t, ch))
}

func TestNodeFormat(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	require.Regexp(t, `^`+path+`/_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$`, l.Node())
	_, stat, err := c.Conn().Get(l.Node())
	require.NoError(t, err)
	require.Equal(t, c.SessionID(), stat.EphemeralOwner)
	require.Equal(t, stat.Czxid, l.Token())
	release(t, l)

	rw := newRW(t, c, path+"rw")
	r, err := rw.ReadLock().Acquire(ctxT(t))
	require.NoError(t, err)
	require.Regexp(t, `/_c_[0-9a-f-]{36}-__READ__\d{10}$`, r.Node())
	release(t, r)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	require.NoError(t, err)
	require.Regexp(t, `/_c_[0-9a-f-]{36}-__WRIT__\d{10}$`, w.Node())
	release(t, w)
}

func TestReleaseTwice(t *testing.T) {
	t.Parallel()
	m, err := zklock.NewMutex(connect(t), lockPath(t))
	require.NoError(t, err)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	require.Nil(t, l.Err())
	require.False(t, closed(l.Done()))
	require.NoError(t, l.Release(ctxT(t)))
	require.True(t, closed(l.Done()))
	require.ErrorIs(t, l.Err(), zklock.ErrReleased)
	require.ErrorIs(t, l.Release(ctxT(t)), zklock.ErrReleased)
}

// Parents are container nodes, recreated if they vanish.
func TestParentsAreContainersAndComeBack(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	release(t, l)
	require.NoError(t, c.Conn().Delete(path, -1)) // as the server's container reaper would
	l, err = m.Acquire(ctxT(t))
	require.NoError(t, err)
	release(t, l)
}

func TestDo(t *testing.T) {
	t.Parallel()
	m, err := zklock.NewMutex(connect(t), lockPath(t))
	require.NoError(t, err)
	ran := false
	err = zklock.Do(ctxT(t), m, func(ctx context.Context) error {
		ran = true
		return ctx.Err()
	})
	require.NoError(t, err)
	require.True(t, ran)

	boom := errors.New("boom")
	require.ErrorIs(t, zklock.Do(ctxT(t), m, func(context.Context) error { return boom }), boom)
	require.ErrorIs(t, zklock.Do(ctxT(t), nil, func(context.Context) error { return nil }), zklock.ErrInvalidArgument)
}

// A holder that loses its connection hears it (Done, Err) before anyone
// else can acquire; after the session expires, another client acquires and
// the lost lease says ErrSessionExpired.
func TestHolderSessionExpiry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, time.Second)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)

	bm := newMutex(t, connect(t), path)
	b := async(bm.Acquire, ctxT(t))
	queued(t, a, path, 2)

	fa.Partition()
	bl := await(t, b)
	require.True(t, closed(held.Done()), "the cut-off holder heard it before another acquired")
	require.ErrorIs(t, held.Err(), zklock.ErrConnectionSuspended)
	require.Greater(t, bl.Token(), held.Token())

	fa.Heal()
	require.Eventually(t, func() bool { return errors.Is(held.Err(), zklock.ErrSessionExpired) },
		long, 10*time.Millisecond, "the lease learns that its session expired")
	require.ErrorIs(t, held.Release(ctxT(t)), zklock.ErrSessionExpired)

	// The client works again in its new session.
	ch := async(m.Acquire, ctxT(t))
	release(t, bl)
	release(t, await(t, ch))
}

// Done closes while the session lives on: a disconnect alone ends the lease,
// and its node is deleted once the connection is back.
func TestHolderDisconnectSuspendsLease(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, 10*time.Second)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	sid := a.SessionID()

	fa.Drop()
	select {
	case <-held.Done():
	case <-time.After(long):
		t.Fatal("lease not lost on disconnect")
	}
	require.ErrorIs(t, held.Err(), zklock.ErrConnectionSuspended)
	c := connect(t)
	require.Eventually(t, func() bool { return len(children(t, c, path)) == 0 }, long, 10*time.Millisecond,
		"the lost lease's node is deleted after reconnecting")
	require.Equal(t, sid, a.SessionID(), "same session")
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	release(t, l)
}

// A waiter whose session expires queues again in its new session.
func TestWaiterRequeuesAfterExpiry(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)

	a, fa := faulty(t, time.Second)
	am := newMutex(t, a, path)
	sid := a.SessionID()
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	queued(t, c, path, 1) // the server expired the waiter's session
	fa.Heal()
	require.Eventually(t, func() bool { return a.SessionID() != sid && a.SessionID() != 0 }, long, 10*time.Millisecond)
	queued(t, c, path, 2) // queued again
	release(t, held)
	l := await(t, ch)
	_, stat, err := c.Conn().Get(l.Node())
	require.NoError(t, err)
	require.Equal(t, a.SessionID(), stat.EphemeralOwner)
	release(t, l)
	require.Empty(t, children(t, c, path))
}

// A waiter re-reads the children after a reconnect: a release it missed
// while disconnected still wakes it.
func TestWaiterRereadsAfterReconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := newMutex(t, c, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)

	a, fa := faulty(t, 10*time.Second)
	am := newMutex(t, a, path)
	ch := async(am.Acquire, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	require.Eventually(t, func() bool { return a.Conn().State() != zk.StateHasSession }, long, 10*time.Millisecond)
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
	require.NoError(t, err)
	release(t, warm)

	fa.DropAfter(zktest.OpCreate)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, []string{l.Node()[len(path)+1:]}, children(t, c, path), "exactly our node")
	release(t, l)
	require.Empty(t, children(t, c, path))

	s, err := zklock.NewSemaphore(a, path+"sem", 3)
	require.NoError(t, err)
	warmN, err := s.AcquireN(ctxT(t), 2)
	require.NoError(t, err)
	for _, l := range warmN {
		release(t, l)
	}
	fa.DropAfter(zktest.OpMulti)
	ls, err := s.AcquireN(ctxT(t), 2)
	require.NoError(t, err)
	require.Len(t, children(t, c, path+"sem"), 2)
	for _, l := range ls {
		release(t, l)
	}
	require.Empty(t, children(t, c, path+"sem"))

	// And a waiter cancelled after its create was cut off.
	h := newMutex(t, c, path)
	hl, err := h.Acquire(ctxT(t))
	require.NoError(t, err)
	fa.DropAfter(zktest.OpCreate)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = m.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return len(children(t, c, path)) == 1 }, long, 10*time.Millisecond)
	release(t, hl)
}

func TestClientClose(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, err := zklock.Connect(ctxT(t), zktest.Servers(t))
	require.NoError(t, err)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	sem, err := zklock.NewSemaphore(a, path+"sem", 1)
	require.NoError(t, err)
	s1, err := sem.Acquire(ctxT(t))
	require.NoError(t, err)
	waiting := async(sem.Acquire, ctxT(t))
	queued(t, connect(t), path+"sem", 2)

	require.NoError(t, a.Close())
	require.True(t, closed(held.Done()))
	require.ErrorIs(t, held.Err(), zklock.ErrClientClosed)
	require.ErrorIs(t, s1.Err(), zklock.ErrClientClosed)
	select {
	case r := <-waiting:
		require.ErrorIs(t, r.err, zklock.ErrClientClosed)
	case <-time.After(long):
		t.Fatal("waiter did not return on Close")
	}
	_, err = m.Acquire(ctxT(t))
	require.ErrorIs(t, err, zklock.ErrClientClosed)
	require.NoError(t, a.Close(), "Close twice")
	c := connect(t)
	require.Empty(t, children(t, c, path))
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
	require.NoError(t, err)
	release(t, warm)

	h := newMutex(t, c, path)
	held, err := h.Acquire(ctxT(t))
	require.NoError(t, err)
	fa.DropAfter(zktest.OpCreate)
	// Shorter than go-zookeeper's one-second pause before reconnecting, so
	// the acquire gives up before it can look for its node.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = m.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	release(t, held)
	require.Eventually(t, func() bool { return len(children(t, c, path)) == 0 }, long, 10*time.Millisecond,
		"the cut-off create's node is deleted once the client reconnects")
	l, err := h.Acquire(ctxT(t))
	require.NoError(t, err, "and the mutex is free")
	release(t, l)
}

func newMutex(t *testing.T, c *zklock.Client, path string, opts ...zklock.LockOption) *zklock.Mutex {
	t.Helper()
	m, err := zklock.NewMutex(c, path, opts...)
	require.NoError(t, err)
	return m
}

func newRW(t *testing.T, c *zklock.Client, path string) *zklock.RWMutex {
	t.Helper()
	rw, err := zklock.NewRWMutex(c, path)
	require.NoError(t, err)
	return rw
}
