package zklock

import (
	"slices"
	"testing"

	"github.com/zkrecipes/zklock/internal/session"
)

// TestPendingLeasesRule reads Curator semaphores' node sets, as
// curatorParticipants has them (lease nodes in sequence order, the stat of
// the inner mutex's first node), and checks which lease nodes hold: all but
// the newest group, when that group is of the mutex holder's session and
// newer than its mutex node. Sessions 1, 2, 3 are processes of their own;
// "shared" is one CuratorFramework whose threads share session 7.
func TestPendingLeasesRule(t *testing.T) {
	t.Parallel()
	type lease struct {
		name    string
		session int64
		czxid   int64
	}
	const shared = 7
	for _, tc := range []struct {
		name   string
		leases []lease
		head   session.Stat // the mutex holder's node
		holds  []string
	}{
		{
			name:  "no lease",
			head:  session.Stat{EphemeralOwner: 1, Czxid: 10},
			holds: nil,
		},
		{
			name:   "separate sessions: the mutex holder waits with its lease",
			leases: []lease{{"a", 1, 11}, {"b", 2, 13}, {"c", 3, 15}},
			head:   session.Stat{EphemeralOwner: 3, Czxid: 14},
			holds:  []string{"a", "b"},
		},
		{
			name:   "separate sessions: the mutex holder has no lease yet",
			leases: []lease{{"a", 1, 11}, {"b", 2, 13}},
			head:   session.Stat{EphemeralOwner: 3, Czxid: 12},
			holds:  []string{"a", "b"},
		},
		{
			// The case: 3 threads, 2 leases, one session; the
			// third queued on the mutex before the others made their
			// leases. Reading every newer lease of the session as
			// waiting showed 0 holders and 3 waiters.
			name:   "shared session: threads queued early on the mutex",
			leases: []lease{{"t1", shared, 11}, {"t2", shared, 13}, {"t3", shared, 15}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 10},
			holds:  []string{"t1", "t2"},
		},
		{
			name:   "shared session: the waiting thread is not the last to have queued",
			leases: []lease{{"t2", shared, 12}, {"t3", shared, 14}, {"t1", shared, 17}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 16},
			holds:  []string{"t2", "t3"},
		},
		{
			name:   "shared session, others hold too: only the newest lease waits",
			leases: []lease{{"a", 1, 11}, {"t1", shared, 13}, {"t2", shared, 15}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 12},
			holds:  []string{"a", "t1"},
		},
		{
			name:   "the newest lease is another session's: the mutex holder has none yet",
			leases: []lease{{"t1", shared, 11}, {"a", 1, 13}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 10},
			holds:  []string{"t1", "a"},
		},
		{
			name:   "the holder's session's newest lease is older than its mutex node",
			leases: []lease{{"t1", shared, 11}, {"t2", shared, 13}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 14},
			holds:  []string{"t1", "t2"},
		},
		{
			// Between the grant of the mutex and the create of its lease,
			// a shared-session thread makes the newest lease of its
			// session look like its own: a round trip's misreading,
			// documented at pendingLeases, that this pins.
			name:   "shared session: the holder's create not yet made (transient)",
			leases: []lease{{"t1", shared, 11}, {"t2", shared, 13}},
			head:   session.Stat{EphemeralOwner: shared, Czxid: 10},
			holds:  []string{"t1"},
		},
		{
			name: "zklock AcquireN: the newest multi waits whole",
			leases: []lease{{"n1", 1, 11}, {"n2", 1, 11},
				{"w1", 1, 13}, {"w2", 1, 13}},
			head:  session.Stat{EphemeralOwner: 1, Czxid: 12},
			holds: []string{"n1", "n2"},
		},
		{
			name: "zklock AcquireN on one Client: an older multi newer than the mutex node holds",
			leases: []lease{{"n1", 1, 11}, {"n2", 1, 11},
				{"w1", 1, 13}, {"w2", 1, 13}},
			head:  session.Stat{EphemeralOwner: 1, Czxid: 10},
			holds: []string{"n1", "n2"},
		},
	} {
		tc := tc // go 1.21: one tc per subtest
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var nodes []semNode
			for _, l := range tc.leases {
				nodes = append(nodes, semNode{node: l.name, kind: KindLease, st: session.Stat{EphemeralOwner: l.session, Czxid: l.czxid}})
			}
			n := pendingLeases(nodes, tc.head)
			if n < 0 || n > len(nodes) {
				t.Fatalf("pendingLeases = %d of %d leases", n, len(nodes))
			}
			var holds []string
			for _, node := range nodes[:len(nodes)-n] {
				holds = append(holds, node.node)
			}
			if !slices.Equal(holds, tc.holds) {
				t.Errorf("holders %q, want %q", holds, tc.holds)
			}
		})
	}
}
