package zklock

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// The size guard that docs/design.md argues for the holders' registry
// (issue 37; "Why a semaphore's waiters still read the queue", "Sizes"),
// checked against the decision the engine makes today. A chained waiter
// knows every live node ahead of it, with its size, from the registry, and
// nothing of the nodes behind it but the markers: a participant J makes
// one when its first look lists, ahead of it, a node of a larger size than
// J's. The design's claim: when no marker is of a size below the waiter's
// own, the rule on the nodes ahead alone (fewer ahead than the smallest of
// its size and theirs) is the decision the engine makes on the whole
// queue, whatever the nodes behind and their held-back marks; the count
// never refuses then. And the markers are needed: without them the two
// differ on some queues.
func TestRegistryRuleIsTheCountWithoutSmallerMarkers(t *testing.T) {
	rng := rand.New(rand.NewSource(37))
	d := semaphoreDriver{}
	decided, differ := 0, 0
	for round := 0; round < 20000; round++ {
		sizes := make([]int, 1+rng.Intn(10))
		spec := make([]string, len(sizes))
		marked := make([]bool, len(sizes))
		for i := range sizes {
			sizes[i] = 1 + rng.Intn(6)
			spec[i] = fmt.Sprintf("%c%d", 'A'+i, sizes[i]) // one participant a node
			marked[i] = rng.Intn(3) == 0
		}
		kids := sized(spec...)
		for w := range kids {
			queue := decideMarked(d, kids, w, w, marked).Holds
			decides, fromReg := registryOf(sizes, w).holds(int32(w), sizes[w])
			if decides != !smallerMarker(sizes, sizes[w]) {
				t.Fatalf("sizes %v: node %d: decides from the registry=%v, with a smaller marker=%v", sizes, w, decides, smallerMarker(sizes, sizes[w]))
			}
			if decides {
				decided++
				if fromReg != queue {
					t.Fatalf("sizes %v, marks %v: node %d: from the registry holds=%v, from the queue %v, with no marker below its size %d",
						sizes, marked, w, fromReg, queue, sizes[w])
				}
			} else if fromReg != queue {
				differ++
			}
		}
	}
	if decided == 0 {
		t.Fatal("no queue without a smaller marker: the claim was never checked")
	}
	if differ == 0 {
		t.Fatal("the registry's rule and the queue's decision never differ where a smaller marker exists: the markers would not be needed")
	}
	t.Logf("%d decisions checked with no smaller marker; %d differ where one exists", decided, differ)
}

// registryOf is the registry a chained waiter at node w reads: an entry for
// every node ahead of it (all hold, and registered), and a marker of each
// node of the queue whose first look listed a larger size ahead of it
// (registry.go, markSize).
func registryOf(sizes []int, w int) registry {
	r := registry{read: true}
	for j, s := range sizes {
		if j < w {
			// Chained or not, an entry counts: some of each.
			kind := byte(entryChained)
			if (j+w)%2 == 1 {
				kind = entryUnchained
			}
			r.items = append(r.items, regItem{kind: kind, seq: int32(j), size: s})
		}
		if j > 0 && slices.Max(sizes[:j]) > s {
			r.items = append(r.items, regItem{kind: entryMarker, seq: int32(j), size: s})
		}
	}
	return r
}

// smallerMarker reports whether some node of the queue, of a size below
// size, has a node of a larger size ahead of it: it makes a marker of its
// size, under the design.
func smallerMarker(sizes []int, size int) bool {
	for j, s := range sizes {
		if s < size && slices.Max(sizes[:j+1]) > s {
			return true
		}
	}
	return false
}
