package zklock

import (
	"fmt"
	"testing"
)

// The registry's names: what itemName writes parseItem reads back, and
// nothing else in the registry counts (a stray child written by hand, or
// by a later version, is neither an entry nor a marker).
func TestRegistryNames(t *testing.T) {
	for _, it := range []regItem{
		{entryChained, 12, 10}, {entryUnchained, 0, 1}, {entryMarker, -5, 3},
		{entryChained, 2147483647, 2147483647}, {entryUnchained, -2147483648, 7},
	} {
		name := itemName(it.kind, it.seq, it.size)
		got, ok := parseItem(name)
		if !ok || got != it {
			t.Errorf("parseItem(%q) = %+v, %v; want %+v", name, got, ok, it)
		}
		if _, seq, _ := parseChild(name); seq {
			t.Errorf("%q reads as a sequential node: a reader of the registry's parent would count it", name)
		}
	}
	for _, name := range []string{
		"", "r", "r_12_10", "r_12_10_x", "r_12_10__", "rr_12_10_", "_12_10_", "x_12_10_",
		"r_a_10_", "r_12_b_", "r_12_0_", "r_12_-3_", "r__10_", "r_12__", "r_4294967296_2_",
		"r-12-10-", "r_12_10_r_", "R_12_10_",
	} {
		if it, ok := parseItem(name); ok {
			t.Errorf("parseItem(%q) = %+v, want none", name, it)
		}
	}
}

// holds: the entries ahead of the waiter's node count, whatever their
// kind, against the smallest of its size and theirs; entries behind it do
// not; a marker below its size leaves the decision to the queue, one at
// or above it does not.
func TestRegistryHolds(t *testing.T) {
	r := func(items ...regItem) registry { return registry{read: true, items: items} }
	for _, c := range []struct {
		r             registry
		seq           int32
		size          int
		decided, hold bool
	}{
		{r(), 5, 1, true, true},
		{r(regItem{entryChained, 1, 2}), 5, 2, true, true},
		{r(regItem{entryChained, 1, 2}, regItem{entryUnchained, 2, 2}), 5, 2, true, false},
		{r(regItem{entryUnchained, 1, 2}, regItem{entryUnchained, 2, 2}), 5, 3, true, false}, // a 2 ahead bounds a 3
		{r(regItem{entryUnchained, 1, 3}, regItem{entryUnchained, 2, 3}), 5, 3, true, true},
		{r(regItem{entryChained, 6, 1}, regItem{entryChained, 7, 1}), 5, 1, true, true}, // behind: not counted
		{r(regItem{entryChained, 5, 1}), 5, 1, true, true},                              // its own: not ahead
		{r(regItem{entryMarker, 9, 2}), 5, 3, false, false},
		{r(regItem{entryMarker, 9, 3}), 5, 3, true, true},
		{r(regItem{entryMarker, 9, 4}, regItem{entryChained, 1, 4}), 5, 3, true, true},
		{r(regItem{entryMarker, 2, 2}), 5, 2, true, true},                      // a marker counts no lease
		{r(regItem{entryChained, 2147483647, 2}), -2147483648, 1, true, false}, // ahead across the wrap
	} {
		decided, hold := c.r.holds(c.seq, c.size)
		if decided != c.decided || hold != c.hold {
			t.Errorf("%+v holds(%d, %d) = %v, %v; want %v, %v", c.r.items, c.seq, c.size, decided, hold, c.decided, c.hold)
		}
	}
}

// chainedBy: a read of the queue chains its reader only if every node it
// lists ahead had an entry (r or u, not a marker) in a read of the
// registry; an unread registry chains nobody, and nothing ahead chains.
func TestRegistryChainedBy(t *testing.T) {
	node := func(seq int) Child {
		return Child{Name: fmt.Sprintf("_c_%s-lease-%010d", sizedOwner(seq, 2), seq), Kind: KindLease, Owner: sizedOwner(seq, 2)}
	}
	read := func(items ...regItem) registry { return registry{read: true, items: items} }
	ahead := []Child{node(1), node(2)}
	for _, c := range []struct {
		ahead []Child
		r     registry
		want  bool
	}{
		{nil, registry{}, false},
		{nil, read(), true},
		{ahead, read(regItem{entryChained, 1, 2}, regItem{entryUnchained, 2, 2}), true},
		{ahead, read(regItem{entryChained, 2, 2}), false},
		{ahead, read(regItem{entryChained, 1, 2}), false},
		{ahead, read(regItem{entryChained, 1, 2}, regItem{entryMarker, 2, 2}), false},
		{ahead, registry{items: []regItem{{entryChained, 1, 2}, {entryChained, 2, 2}}}, false},
		{[]Child{{Name: "plain"}}, read(regItem{entryChained, 0, 2}), false}, // no sequence: no entry is its
	} {
		if got := chainedBy(c.ahead, c.r); got != c.want {
			t.Errorf("chainedBy(%d ahead, %+v) = %v, want %v", len(c.ahead), c.r, got, c.want)
		}
	}
}
