package zklock_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zklock"
)

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

func newRW(t testing.TB, c *zklock.Client, path string) *zklock.RWMutex {
	t.Helper()
	rw, err := zklock.NewRWMutex(c, path)
	must(t, err, "new rwmutex %s", path)
	return rw
}

// Downgrade takes a read lease at the writer's place and releases the write
// lease: a reader queued behind the writer gets in, a writer queued behind
// them does not.
func TestDowngrade(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, connect(t), path)
	write, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	r2 := async(newRW(t, connect(t), path).ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	w2 := async(newRW(t, connect(t), path).WriteLock().Acquire, ctxT(t))
	queued(t, c, path, 3)

	read, err := rw.Downgrade(ctxT(t), write)
	must(t, err, "downgrade")
	mustIs(t, write.Err(), zklock.ErrReleased, "the write lease is released")
	must(t, read.Err(), "the read lease holds")
	seq := write.Node()[strings.LastIndex(write.Node(), "__WRIT__")+len("__WRIT__"):]
	if !strings.HasSuffix(read.Node(), "-__READ__"+seq) {
		t.Fatalf("read node %s does not carry the writer's sequence %s", read.Node(), seq)
	}
	if read.Token() <= write.Token() {
		t.Fatalf("read token %d not after the write token %d", read.Token(), write.Token())
	}
	r2l := await(t, r2) // a reader shares with the downgraded reader
	pending(t, w2)      // the writer queued behind still waits
	release(t, read)
	pending(t, w2)
	release(t, r2l)
	release(t, await(t, w2))

	// Misuse.
	_, err = rw.Downgrade(ctxT(t), nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil lease")
	r, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	_, err = rw.Downgrade(ctxT(t), r)
	mustIs(t, err, zklock.ErrInvalidArgument, "a read lease cannot be upgraded")
	release(t, r)
	m, err := newMutex(t, c, lockPath(t)).Acquire(ctxT(t))
	must(t, err)
	_, err = rw.Downgrade(ctxT(t), m)
	mustIs(t, err, zklock.ErrInvalidArgument, "a lease of another lock")
	release(t, m)
	_, err = rw.Downgrade(ctxT(t), write)
	mustIs(t, err, zklock.ErrReleased, "a released write lease")
}
