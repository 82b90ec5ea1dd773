package zklock

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sizedOwner is a version-8 protected id carrying size, as newSizedID
// writes one, made from i so that tests can tell owners apart.
func sizedOwner(i, size int) string {
	return fmt.Sprintf("%08x-0000-8000-8000-0000%08x", i, size)
}

// sized builds sorted lease children from a compact description: each
// item is an owner letter and its size ("A2"), or the letter alone for a
// node whose id carries no size (a version-4 id); repeated letters in a
// row are one participant's group (AcquireN).
func sized(spec ...string) []Child {
	kids := make([]Child, len(spec))
	for i, s := range spec {
		owner := uuidN(int(s[0]))
		if len(s) > 1 {
			n, err := strconv.Atoi(s[1:])
			if err != nil {
				panic(s)
			}
			owner = sizedOwner(int(s[0]), n)
		}
		kids[i] = Child{Name: fmt.Sprintf("_c_%s-lease-%010d", owner, i), Kind: KindLease, Owner: owner}
	}
	return kids
}

// Sized ids are canonical version-8 UUIDs with the RFC's variant, carry
// their size in the last 8 hex digits, never repeat, and are read back;
// every other id reads as carrying none.
func TestSizedID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i, size := range []int{1, 2, 3, 255, 256, 65537, math.MaxInt32} {
		for j := 0; j < 100; j++ {
			id, err := newSizedID(size)
			if err != nil {
				t.Fatal(err)
			}
			if !re.MatchString(id) || seen[id] {
				t.Fatalf("size %d: %q (repeated: %v), want a fresh canonical version-8 UUID", size, id, seen[id])
			}
			seen[id] = true
			if want := fmt.Sprintf("%08x", size); id[28:] != want {
				t.Fatalf("%q: last 8 hex digits %q, want the size %s", id, id[28:], want)
			}
			if n, ok := idSize(id); !ok || n != size {
				t.Fatalf("idSize(%q) = %d, %v; want %d", id, n, ok, size)
			}
			// The name parses as any protected lease node, with the id as
			// its owner, which the protected-create recovery looks for.
			name := nodePrefix(id, KindLease) + fmt.Sprintf("%010d", i)
			ch, ok, err := parseChild(name)
			if !ok || err != nil || ch.Owner != id || ch.Kind != KindLease || !strings.HasPrefix(name, newSemaphorePolicy(0).idPrefix(id)) {
				t.Fatalf("parseChild(%q) = %+v, %v, %v", name, ch, ok, err)
			}
		}
	}
	v4, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		v4,
		"0f8fad5b-d9cb-469f-a165-70867728950e",  // version 4
		"0f8fad5b-d9cb-869f-c165-000000000003",  // variant 110
		"0f8fad5b-d9cb-869f-7165-000000000003",  // variant 0
		"0f8fad5b-d9cb-869f-a165-000000000000",  // size 0
		"0f8fad5b-d9cb-869f-a165-000080000000",  // size 2^31
		"0f8fad5b-d9cb-869f-a165-0000ffffffff",  // size 2^32-1
		"0F8FAD5B-D9CB-869F-A165-000000000003",  // upper case: not canonical
		"0F8FAD5B-d9cb-869f-a165-000000000003",  // upper case, before the size
		"0f8fad5b-d9cb-869f-a165-00000000000G",  // not hex
		"0f8fad5b-d9cb-869f-a165-g00000000003",  // not hex, before the size
		"0f8fad5bd-9cb-869f-a165-000000000003",  // a hyphen out of place
		"0f8fad5b0d9cb-869f-a165-000000000003",  // a hyphen missing
		"0f8fad5b-d9cb-869f-a165-0000000000003", // 37 characters
		"0123456789abcdef0123456789abcdef",      // kazoo's and zk.Lock's ids
		"",
	} {
		if n, ok := idSize(id); ok {
			t.Errorf("idSize(%q) = %d, want no size", id, n)
		}
	}
	if n, ok := idSize("0f8fad5b-d9cb-869f-b165-00007fffffff"); !ok || n != math.MaxInt32 {
		t.Errorf("idSize of the largest size = %d, %v", n, ok)
	}
}

// The semaphore driver's decisions with participants of different sizes:
// by the rule, node i holds iff i is below the smallest size among nodes
// 0..i, a group (AcquireN) iff its last node does; the engine grants only
// if the count (the nodes up to the group's last, and the groups behind it
// the rule lets hold) is within every size listed, or, once the marks of
// those groups are read, the count of the unmarked ones is (held back:
// watch every node ahead, the unmarked groups behind and the first node
// of a size the count exceeds). A waiter the rule holds back watches
// every node ahead if the rule lets the group ahead of it hold, else the
// last node of that group, for its hold. The public view (GetsTheLock,
// what Participants shows) is the rule alone.
func TestSemaphoreDriverSizes(t *testing.T) {
	all := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	hold := decision{Decision: Decision{Holds: true}, announce: true}
	first := func(n int) decision { return decision{Decision: Decision{Watch: all(n)}} }
	behind := func(prev int) decision { return decision{Decision: Decision{Watch: []int{prev}}, awaitHold: true} }
	heldBack := func(n int, behind ...int) decision {
		return decision{Decision: Decision{Watch: all(n)}, behind: behind}
	}
	marks := func(groups ...int) decision { return decision{reads: reads{marks: groups}} }
	for _, tc := range []struct {
		name        string
		spec        []string
		legacy      int
		first, last int
		want        decision
		public      *Decision // what GetsTheLock says, if not want's
	}{
		{"one size", []string{"A3", "B3", "C3"}, 0, 2, 2, hold, nil},
		{"one size, full", []string{"A3", "B3", "C3", "D3"}, 0, 3, 3, first(3), nil},
		// A 2 ahead bounds the 3s behind it (min over the holder's own
		// size alone would let C hold: three leases while A's 2 holds).
		{"a 2 ahead bounds a 3", []string{"A2", "B3", "C3"}, 0, 2, 2, first(2), nil},
		{"a 3 behind a 2 holds within 2", []string{"A2", "B3", "C3"}, 0, 1, 1, hold, nil},
		{"a 2 behind two 3s waits", []string{"A3", "B3", "C2"}, 0, 2, 2, first(2), nil},
		// A smaller size behind holds back a grant the rule allows: C,
		// granted, would make three leases while D's 2 is queued. The
		// public view says C may hold (a lease granted before D came).
		{"a 2 behind holds back a 3 ahead", []string{"A3", "B3", "C3", "D2"}, 0, 2, 2, heldBack(2, 3), &Decision{Holds: true}},
		{"held back by the first small one", []string{"A3", "B3", "C3", "D5", "E2", "F1"}, 0, 2, 2, heldBack(2, 4), &Decision{Holds: true}},
		{"held back, first in the queue", []string{"A3", "B3", "C1"}, 0, 1, 1, heldBack(1, 2), &Decision{Holds: true}},
		{"a group held back", []string{"A3", "B3", "B3", "C2"}, 0, 1, 2, heldBack(1, 3), &Decision{Holds: true}},
		{"within the size behind", []string{"A3", "B3", "C2"}, 0, 1, 1, hold, nil},
		{"a larger size behind holds nothing back", []string{"A3", "B3", "C3", "D4"}, 0, 2, 2, hold, nil},
		{"a size behind of a different first digit", []string{"A268435459", "B268435459", "C268435459", "D268435459", "E3"}, 0, 3, 3, heldBack(3, 4), &Decision{Holds: true}},
		{"a size behind of our size", []string{"A5", "B5", "C5", "D5"}, 0, 2, 2, hold, nil},
		// The count: holders by the rule behind us may hold, unless their
		// marks say they are held back.
		{"the 3s behind may hold", []string{"A3", "B3", "C3", "D2"}, 0, 0, 0, marks(1, 2), &Decision{Holds: true}},
		{"a group behind may hold", []string{"A3", "B3", "B3", "C2"}, 0, 0, 0, marks(2), &Decision{Holds: true}},
		{"no size behind the count exceeds", []string{"A3", "B3", "C3", "D3"}, 0, 0, 0, hold, nil},
		{"the prefix ends before the 2s", []string{"A3", "B3", "C2", "D2"}, 0, 0, 0, hold, nil},
		{"the prefix ends before the 1", []string{"A3", "B3", "C1"}, 0, 0, 0, marks(1), &Decision{Holds: true}},
		{"an unsized node counts the prefix behind it", []string{"A", "B3", "C1", "D3"}, 0, 0, 0, marks(1), &Decision{Holds: true}},
		{"an unsized node behind holds nothing back", []string{"A3", "B3", "C3", "D"}, 1, 2, 2, hold, nil},
		{"the 2 behind three 3s", []string{"A3", "B3", "C3", "D2"}, 0, 3, 3, first(3), nil},
		{"behind a held-back 3", []string{"A3", "B3", "C3", "D2", "E3"}, 0, 4, 4, behind(3), nil},
		{"a waiter behind a waiter", []string{"A2", "B3", "C3", "D3"}, 0, 3, 3, behind(2), nil},
		{"a 1 first", []string{"A1", "B3"}, 0, 1, 1, first(1), nil},
		{"a 1 behind a 3", []string{"A3", "B1"}, 0, 1, 1, first(1), nil},
		{"the min is over everything ahead", []string{"A5", "B2", "C5", "D5"}, 0, 2, 2, first(2), nil},
		// Groups: one size per group, held together.
		{"a group within its size", []string{"A3", "A3", "B3"}, 0, 2, 2, hold, nil},
		{"a group of 2 behind a 2", []string{"A2", "B3", "B3"}, 0, 1, 2, first(1), nil},
		{"a group behind a group", []string{"A2", "A2", "B3", "B3", "C3", "C3"}, 0, 4, 5, behind(3), nil},
		{"a group of 2 of a 2 behind a 3", []string{"A3", "B2", "B2"}, 0, 1, 2, first(1), nil},
		{"a group alone", []string{"B2", "B2"}, 0, 0, 1, hold, nil},
		{"a group of 3 behind a 5 and a 4", []string{"A5", "B4", "C3", "C3", "C3"}, 0, 2, 4, first(2), nil},
		// Nodes without a size in their ids: the path's record, if any,
		// else no bound of their own.
		{"unsized nodes, no record", []string{"A", "B", "C3"}, 0, 2, 2, hold, nil},
		{"unsized nodes, a record of 2", []string{"A", "B", "C3"}, 2, 2, 2, first(2), nil},
		{"unsized nodes, a record of 3", []string{"A", "B", "C3"}, 3, 2, 2, hold, nil},
		{"a record does not override a carried size", []string{"A2", "B", "C3"}, 5, 2, 2, first(2), nil},
		{"unsized everywhere, a record", []string{"A", "B", "C"}, 2, 2, 2, first(2), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kids := sized(tc.spec...)
			d := semaphoreDriver{legacy: tc.legacy}
			equal(t, d.decide(kids, tc.first, tc.last), tc.want)
			public := tc.want.Decision
			if tc.public != nil {
				public = *tc.public
			}
			equal(t, d.GetsTheLock(kids, tc.first, tc.last), public, "the public view")
		})
	}
	// With the marks read: the unmarked groups behind count, and the held
	// back watch them.
	counted := []struct {
		spec        []string
		first, last int
		marked      map[int]bool
		want        decision
	}{
		{[]string{"A3", "B3", "C3", "D2"}, 0, 0, map[int]bool{1: false, 2: false}, heldBack(0, 1, 2, 3)},
		{[]string{"A3", "B3", "C3", "D2"}, 0, 0, map[int]bool{1: false, 2: true}, hold},
		{[]string{"A3", "B3", "C3", "D2"}, 0, 0, map[int]bool{1: true, 2: true}, hold},
		{[]string{"A3", "B3", "C3", "D2"}, 1, 1, map[int]bool{2: false}, heldBack(1, 2, 3)},
		{[]string{"A3", "B3", "C3", "D2"}, 1, 1, map[int]bool{2: true}, hold},
		{[]string{"A3", "B3", "B3", "C2"}, 0, 0, map[int]bool{2: false}, heldBack(0, 2, 3)},
		{[]string{"A3", "B3", "B3", "C2"}, 0, 0, map[int]bool{2: true}, hold},
		{[]string{"A4", "B4", "C4", "D4", "E2", "F1"}, 0, 0, map[int]bool{1: false, 2: true, 3: true}, heldBack(0, 1, 5)},
		{[]string{"A4", "B4", "C4", "D4", "E2", "F1"}, 0, 0, map[int]bool{1: true, 2: true, 3: true}, hold},
	}
	for _, tc := range counted {
		kids := sized(tc.spec...)
		d := semaphoreDriver{marked: tc.marked}
		equal(t, d.decide(kids, tc.first, tc.last), tc.want, fmt.Sprint(tc.spec, tc.first, tc.marked))
	}
	// A participant whose own group exceeds its size neither holds nor
	// watches: the engine fails the acquire rather than hang.
	equal(t, semaphoreDriver{}.decide(sized("A2", "A2", "A2"), 0, 2), decision{})
}

// refHolds is the rule, written plainly: node i holds iff its group's last
// node j has j < min(size of nodes 0..j).
func refHolds(sizes []int, groupLast []int) []bool {
	out := make([]bool, len(sizes))
	for i := range sizes {
		j := groupLast[i]
		m := math.MaxInt
		for k := 0; k <= j; k++ {
			m = min(m, sizes[k])
		}
		out[i] = j < m
	}
	return out
}

// randomQueue is a queue of lease groups with sizes from 1 to 4, some
// nodes without a size of their own when legacy.
func randomQueue(rng *rand.Rand, legacy bool) (kids []Child, sizes, groupLast []int) {
	n := rng.Intn(9)
	for g := 0; len(kids) < n; g++ {
		size := 1 + rng.Intn(4)
		count := 1 + rng.Intn(min(size, 2))
		owner := sizedOwner(g, size)
		if legacy && rng.Intn(3) == 0 {
			owner = uuidN(g)
		}
		for c := 0; c < count; c++ {
			kids = append(kids, Child{Name: fmt.Sprintf("_c_%s-lease-%010d", owner, len(kids)), Kind: KindLease, Owner: owner})
			sizes = append(sizes, size)
		}
		for c := 0; c < count; c++ {
			groupLast = append(groupLast, len(kids)-1)
		}
	}
	return kids, sizes, groupLast
}

// refGrants is the engine's grant, written plainly: the rule, and the
// count within every size listed: the nodes up to the group's last, and
// those of the groups behind it that the rule lets hold and that are not
// marked held back.
func refGrants(kids []Child, rule []bool, groupLast []int, marked []bool) []bool {
	out := slices.Clone(rule)
	for i := range out {
		if !rule[i] {
			continue
		}
		count := groupLast[i] + 1
		for j := groupLast[i] + 1; j < len(kids) && rule[j]; j++ {
			if !marked[groupLast[j]] {
				count++
			}
		}
		for _, k := range kids {
			if n, ok := idSize(k.Owner); ok && n < count {
				out[i] = false
			}
		}
	}
	return out
}

// decideMarked is the engine's decision with the marks read, where the
// driver asks for them.
func decideMarked(d semaphoreDriver, kids []Child, first, last int, marked []bool) decision {
	dec := d.decide(kids, first, last)
	if dec.reads.marks == nil {
		return dec
	}
	d.marked = map[int]bool{}
	for _, i := range dec.reads.marks {
		d.marked[i] = marked[i]
	}
	return d.decide(kids, first, last)
}

// The proof's claims, on random queues of mixed sizes and groups, some
// marked held back: the decisions are the rule's, held back by the count;
// holders by the rule are a prefix, and at most the smallest size among
// the holders hold; with no marks, the grants are a prefix within every
// size queued; nodes behind never change the rule's decision and never
// turn a wait into a grant; a departure ahead never ends the rule's hold;
// a waiter's watches are as the hand-over needs them (every node ahead
// when the rule lets the group ahead hold, else that group's last node;
// and for one held back, the unmarked groups behind that count and a node
// of a size the count exceeds).
func TestSemaphoreDriverRuleProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 5000; round++ {
		kids, sizes, groupLast := randomQueue(rng, false)
		d := semaphoreDriver{}
		held, _ := holders(kids, func(Child) policy { return adapt(d) }, nil, false)
		want := refHolds(sizes, groupLast)
		if !slices.Equal(held, want) {
			t.Fatalf("sizes %v groups %v: holders %v, want %v", sizes, groupLast, held, want)
		}
		checkPrefix(t, sizes, held)
		none := make([]bool, len(kids))
		granted := refGrants(kids, held, groupLast, none)
		checkPrefix(t, sizes, granted)
		if g := countTrue(granted); g > 0 && g > slices.Min(sizes) {
			t.Fatalf("sizes %v: %d granted, over the smallest size queued", sizes, g)
		}
		marked := make([]bool, len(kids))
		for i := range marked {
			marked[i] = rng.Intn(3) == 0
		}
		for _, m := range [][]bool{none, marked} {
			granted := refGrants(kids, held, groupLast, m)
			for i := 0; i < len(kids); {
				first, last := groupOf(kids, i)
				dec := decideMarked(d, kids, first, last, m)
				checkWatches(t, kids, held, granted, m, first, last, dec)
				checkBehind(t, rng, d, kids, first, last, m, dec)
				i = last + 1
			}
		}
		for i := 0; i < len(kids); {
			first, last := groupOf(kids, i)
			// A departure ahead never ends the rule's hold.
			if held[last] && first > 0 {
				gone := rng.Intn(first)
				fewer := slices.Delete(slices.Clone(kids), gone, gone+1)
				if !d.GetsTheLock(fewer, first-1, last-1).Holds {
					t.Fatalf("sizes %v: node %d holds, and not once node %d left", sizes, first, gone)
				}
			}
			i = last + 1
		}
	}
}

// checkPrefix checks that hs, who hold, are a prefix of the queue, at most
// the smallest size among them.
func checkPrefix(t *testing.T, sizes []int, hs []bool) {
	t.Helper()
	h := 0
	for h < len(hs) && hs[h] {
		h++
	}
	if slices.Contains(hs[h:], true) {
		t.Fatalf("sizes %v: holders %v are not a prefix", sizes, hs)
	}
	if h > 0 && h > slices.Min(sizes[:h]) {
		t.Fatalf("sizes %v: %d hold, over the smallest holder's size", sizes, h)
	}
}

// checkBehind checks what nodes queued behind a group do to its decision
// dec: nothing to the rule's (the public view), and at most hold back a
// grant, never make one (the nodes added carry no mark).
func checkBehind(t *testing.T, rng *rand.Rand, d semaphoreDriver, kids []Child, first, last int, marked []bool, dec decision) {
	t.Helper()
	more, _, _ := randomQueue(rng, false)
	longer := append(slices.Clone(kids[:last+1]), more...)
	if got, was := d.GetsTheLock(longer, first, last), d.GetsTheLock(kids, first, last); !reflect.DeepEqual(got, was) {
		t.Fatalf("%q: nodes behind %d changed the rule's decision", childNames(kids), first)
	}
	alone := d.decide(kids[:last+1], first, last)
	longMarks := append(slices.Clone(marked[:last+1]), make([]bool, len(more))...)
	if got := decideMarked(d, longer, first, last, longMarks); got.Holds && !alone.Holds || !got.Holds && !equalDecision(got, alone) && len(got.behind) == 0 {
		t.Fatalf("%q: nodes behind %d turned %+v into %+v", childNames(longer), first, alone, got)
	}
	if !dec.Holds && len(dec.behind) == 0 && !equalDecision(dec, alone) {
		t.Fatalf("%q: group %d..%d waits as %+v, not as the rule's %+v", childNames(kids), first, last, dec, alone)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func equalDecision(a, b decision) bool {
	return a.Holds == b.Holds && a.awaitHold == b.awaitHold && a.announce == b.announce && slices.Equal(a.Watch, b.Watch) && slices.Equal(a.behind, b.behind)
}

// checkWatches checks a waiter's watches against the holders by the rule
// (held), the grants (granted) and the marks.
func checkWatches(t *testing.T, kids []Child, held, granted, marked []bool, first, last int, dec decision) {
	t.Helper()
	if dec.Holds != granted[last] || dec.reads.marks != nil {
		t.Fatalf("%q (marked %v): group %d..%d decides %+v, grants say %v", childNames(kids), marked, first, last, dec, granted[last])
	}
	switch {
	case dec.Holds:
		if len(dec.Watch) != 0 || len(dec.behind) != 0 {
			t.Fatalf("%q: group %d..%d holds and watches %v, %v", childNames(kids), first, last, dec.Watch, dec.behind)
		}
	case held[last]:
		checkHeldBack(t, kids, held, marked, first, last, dec)
	case len(dec.behind) != 0:
		t.Fatalf("%q: group %d..%d, which the rule keeps waiting, is held back by %v", childNames(kids), first, last, dec.behind)
	case held[first-1]:
		if !slices.Equal(dec.Watch, seq(first)) || dec.awaitHold {
			t.Fatalf("the first waiting group %d..%d watches %v (await %v), want every node ahead", first, last, dec.Watch, dec.awaitHold)
		}
	default:
		if !slices.Equal(dec.Watch, []int{first - 1}) || !dec.awaitHold {
			t.Fatalf("a later waiting group %d..%d watches %v (await %v), want the group ahead's last node", first, last, dec.Watch, dec.awaitHold)
		}
	}
}

// checkHeldBack checks the watches of a group the count holds back: every
// node ahead, the last node of each unmarked group behind that the rule
// lets hold, and then a node of a size below the count.
func checkHeldBack(t *testing.T, kids []Child, held, marked []bool, first, last int, dec decision) {
	t.Helper()
	var want []int
	count := last + 1
	for j := last + 1; j < len(kids) && held[j]; j++ {
		if _, l := groupOf(kids, j); l == j && !marked[j] {
			want = append(want, j)
		}
		if !marked[groupLastOf(kids, j)] {
			count++
		}
	}
	n := len(dec.behind)
	ok := !dec.awaitHold && slices.Equal(dec.Watch, seq(first)) && n > 0 && slices.Equal(dec.behind[:n-1], want)
	if ok {
		size, sized := idSize(kids[dec.behind[n-1]].Owner)
		ok = sized && size < count && dec.behind[n-1] > last
	}
	if !ok {
		t.Fatalf("%q (marked %v): the held-back group %d..%d watches %v, behind %v (await %v), want every node ahead, behind %v and one of a size below %d", childNames(kids), marked, first, last, dec.Watch, dec.behind, dec.awaitHold, want, count)
	}
}

func groupLastOf(kids []Child, i int) int {
	_, l := groupOf(kids, i)
	return l
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Nodes without a size of their own count with the path's record, or
// with none: the rule then reads their size as that record, or as no
// bound.
func TestSemaphoreDriverLegacyNodes(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for round := 0; round < 2000; round++ {
		kids, sizes, groupLast := randomQueue(rng, true)
		legacy := rng.Intn(4) // 0: no record
		eff := slices.Clone(sizes)
		for i, k := range kids {
			if _, ok := idSize(k.Owner); !ok {
				eff[i] = legacy
				if legacy == 0 {
					eff[i] = math.MaxInt
				}
			}
		}
		d := semaphoreDriver{legacy: legacy}
		held, _ := holders(kids, func(Child) policy { return adapt(d) }, nil, false)
		if want := refHolds(eff, groupLast); !slices.Equal(held, want) {
			t.Fatalf("sizes %v (record %d): holders %v, want %v", eff, legacy, held, want)
		}
	}
}
