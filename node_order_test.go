package zklock

import (
	"slices"
	"testing"
)

// A plain node named as if at sequence s+2^31 (any client may create one)
// made a cycle with real nodes at s and s+1 under serial-number order
// alone: the participant at s+1 then saw itself first when getChildren
// listed the names in one order, the one at s when it listed them in
// another, and both held the Mutex. The queue must depend on the set of
// names only. (FuzzSortChildren found it; testdata/fuzz keeps the input.)
func TestSortChildrenIgnoresReadOrderOnForgedFarSequence(t *testing.T) {
	first := curatorNode(uuidN(1), "lock-", 100)
	second := curatorNode(uuidN(2), "lock-", 101)
	forged := "_c_" + uuidN(0) + "-lock--2147483548" // 100 + 2^31
	var want []string
	for _, names := range [][]string{
		{first, second, forged}, {forged, second, first}, {second, forged, first},
		{second, first, forged}, {forged, first, second}, {first, forged, second},
	} {
		kids, err := sortChildren(names, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := childNames(kids)
		if want == nil {
			want = got
		}
		equal(t, got, want, "read as ", names)
		if i, j := slices.Index(got, first), slices.Index(got, second); i > j {
			t.Fatalf("%q before %q, which was created before it: %q", second, first, got)
		}
	}
}
