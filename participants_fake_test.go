package zklock_test

import (
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// A holder that leaves between Participants' listing of the children and
// its read of the holder's node is left out, and its successor is shown
// holding: who holds is decided over the nodes found, not the names
// listed (which showed the successor waiting behind a node no longer
// shown, and nobody holding).
func TestFakeParticipantsHolderGoneBetweenReads(t *testing.T) {
	f := zkfake.New()
	_, _, ma, mb := fakeMutexes(t, f, "/pg")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	rb := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/pg", 2)
	pending(t, rb)

	obs := fakeClient(t, f)
	conn := connOf(t, f, obs)
	var deleted atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Get" && op.Paths[0] == la.Node() && deleted.CompareAndSwap(false, true) {
			must(t, f.Delete(la.Node())) // the holder's node goes: its session's end, say
		}
		return nil
	}})
	ps, err := zklock.Participants(ctxT(t), obs, "/pg")
	must(t, err)
	if !deleted.Load() {
		t.Fatal("Participants did not read the holder's node")
	}
	if len(ps) != 1 || !ps[0].Holder || ps[0].Node == la.Node() {
		t.Fatalf("participants %+v; want one, the waiter, holding, once the holder's node is gone", ps)
	}
	f.SetHooks(zkfake.Hooks{})
	release(t, await(t, rb))
}

// Participants lists the holders first, then the waiters, each in queue
// order, also under a user's Driver whose holders are not a prefix of the
// queue (here: the newest node holds).
func TestFakeParticipantsHoldersFirst(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	must(t, f.Create("/hf", nil))
	old := "/hf/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000000"
	newest := "/hf/_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lock-0000000001"
	must(t, f.Create(old, nil))
	must(t, f.Create(newest, nil))
	lk, err := zklock.NewLock(c, "/hf", newestHolds{})
	must(t, err)
	ps, err := lk.Participants(ctxT(t))
	must(t, err)
	if len(ps) != 2 || ps[0].Node != newest || !ps[0].Holder || ps[1].Node != old || ps[1].Holder {
		t.Fatalf("participants %+v; want %s holding, then %s waiting", ps, newest, old)
	}
}

// newestHolds is a Driver under which the last node of the queue holds.
type newestHolds struct{}

func (newestHolds) Kind() zklock.Kind { return zklock.KindMutex }

func (newestHolds) GetsTheLock(children []zklock.Child, first, last int) zklock.Decision {
	if last == len(children)-1 {
		return zklock.Decision{Holds: true}
	}
	return zklock.Decision{Watch: []int{len(children) - 1}}
}

// A Semaphore's Participants on a path that holds another layout's nodes
// (a kazoo lease node) refuses it with ErrUnknownNode, as its acquire does,
// rather than list what it cannot count.
func TestFakeSemaphoreParticipantsRefuseForeignNodes(t *testing.T) {
	f := zkfake.New()
	must(t, f.Create("/fn", nil))
	must(t, f.Create("/fn/0123456789abcdef0123456789abcdef", nil))
	s, err := zklock.NewSemaphore(fakeClient(t, f), "/fn", 2)
	must(t, err)
	ps, err := s.Participants(ctxT(t))
	if !errors.Is(err, zklock.ErrUnknownNode) {
		t.Fatalf("participants of a path with a kazoo lease node: %+v, %v; want ErrUnknownNode", ps, err)
	}
}

// SizeInForce is the smallest size among the participants that have one:
// a participant of size 1 bounds, and one with none (a mutex node, or a
// lease of another layout) does not.
func TestSizeInForce(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		want  int
	}{
		{nil, 0},
		{[]int{0}, 0},
		{[]int{3, 0}, 3},
		{[]int{0, 3, 2}, 2},
		{[]int{3, 1, 0}, 1},
		{[]int{2, 2}, 2},
	} {
		var ps []zklock.Participant
		for _, n := range tc.sizes {
			ps = append(ps, zklock.Participant{Size: n})
		}
		if got := zklock.SizeInForce(ps); got != tc.want {
			t.Errorf("SizeInForce of sizes %v: %d, want %d", tc.sizes, got, tc.want)
		}
	}
}

// Participants reads a Curator InterProcessSemaphoreV2 path (leases/ and
// locks/) as that layout: its lease node holds, not the path's two
// children.
func TestFakeParticipantsCuratorLayout(t *testing.T) {
	f := zkfake.New()
	for _, p := range []string{"/cl", "/cl/locks", "/cl/leases"} {
		must(t, f.Create(p, nil))
	}
	lease := "/cl/leases/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000000"
	must(t, f.Create(lease, []byte("curator")))
	ps, err := zklock.Participants(ctxT(t), fakeClient(t, f), "/cl")
	must(t, err)
	if len(ps) != 1 || ps[0].Node != lease || !ps[0].Holder {
		t.Fatalf("participants %+v; want the lease node %s, holding", ps, lease)
	}
}

// A mutex node on a path where a semaphore lease node without a size in
// its id counts with the path's recorded size is still decided as a
// mutex: second in the queue, it waits.
func TestFakeParticipantsLegacySizeOnlyForLeases(t *testing.T) {
	f := zkfake.New()
	must(t, f.Create("/ls", []byte("3")))
	lease := "/ls/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000000"
	mutex := "/ls/_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lock-0000000001"
	must(t, f.Create(lease, nil))
	must(t, f.Create(mutex, nil))
	ps, err := zklock.Participants(ctxT(t), fakeClient(t, f), "/ls")
	must(t, err)
	if len(ps) != 2 || ps[0].Node != lease || !ps[0].Holder || ps[1].Node != mutex || ps[1].Holder {
		t.Fatalf("participants %+v; want %s holding, then %s waiting", ps, lease, mutex)
	}
}

// A kazoo Semaphore (lease nodes of 32 hex digits, and its lock beside the
// path): Participants shows every lease node holding and the lock's nodes
// waiting; FindLocks reports the path once, as kazoo's, not its lock as a
// path of its own, and lists a plain lock path beside it.
func TestFakeKazooSemaphoreRead(t *testing.T) {
	f := zkfake.New()
	for _, p := range []string{"/kz", "/kz/sem", "/kz/sem-__lock__", "/kz/m"} {
		must(t, f.Create(p, nil))
	}
	leases := []string{"/kz/sem/0123456789abcdef0123456789abcdef", "/kz/sem/fedcba9876543210fedcba9876543210"}
	for _, l := range leases {
		must(t, f.Create(l, []byte("kazoo")))
	}
	waiter := "/kz/sem-__lock__/0f8fad5bd9cb469fa16570867728950e__lock__0000000000"
	must(t, f.Create(waiter, nil))
	mutex := "/kz/m/_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lock-0000000000"
	must(t, f.Create(mutex, nil))
	c := fakeClient(t, f)

	ps, err := zklock.Participants(ctxT(t), c, "/kz/sem")
	must(t, err)
	if len(ps) != 3 || !ps[0].Holder || !ps[1].Holder || ps[2].Holder || ps[2].Node != waiter {
		t.Fatalf("participants %+v; want the two leases holding, then %s waiting", ps, waiter)
	}
	found, complete, err := zklock.FindLocks(ctxT(t), c, "/kz", zklock.FindLimit{})
	must(t, err)
	var got []string
	for _, lp := range found {
		got = append(got, lp.Path+" "+strconv.Itoa(int(lp.Layout)))
	}
	want := []string{"/kz/m " + strconv.Itoa(int(zklock.LayoutZklock)), "/kz/sem " + strconv.Itoa(int(zklock.LayoutKazoo))}
	slices.Sort(got)
	if !complete || !slices.Equal(got, want) {
		t.Fatalf("FindLocks: %v (complete %v); want %v", got, complete, want)
	}
}

// A path shaped as a Curator semaphore (a child "leases") whose leases/
// holds a node Curator's semaphore never makes (a mutex node) is no
// Curator semaphore: FindLocks goes on below it and finds the mutex.
func TestFakeCuratorShapeThatIsNot(t *testing.T) {
	f := zkfake.New()
	for _, p := range []string{"/cn", "/cn/x", "/cn/x/leases"} {
		must(t, f.Create(p, nil))
	}
	mutex := "/cn/x/leases/_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lock-0000000000"
	must(t, f.Create(mutex, nil))
	found, _, err := zklock.FindLocks(ctxT(t), fakeClient(t, f), "/cn", zklock.FindLimit{})
	must(t, err)
	if len(found) != 1 || found[0].Path != "/cn/x/leases" || found[0].Layout != zklock.LayoutZklock {
		t.Fatalf("FindLocks: %+v; want the mutex path /cn/x/leases", found)
	}
}

// A kazoo Semaphore with a single lease is read as kazoo's too; a zklock
// lock path that happens to have a "<path>-__lock__" beside it is not: its
// nodes are decided as a mutex's.
func TestFakeKazooShapeEdges(t *testing.T) {
	f := zkfake.New()
	for _, p := range []string{"/ke", "/ke/one", "/ke/one-__lock__", "/ke/m", "/ke/m-__lock__"} {
		must(t, f.Create(p, nil))
	}
	must(t, f.Create("/ke/one/0123456789abcdef0123456789abcdef", nil))
	waiter := "/ke/one-__lock__/0f8fad5bd9cb469fa16570867728950e__lock__0000000000"
	must(t, f.Create(waiter, nil))
	second := "/ke/m/_c_7c9e6679-7425-40de-944b-e07fc1f90ae7-lock-0000000001"
	must(t, f.Create("/ke/m/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000000", nil))
	must(t, f.Create(second, nil))
	c := fakeClient(t, f)
	ps, err := zklock.Participants(ctxT(t), c, "/ke/one")
	must(t, err)
	if len(ps) != 2 || !ps[0].Holder || ps[1].Node != waiter || ps[1].Holder {
		t.Fatalf("a kazoo semaphore of one lease: %+v; want the lease holding, then %s waiting", ps, waiter)
	}
	ps, err = zklock.Participants(ctxT(t), c, "/ke/m")
	must(t, err)
	if len(ps) != 2 || !ps[0].Holder || ps[1].Node != second || ps[1].Holder {
		t.Fatalf("a mutex beside a __lock__ path: %+v; want the first holding, %s waiting", ps, second)
	}
}
