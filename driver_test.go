package zklock_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/zkrecipes/zklock"
)

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

// A Lock with a user's driver lists its participants as that driver sees
// them.
func TestLockParticipants(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	var locks []*zklock.Lock
	for i := 0; i < 3; i++ {
		l, err := zklock.NewLock(connect(t), path, firstTwo{})
		must(t, err)
		locks = append(locks, l)
	}
	a, err := locks[0].Acquire(ctxT(t))
	must(t, err)
	b, err := locks[1].Acquire(ctxT(t))
	must(t, err)
	w := async(locks[2].Acquire, ctxT(t))
	queued(t, connect(t), path, 3)
	parts, err := locks[2].Participants(ctxT(t))
	must(t, err)
	held, _ := holders(parts)
	if want := []bool{true, true, false}; len(held) != 3 || held[0] != want[0] || held[1] != want[1] || held[2] != want[2] {
		t.Fatalf("holders %v, want %v", held, want)
	}
	pending(t, w)
	release(t, a)
	release(t, await(t, w))
	release(t, b)
}

// firstTwo lets the first two participants hold.
type firstTwo struct{}

// A driver that neither holds nor watches fails the acquire with
// ErrInvalidArgument, and leaves no node.
func TestDriverThatNeitherHoldsNorWatches(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	l, err := zklock.NewLock(c, path, stuck{})
	must(t, err)
	_, err = l.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrInvalidArgument)
	eventually(t, func() bool { return len(children(t, c, path)) == 0 }, "no node left")

	_, err = zklock.NewLock(c, path, unknownKind{})
	mustIs(t, err, zklock.ErrInvalidArgument, "a driver of no kind")
}

type stuck struct{}

type unknownKind struct{ stuck }

func (firstTwo) Kind() zklock.Kind { return zklock.KindMutex }

func (firstTwo) GetsTheLock(_ []zklock.Child, first, _ int) zklock.Decision {
	if first < 2 {
		return zklock.Decision{Holds: true}
	}
	return zklock.Decision{Watch: []int{first - 2, first - 1}}
}

func (stuck) Kind() zklock.Kind                                    { return zklock.KindMutex }
func (stuck) GetsTheLock([]zklock.Child, int, int) zklock.Decision { return zklock.Decision{} }

func (unknownKind) Kind() zklock.Kind { return zklock.KindUnknown }
