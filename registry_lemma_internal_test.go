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
			registry := w < slices.Min(sizes[:w+1])
			if !smallerMarker(sizes, sizes[w]) {
				decided++
				if registry != queue {
					t.Fatalf("sizes %v, marks %v: node %d: from the registry holds=%v, from the queue %v, with no marker below its size %d",
						sizes, marked, w, registry, queue, sizes[w])
				}
			} else if registry != queue {
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
