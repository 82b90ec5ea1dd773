package zklock

import (
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// FuzzSortChildren feeds sortChildren the children names any client may
// write under a lock path (zklock's, Curator's, kazoo's, go-zookeeper's,
// plain nodes, names of no format, sequences across the counter's wrap),
// as one string split at '/' (which no node name holds), and a seed that
// shuffles them. It checks what the engine's safety rests on: no panic; the
// order depends only on the set of names, never on the order in which
// getChildren returned them (two participants that read the same children
// see the same queue); a sequential name of no known format is refused
// with ErrUnknownNode and never placed, a plain one ignored (by a
// Semaphore too, unless another library's semaphore layout names it); on
// that one queue, at most one participant holds a Mutex, and a writer or
// mutex never holds with anyone else; a Semaphore's holders are a prefix of
// the queue, no more than the smallest size their names carry.
func FuzzSortChildren(f *testing.F) {
	u1, u2 := "0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	h1, h2 := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	s2, s3 := "0f8fad5b-d9cb-869f-a165-000000000002", "7c9e6679-7425-80de-944b-000000000003" // version 8: sizes 2 and 3
	for _, names := range [][]string{
		{"_c_" + u1 + "-lock-0000000001", "_c_" + u2 + "-lock-0000000000"},
		{"_c_" + u1 + "-__READ__0000000003", "_c_" + u2 + "-__WRIT__0000000002", "_c_" + u1 + "-__WRIT__0000000003"},
		{"_c_" + u1 + "-lease-0000000007", "_c_" + u1 + "-lease-0000000008", "_c_" + u2 + "-lease-0000000009", "leases"},
		{"_c_" + u1 + "-latch-0000000012", "_c_" + u2 + "-latch-0000000011"},
		{h1 + "__lock__0000000004", h2 + "__rlock__0000000005", "_c_" + h1 + "-lock-0000000006"},
		{"_c_" + u1 + "-lock-2147483647", "_c_" + u2 + "-lock--2147483648", "_c_" + u1 + "-lock--000000001", "_c_" + u2 + "-lock-0000000000"},
		{"_c_" + u1 + "-lock-0000000100", "_c_" + u2 + "-lock-0000000101", "_c_" + u1 + "-lock--2147483548"},
		{"plain", "locks", h1, "foo-0000000009"},
		{"_c_" + u1 + "-lease-0000000001", "plain", h2},
		{"_c_" + s3 + "-lease-0000000001", "_c_" + s2 + "-lease-0000000002", "_c_" + s3 + "-lease-0000000003", "_c_" + u1 + "-lease-0000000004"},
		{"_c_" + s2 + "-lease-0000000007", "_c_" + s2 + "-lease-0000000008", "_c_" + s3 + "-lease-0000000009"},
		{"_c_" + u1 + "-lock--0999999999", "_c_" + u1 + "-lock-000000001", "_c_" + u1 + "-lock-+000000001"},
		{"", "_c_", "__lock__0000000001", h1 + "__lock__", "_c_" + h1 + "-__READ__0000000001"},
	} {
		f.Add(strings.Join(names, "/"), uint64(len(names)))
	}
	f.Fuzz(func(t *testing.T, joined string, seed uint64) {
		names := strings.Split(joined, "/")
		kids, err := sortChildren(names, nil)

		var unknown bool
		want := map[string]int{} // the names to be placed, with their count
		for _, name := range names {
			ch, ok, perr := parseChild(name)
			switch {
			case perr != nil:
				if !errors.Is(perr, ErrUnknownNode) || !ok {
					t.Fatalf("parseChild(%q) = ok %v, err %v: want ok and ErrUnknownNode", name, ok, perr)
				}
				unknown = true
			case ok:
				if ch.Name != name || ch.Kind == KindUnknown || ch.Owner == "" {
					t.Fatalf("parseChild(%q) = %+v", name, ch)
				}
				want[name]++
			}
		}
		if unknown {
			if !errors.Is(err, ErrUnknownNode) || kids != nil {
				t.Fatalf("names %q with one of no known format: sortChildren = %v, %v; want ErrUnknownNode", names, childNames(kids), err)
			}
		} else if err != nil {
			t.Fatalf("sortChildren(%q): %v", names, err)
		}
		for _, k := range kids {
			if want[k.Name]--; want[k.Name] < 0 {
				t.Fatalf("sortChildren(%q) placed %q, which is not a lock node (or twice)", names, k.Name)
			}
		}
		if !unknown {
			for name, n := range want {
				if n != 0 {
					t.Fatalf("sortChildren(%q) left out the lock node %q", names, name)
				}
			}
		}

		// Any other order of the same names: the same queue.
		shuffled := slices.Clone(names)
		rand.New(rand.NewSource(int64(seed))).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		again, err2 := sortChildren(shuffled, nil)
		if (err == nil) != (err2 == nil) || !slices.Equal(childNames(kids), childNames(again)) {
			t.Fatalf("the order depends on the order read:\n%q -> %q, %v\n%q -> %q, %v",
				names, childNames(kids), err, shuffled, childNames(again), err2)
		}
		slices.Reverse(shuffled)
		again, _ = sortChildren(shuffled, nil)
		if !slices.Equal(childNames(kids), childNames(again)) {
			t.Fatalf("the order depends on the order read:\n%q -> %q\n%q -> %q",
				names, childNames(kids), shuffled, childNames(again))
		}

		// A Semaphore also refuses another library's semaphore layout
		// (a plain "locks", "leases" or 32-hex name); otherwise it sees
		// the same queue.
		foreign := false
		for _, name := range names {
			if _, ok, _ := parseChild(name); !ok && foreignSemaphore(name) {
				foreign = true
			}
		}
		sem, err3 := sortChildren(shuffled, foreignSemaphore)
		switch {
		case unknown || foreign:
			if !errors.Is(err3, ErrUnknownNode) {
				t.Fatalf("a Semaphore beside %q: %v, want ErrUnknownNode", names, err3)
			}
		case err3 != nil || !slices.Equal(childNames(sem), childNames(kids)):
			t.Fatalf("a Semaphore sees %q, %v; a Mutex %q", childNames(sem), err3, childNames(kids))
		}

		checkOrder(t, names)
		checkHolders(t, kids)
	})
}

// checkOrder checks compareChildren on the lock nodes among names: a
// strict total order (antisymmetric, transitive, equal only for one
// name), and seqBefore's order when the sequences span less than 2^31.
func checkOrder(t *testing.T, names []string) {
	t.Helper()
	var kids []child
	for _, name := range names {
		if ch, ok, err := parseChild(name); ok && err == nil {
			kids = append(kids, ch)
		}
	}
	if len(kids) > 24 {
		kids = kids[:24] // the triples below are cubic
	}
	origin := seqOrigin(kids)
	cmp := func(a, b child) int { return compareChildren(origin, a, b) }
	for _, a := range kids {
		for _, b := range kids {
			ab, ba := cmp(a, b), cmp(b, a)
			if ab != -ba || (ab == 0) != (a.Name == b.Name) {
				t.Fatalf("compare(%q, %q) = %d, compare back = %d", a.Name, b.Name, ab, ba)
			}
			for _, c := range kids {
				if ab < 0 && cmp(b, c) < 0 && cmp(a, c) >= 0 {
					t.Fatalf("not transitive: %q < %q < %q but not %q < %q", a.Name, b.Name, c.Name, a.Name, c.Name)
				}
			}
		}
	}
	if len(kids) == 0 {
		return
	}
	sorted := slices.Clone(kids)
	slices.SortFunc(sorted, cmp)
	lo, hi := sorted[0].seq, sorted[len(sorted)-1].seq
	if uint32(hi)-uint32(lo) >= 1<<31 {
		return // wider than any live queue: no creation order to agree with
	}
	for i := 1; i < len(sorted); i++ {
		if a, b := sorted[i-1].seq, sorted[i].seq; a != b && !seqBefore(a, b) {
			t.Fatalf("%q before %q, but seqBefore(%d, %d) is false", sorted[i-1].Name, sorted[i].Name, a, b)
		}
	}
}

// checkHolders checks who holds on one queue: with every node a Mutex's, at
// most one participant (a group of one owner's consecutive nodes); with
// each node's own kind deciding (readers share, anything else excludes),
// either readers only or one participant.
func checkHolders(t *testing.T, kids []Child) {
	t.Helper()
	mutex, _ := holders(kids, func(Child) policy { return adapt(exclusiveDriver{KindMutex}) }, nil, false)
	byKind, _ := holders(kids, func(k Child) policy {
		if k.Kind == KindRead {
			return adapt(readDriver{})
		}
		return adapt(exclusiveDriver{k.Kind})
	}, nil, false)
	for _, held := range [][]bool{mutex, byKind} {
		var owners []string
		exclusive := false
		for i, h := range held {
			if !h {
				continue
			}
			if i > 0 && held[i-1] && kids[i-1].Owner == kids[i].Owner {
				continue // the same participant's group
			}
			owners = append(owners, kids[i].Owner)
			if kids[i].Kind != KindRead {
				exclusive = true
			}
		}
		if exclusive && len(owners) > 1 {
			t.Fatalf("%d participants hold, one of them exclusively: %q, holders %v", len(owners), childNames(kids), held)
		}
	}
	for i, h := range mutex {
		if h && i > 0 && kids[i].Owner != kids[0].Owner {
			t.Fatalf("a Mutex held by %q behind %q", kids[i].Name, kids[0].Name)
		}
	}
	checkSemaphore(t, kids)
}

// checkSemaphore checks a zklock Semaphore's holders on one queue, every
// node counting with the size its id carries (none: no bound): a prefix of
// the queue, and no more than the smallest of their sizes.
func checkSemaphore(t *testing.T, kids []Child) {
	t.Helper()
	held, _ := holders(kids, func(Child) policy { return newSemaphorePolicy(0) }, nil, true) // no size recorded
	h := 0
	for h < len(held) && held[h] {
		h++
	}
	if slices.Contains(held[h:], true) {
		t.Fatalf("a Semaphore's holders %v are not a prefix of %q", held, childNames(kids))
	}
	for _, k := range kids[:h] {
		if n, ok := idSize(k.Owner); ok && h > n {
			t.Fatalf("%d hold a Semaphore, over the size %d of %q: %q", h, n, k.Name, childNames(kids))
		}
	}
}
