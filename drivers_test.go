package zklock

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func curatorNode(uuid, lockName string, seq int) string {
	return fmt.Sprintf("_c_%s-%s%010d", uuid, lockName, seq)
}

func uuidN(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }

// curatorFixForSorting is Curator's StandardLockInternalsDriver.fixForSorting:
// the text after the last occurrence of the lock name.
func curatorFixForSorting(s, lockName string) string {
	if i := strings.LastIndex(s, lockName); i >= 0 {
		return s[i+len(lockName):]
	}
	return s
}

func TestParseChild(t *testing.T) {
	u := "0f8fad5b-d9cb-469f-a165-70867728950e"
	for _, tc := range []struct {
		name  string
		kind  Kind
		seq   int64
		owner string
		ok    bool
		err   bool
	}{
		{name: curatorNode(u, "lock-", 7), kind: KindMutex, seq: 7, owner: u, ok: true},
		{name: curatorNode(u, "__READ__", 12), kind: KindRead, seq: 12, owner: u, ok: true},
		{name: curatorNode(u, "__WRIT__", 2147483647), kind: KindWrite, seq: 2147483647, owner: u, ok: true},
		{name: curatorNode(u, "lease-", 0), kind: KindLease, seq: 0, owner: u, ok: true},
		{name: "_c_" + u + "-lock--000000001", kind: KindMutex, seq: -1, owner: u, ok: true}, // sequence overflowed
		{name: "0123456789abcdef0123456789abcdef__lock__0000000003", kind: KindMutex, seq: 3, owner: "0123456789abcdef0123456789abcdef", ok: true},
		{name: "0123456789abcdef0123456789abcdef__rlock__0000000004", kind: KindRead, seq: 4, owner: "0123456789abcdef0123456789abcdef", ok: true},
		{name: "leases", ok: false},
		{name: "locks", ok: false},
		{name: "x", ok: false},
		{name: "lock-0000000001", ok: true, err: true, seq: 1},               // unprotected: not a format we know
		{name: "_c_" + u + "-other-0000000001", ok: true, err: true, seq: 1}, // unknown lock name
		{name: "0123__lock__0000000003", ok: true, err: true, seq: 3},        // short kazoo id
		{name: "_c_" + u + "-lock-00000000x1", ok: false},                    // not a sequence
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, ok, err := parseChild(tc.name)
			require.Equal(t, tc.ok, ok)
			if tc.err {
				require.ErrorIs(t, err, ErrUnknownNode)
				return
			}
			require.NoError(t, err)
			if !ok {
				return
			}
			require.Equal(t, tc.kind, ch.Kind)
			require.Equal(t, tc.seq, ch.Seq)
			require.Equal(t, tc.owner, ch.Owner)
		})
	}
}

// For every node Curator writes, our order is Curator's order.
func TestSortChildrenMatchesCurator(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, lockNames := range [][]string{{"lock-"}, {"__READ__", "__WRIT__"}} {
		for round := 0; round < 50; round++ {
			var names []string
			for i := 0; i < 20; i++ {
				ln := lockNames[rng.Intn(len(lockNames))]
				names = append(names, curatorNode(uuidN(rng.Intn(1<<30)), ln, rng.Intn(1<<31-1)))
			}
			want := append([]string(nil), names...)
			sort.SliceStable(want, func(i, j int) bool {
				ki, kj := want[i], want[j]
				for _, ln := range lockNames {
					ki, kj = curatorFixForSorting(ki, ln), curatorFixForSorting(kj, ln)
				}
				return ki < kj
			})
			kids, err := sortChildren(names, nil)
			require.NoError(t, err)
			got := make([]string, len(kids))
			for i, k := range kids {
				got[i] = k.Name
			}
			require.Equal(t, want, got)
		}
	}
}

func TestSortChildrenMixed(t *testing.T) {
	kazoo := "0123456789abcdef0123456789abcdef__lock__0000000002"
	names := []string{curatorNode(uuidN(1), "lock-", 3), "leases", kazoo, curatorNode(uuidN(2), "lock-", 1)}
	kids, err := sortChildren(names, nil)
	require.NoError(t, err)
	require.Len(t, kids, 3, "plain nodes are dropped")
	require.Equal(t, []int64{1, 2, 3}, []int64{kids[0].Seq, kids[1].Seq, kids[2].Seq})
	require.Equal(t, kazoo, kids[1].Name)

	_, err = sortChildren(append(names, "foo-0000000009"), nil)
	require.ErrorIs(t, err, ErrUnknownNode)

	leases := []string{curatorNode(uuidN(1), "lease-", 1), "plain"}
	for _, foreign := range []string{"leases", "locks", "0123456789abcdef0123456789abcdef"} {
		_, err = sortChildren(append(leases, foreign), foreignSemaphore)
		require.ErrorIs(t, err, ErrUnknownNode, foreign)
	}
	_, err = sortChildren(append(leases, "0123456789abcdef0123456789abcdeX"), foreignSemaphore)
	require.NoError(t, err)
}

// queue builds sorted children from a compact description: each letter is a
// participant, "r"/"w"/"m"/"s" its kind; repeated owners form groups.
func queue(spec ...string) []Child {
	var kids []Child
	for i, s := range spec {
		owner, kind := s[:len(s)-1], s[len(s)-1]
		k := Child{Name: fmt.Sprintf("%s-%d", s, i), Seq: int64(i), Owner: owner}
		switch kind {
		case 'r':
			k.Kind = KindRead
		case 'w':
			k.Kind = KindWrite
		case 'm':
			k.Kind = KindMutex
		case 's':
			k.Kind = KindLease
		}
		kids = append(kids, k)
	}
	return kids
}

func TestExclusiveDriver(t *testing.T) {
	d := exclusiveDriver{lockNameMutex}
	kids := queue("Am", "Bm", "Cr", "Dm")
	require.Equal(t, Decision{Holds: true}, d.GetsTheLock(kids, 0, 0))
	require.Equal(t, Decision{Watch: []int{0}}, d.GetsTheLock(kids, 1, 1))
	require.Equal(t, Decision{Watch: []int{2}}, d.GetsTheLock(kids, 3, 3), "a writer waits for readers ahead too")
}

func TestReadDriver(t *testing.T) {
	d := readDriver{}
	for _, tc := range []struct {
		spec  []string
		ours  int
		holds bool
		watch int
	}{
		{[]string{"Ar"}, 0, true, 0},
		{[]string{"Ar", "Br", "Cr"}, 2, true, 0},
		{[]string{"Aw", "Br"}, 1, false, 0},
		{[]string{"Ar", "Bw", "Cr"}, 2, false, 1},             // a queued writer blocks later readers
		{[]string{"Ar", "Br", "Cw"}, 1, true, 0},              // a later writer never blocks a reader
		{[]string{"Aw", "Br", "Cw", "Dr", "Er"}, 4, false, 2}, // the nearest writer ahead, not the first
		{[]string{"Am", "Br"}, 1, false, 0},                   // a foreign exclusive node counts as a writer
		{[]string{"Ar", "Bm", "Cr"}, 2, false, 1},
	} {
		t.Run(strings.Join(tc.spec, ","), func(t *testing.T) {
			got := d.GetsTheLock(queue(tc.spec...), tc.ours, tc.ours)
			require.Equal(t, tc.holds, got.Holds)
			if !tc.holds {
				require.Equal(t, []int{tc.watch}, got.Watch)
			}
		})
	}
}

func TestSemaphoreDriver(t *testing.T) {
	d := semaphoreDriver{max: 2}
	kids := queue("As", "Bs", "Cs", "Ds")
	require.True(t, d.GetsTheLock(kids, 0, 0).Holds)
	require.True(t, d.GetsTheLock(kids, 1, 1).Holds)
	// C is the first waiter: it watches every holder, so any release wakes it.
	require.Equal(t, Decision{Watch: []int{0, 1}}, d.GetsTheLock(kids, 2, 2))
	// D waits for C to hold (or go), not for a holder.
	require.Equal(t, Decision{Watch: []int{2}, AwaitHold: true}, d.GetsTheLock(kids, 3, 3))

	// [A B C D], B releases: C holds at once, D is now the first waiter.
	kids = queue("As", "Cs", "Ds")
	require.True(t, d.GetsTheLock(kids, 1, 1).Holds)
	require.Equal(t, Decision{Watch: []int{0, 1}}, d.GetsTheLock(kids, 2, 2))
}

func TestSemaphoreDriverGroups(t *testing.T) {
	d := semaphoreDriver{max: 3}
	// Three participants each asking for 2 of 3 leases.
	kids := queue("As", "As", "Bs", "Bs", "Cs", "Cs")
	require.True(t, d.GetsTheLock(kids, 0, 1).Holds)
	b := d.GetsTheLock(kids, 2, 3)
	require.False(t, b.Holds, "B must not hold part of its request")
	require.Equal(t, []int{0, 1}, b.Watch)
	require.Equal(t, Decision{Watch: []int{3}, AwaitHold: true}, d.GetsTheLock(kids, 4, 5))

	held := holders(kids, func(Child) Driver { return d })
	require.Equal(t, []bool{true, true, false, false, false, false}, held)
}

// The fast path: the driver on the snapshot without the watched node.
func TestPlanFastPath(t *testing.T) {
	l := &Lock{path: "/p", driver: readDriver{}}
	p := &participant{l: l}
	kids := queue("Ar", "Bw", "Cr")
	w := p.plan(kids, 2, 2, readDriver{}.GetsTheLock(kids, 2, 2))
	require.Equal(t, []bool{true}, w.fast, "the only writer ahead: its deletion alone lets us in")

	kids = queue("Aw", "Br", "Cw", "Dr")
	w = p.plan(kids, 3, 3, readDriver{}.GetsTheLock(kids, 3, 3))
	require.Equal(t, []string{"/p/" + kids[2].Name}, w.paths)
	require.Equal(t, []bool{false}, w.fast, "another writer is still ahead")

	l.driver = exclusiveDriver{lockNameMutex}
	kids = queue("Am", "Bm", "Cm")
	require.Equal(t, []bool{true}, p.plan(kids, 1, 1, exclusiveDriver{}.GetsTheLock(kids, 1, 1)).fast)
	require.Equal(t, []bool{false}, p.plan(kids, 2, 2, exclusiveDriver{}.GetsTheLock(kids, 2, 2)).fast)

	l.driver = semaphoreDriver{2}
	kids = queue("As", "Bs", "Cs")
	w = p.plan(kids, 2, 2, semaphoreDriver{2}.GetsTheLock(kids, 2, 2))
	require.Equal(t, []bool{true, true}, w.fast)
	require.Equal(t, []bool{true, true}, w.announce)
}

func TestValidatePath(t *testing.T) {
	for _, bad := range []string{"", "lock", "a/b", "/", "/a/", "/a//b", "/zookeeper", "/zookeeper/x",
		"/a/./b", "/a/..", "/a\x00b", "/a\x01"} {
		err := validatePath(bad)
		require.Error(t, err, "%q", bad)
		require.True(t, errors.Is(err, ErrInvalidArgument), "%q: %v", bad, err)
	}
	for _, good := range []string{"/a", "/a/b", "/zookeeperx", "/a.b/c-d_e", "/ünïcode"} {
		require.NoError(t, validatePath(good), good)
	}
	require.Equal(t, []string{"/a", "/a/b", "/a/b/c"}, parents("/a/b/c"))
}
