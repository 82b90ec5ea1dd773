package zklock

import (
	"fmt"
	"math"
	"math/rand"
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
			if !ok || err != nil || ch.Owner != id || ch.Kind != KindLease || !strings.HasPrefix(name, (&Lock{lockConfig: lockConfig{driver: semaphoreDriver{}}}).idPrefix(id)) {
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
// node i holds iff i is below the smallest size among nodes 0..i, a group
// (AcquireN) iff its last node does; a waiter watches every node ahead if
// the group ahead of it holds, else the last node of that group, for its
// hold.
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
	for _, tc := range []struct {
		name        string
		spec        []string
		legacy      int
		first, last int
		want        decision
	}{
		{"one size", []string{"A3", "B3", "C3"}, 0, 2, 2, hold},
		{"one size, full", []string{"A3", "B3", "C3", "D3"}, 0, 3, 3, first(3)},
		// A 2 ahead bounds the 3s behind it (min over the holder's own
		// size alone would let C hold: three leases while A's 2 holds).
		{"a 2 ahead bounds a 3", []string{"A2", "B3", "C3"}, 0, 2, 2, first(2)},
		{"a 3 behind a 2 holds within 2", []string{"A2", "B3", "C3"}, 0, 1, 1, hold},
		{"a 2 behind two 3s waits", []string{"A3", "B3", "C2"}, 0, 2, 2, first(2)},
		// A smaller size behind bounds nothing ahead of it (min over the
		// whole queue would keep C waiting, for a node that came later).
		{"a 2 behind does not hold back a 3 ahead", []string{"A3", "B3", "C3", "D2"}, 0, 2, 2, hold},
		{"the 2 behind three 3s", []string{"A3", "B3", "C3", "D2"}, 0, 3, 3, first(3)},
		{"a waiter behind a waiter", []string{"A2", "B3", "C3", "D3"}, 0, 3, 3, behind(2)},
		{"a 1 first", []string{"A1", "B3"}, 0, 1, 1, first(1)},
		{"a 1 behind a 3", []string{"A3", "B1"}, 0, 1, 1, first(1)},
		{"the min is over everything ahead", []string{"A5", "B2", "C5", "D5"}, 0, 2, 2, first(2)},
		// Groups: one size per group, held together.
		{"a group within its size", []string{"A3", "A3", "B3"}, 0, 2, 2, hold},
		{"a group of 2 behind a 2", []string{"A2", "B3", "B3"}, 0, 1, 2, first(1)},
		{"a group behind a group", []string{"A2", "A2", "B3", "B3", "C3", "C3"}, 0, 4, 5, behind(3)},
		{"a group of 2 of a 2 behind a 3", []string{"A3", "B2", "B2"}, 0, 1, 2, first(1)},
		{"a group alone", []string{"B2", "B2"}, 0, 0, 1, hold},
		{"a group of 3 behind a 5 and a 4", []string{"A5", "B4", "C3", "C3", "C3"}, 0, 2, 4, first(2)},
		// Nodes without a size in their ids: the path's record, if any,
		// else no bound of their own.
		{"unsized nodes, no record", []string{"A", "B", "C3"}, 0, 2, 2, hold},
		{"unsized nodes, a record of 2", []string{"A", "B", "C3"}, 2, 2, 2, first(2)},
		{"unsized nodes, a record of 3", []string{"A", "B", "C3"}, 3, 2, 2, hold},
		{"a record does not override a carried size", []string{"A2", "B", "C3"}, 5, 2, 2, first(2)},
		{"unsized everywhere, a record", []string{"A", "B", "C"}, 2, 2, 2, first(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kids := sized(tc.spec...)
			d := semaphoreDriver{legacy: tc.legacy}
			equal(t, d.decide(kids, tc.first, tc.last), tc.want)
			equal(t, d.GetsTheLock(kids, tc.first, tc.last), tc.want.Decision, "the public view")
		})
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

// The proof's claims, on random queues of mixed sizes and groups: the
// decisions are the rule's; holders are a prefix; at most the smallest
// size among the holders hold; nodes behind never change a decision, a
// departure ahead never ends a hold; a waiter's watches are as the
// hand-over needs them (every node ahead when the group ahead holds, else
// that group's last node).
func TestSemaphoreDriverRuleProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 5000; round++ {
		kids, sizes, groupLast := randomQueue(rng, false)
		d := semaphoreDriver{}
		held := holders(kids, func(Child) Driver { return d })
		want := refHolds(sizes, groupLast)
		if !slices.Equal(held, want) {
			t.Fatalf("sizes %v groups %v: holders %v, want %v", sizes, groupLast, held, want)
		}
		h := 0
		for h < len(held) && held[h] {
			h++
		}
		if slices.Contains(held[h:], true) {
			t.Fatalf("sizes %v: holders %v are not a prefix", sizes, held)
		}
		if h > 0 && h > slices.Min(sizes[:h]) {
			t.Fatalf("sizes %v: %d hold, over the smallest holder's size", sizes, h)
		}
		for i := 0; i < len(kids); {
			first, last := groupOf(kids, i)
			dec := d.decide(kids, first, last)
			checkWatches(t, kids, held, first, last, dec)
			// Nodes behind change nothing.
			more, _, _ := randomQueue(rng, false)
			longer := append(slices.Clone(kids[:last+1]), more...)
			if got := d.decide(longer, first, last); !equalDecision(got, dec) {
				t.Fatalf("sizes %v: nodes behind %d changed its decision", sizes, first)
			}
			// A departure ahead never ends a hold.
			if dec.Holds && first > 0 {
				gone := rng.Intn(first)
				fewer := slices.Delete(slices.Clone(kids), gone, gone+1)
				if !d.decide(fewer, first-1, last-1).Holds {
					t.Fatalf("sizes %v: node %d holds, and not once node %d left", sizes, first, gone)
				}
			}
			i = last + 1
		}
	}
}

func equalDecision(a, b decision) bool {
	return a.Holds == b.Holds && a.awaitHold == b.awaitHold && a.announce == b.announce && slices.Equal(a.Watch, b.Watch)
}

// checkWatches checks a waiter's watches against the holders.
func checkWatches(t *testing.T, kids []Child, held []bool, first, last int, dec decision) {
	t.Helper()
	if dec.Holds != held[last] {
		t.Fatalf("%q: group %d..%d decides %v, holders say %v", childNames(kids), first, last, dec.Holds, held[last])
	}
	switch {
	case dec.Holds:
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
		held := holders(kids, func(Child) Driver { return d })
		if want := refHolds(eff, groupLast); !slices.Equal(held, want) {
			t.Fatalf("sizes %v (record %d): holders %v, want %v", eff, legacy, held, want)
		}
	}
}
