package zklock

import (
	"math"
	"strings"
)

// Driver is a lock policy: it decides, from the sorted children of a lock
// path, whether a participant holds the lock and, if not, which siblings it
// must watch. [Mutex], both sides of [RWMutex], [Semaphore], [Election] and,
// on each of its paths, [MultiLock] are drivers on one engine (Curator's
// LockInternals split, lockinternals.go); [NewLock] runs a user's own.
//
// The engine relies on two properties of every Driver, and a Driver must have
// them:
//
//   - GetsTheLock depends only on children[0..last]: nodes behind a
//     participant never decide whether it holds.
//   - Holding is monotone: removing a child ahead of first never turns Holds
//     into not Holds.
//
// The engine takes the lock only on a read of the children that lists the
// participant's node and on which GetsTheLock holds (the first look, or the
// read a waiter makes when a watched child changes), never on a watch
// notification alone: that read's pzxid is the lease's fencing token
// (participant.token; docs/design.md, "Tokens").
type Driver interface {
	// Kind is the kind of node the participant writes, and so the name it
	// carries: `_c_<uuid>-<name><seq>` with "lock-" for KindMutex,
	// "__READ__" for KindRead, "__WRIT__" for KindWrite, "lease-" for
	// KindLease and "latch-" for KindLatch. Other participants, in any library, read it back as that
	// kind. [NewLock] refuses KindUnknown.
	Kind() Kind

	// GetsTheLock decides for the participant whose nodes are
	// children[first..last] (first == last, except for
	// [Semaphore.AcquireN]). children is sorted in queue order and never
	// empty. It must not retain children.
	GetsTheLock(children []Child, first, last int) Decision
}

// Decision is what a [Driver] says about one participant.
type Decision struct {
	// Holds reports that the participant holds the lock.
	Holds bool

	// Watch lists the children (indices, all before first) that the
	// participant waits on when it does not hold: it decides again when any
	// of them is deleted. It must not be empty when Holds is false: the
	// acquire fails with ErrInvalidArgument if it is.
	Watch []int
}

// decision is the engine's view of a Decision. It adds the hand-over
// protocol of zklock's semaphore, which no user driver needs.
type decision struct {
	Decision

	// awaitHold: the one watched child belongs to a participant that is
	// itself waiting; decide again as soon as that one holds (it changes
	// its node's data version), not only when it is deleted.
	awaitHold bool

	// announce: on a decision that holds, tell successors waiting with
	// awaitHold (bump the version of our last node), if any may be: the
	// engine skips it when we never waited and nobody is behind us
	// ([participant.step]).
	announce bool

	// heldBack: the index of a node queued behind the participant, of a
	// size that holds it back though the rule lets it hold; watched too,
	// as its departure may lift the bound. 0: none (no node behind is at
	// index 0).
	heldBack int
}

// handOver is implemented by drivers whose waiters wake on a predecessor's
// hold, not only on its deletion: the semaphore's.
type handOver interface {
	decide(children []Child, first, last int) decision
}

// decide asks d about the participant at children[first..last].
func decide(d Driver, children []Child, first, last int) decision {
	if h, ok := d.(handOver); ok {
		return h.decide(children, first, last)
	}
	return decision{Decision: d.GetsTheLock(children, first, last)}
}

// exclusiveDriver: only the first node holds; everyone watches their
// predecessor. Mutex and the write side of the RWMutex (Curator's
// StandardLockInternalsDriver with maxLeases 1).
type exclusiveDriver struct{ kind Kind }

func (d exclusiveDriver) Kind() Kind { return d.kind }

func (d exclusiveDriver) GetsTheLock(_ []Child, first, _ int) Decision {
	if first == 0 {
		return Decision{Holds: true}
	}
	return Decision{Watch: []int{first - 1}}
}

// readDriver: a reader holds when no writer is ahead of it. Every node that
// is not a reader counts as a writer, so a foreign exclusive node (a
// Curator or kazoo mutex) excludes readers too.
//
// A reader watches the nearest writer ahead of it, not the first (as
// Curator's reader does): when that writer goes, only the readers between
// it and the next writer wake, never the whole queue.
type readDriver struct{}

func (readDriver) Kind() Kind { return KindRead }

func (readDriver) GetsTheLock(children []Child, first, _ int) Decision {
	for i := first - 1; i >= 0; i-- {
		if children[i].Kind != KindRead {
			return Decision{Watch: []int{i}}
		}
	}
	return Decision{Holds: true}
}

// semaphoreDriver is zklock's semaphore, whose participants may have been
// made with different sizes: a rolling deploy that resizes it meets
// replicas of the old size and of the new on one path
// (docs/semantics.md, "Resizing a semaphore"). Every lease node carries
// the size of the Semaphore that made it in its protected id
// ([newSizedID]), so the driver decides from the children's names alone,
// never from their data (a request per node per decision; and [Revoke]
// and the hand-over below write it). A node whose id carries no size (a
// build from before sizes were carried, or a foreign node on the path)
// counts as legacy: the size recorded in the path's data by such builds,
// read by the engine when one is ahead ([participant.driverFor]); 0 when
// none is recorded, and the node then sets no bound of its own.
//
// The rule: node i (0-based, in queue order) holds iff i < m(i), where
// m(i) is the smallest size among nodes 0..i. The nodes of one participant
// (one Owner, consecutive, one id and so one size: [Semaphore.AcquireN])
// form a group, which holds iff its last node does: nobody holds part of
// its request while it waits for the rest.
//
// Why it is safe. ZooKeeper names a sequential node with its parent's
// cversion at the create's transaction, which the leader assigns in its
// one order of transactions (PrepRequestProcessor.pRequest2Txn), and the
// queue is ordered by it ([sortChildren]): every node ahead of a node was
// created before it, and no node ever joins ahead of one that is there.
// Names never change. So, while a node x lives, its index i only falls
// and m(i) only rises (a departure removes a term from the min; an
// arrival adds none ahead of x):
//
//   - Once x holds it holds in every later state (the [Driver] contract's
//     monotony), and whether it holds depends on children[0..x] only.
//   - Holders are a prefix: if x at i holds and y at j < i, then
//     m(j) >= m(i) > i > j, so y holds.
//   - If the holders are 0..h-1, then h-1 < m(h-1): there are at most
//     m(h-1) of them, the smallest size among the holders. The engine
//     grants a lease only on a read where its node holds, and by monotony
//     it still holds in every later state while it lives: at any moment
//     the leases held are at most the smallest size of any participant
//     that holds one, or is queued ahead of one that does.
//
// The grant: the engine grants a group only on a read where, besides the
// rule, no node queued behind it carries a size of at most last (the index
// of its last node): a lease is never granted on a read that lists a
// participant whose size the grant would exceed ([semaphoreDriver.decide];
// [semaphoreDriver.GetsTheLock] is the rule alone, what Participants
// shows). Grants are rule holders, so all of the above still holds; and
// in any one state the groups it would grant are a prefix (a node behind
// a granted one has a larger index, so whatever holds that one back holds
// it back). What the grant adds: let z be the lease furthest back in the
// queue at some moment, granted on a read R. Every lease held is z or
// ahead of it, and z's index only fell since R, so the leases held are at
// most index_R(z) + 1, which is below every size R listed, ahead of z or
// behind it. A participant of size s that queued before R and lives on is
// listed by R. So: while a participant of size s lives, more than s leases
// are held only if the lease furthest back in the queue was granted before
// it queued.
//
// Those the grant cannot bound. Leases held before a smaller size queued
// are not taken back; nor is a lease that z's precedes in the queue but
// that was granted after z's, within the smaller size by its position
// alone. That comes of a grant out of queue order: z, behind x, holds on
// a read made before x's first read (x's server lagged, or x woke later
// than z from the same release), since x holds by the rule on any read
// that z does. If a smaller size queues between z's read and x's, x is
// granted within it by position, and z's lease comes on top. Take a, b, c
// of size 3 and a newcomer N of size 2 behind them. b and c may hold from
// reads made before N's create while a's first read lagged: a must then
// not be granted. But if all three read after N's create, nobody holds,
// and a must be granted, or nobody ever is. a's read lists the same names
// in both histories, so no rule from the names alone can close this: a
// rule must over-grant in one or deadlock in another. Closing it needs a
// record of each grant in ZooKeeper, a write per lease that this layout
// does without. TestSemaphoreRollingResize (on a real ZooKeeper) and
// TestSchedules check what the grant does bound, from the zxids: the read
// that granted the lease furthest back (its token) against the create of
// each smaller size queued.
//
// Waking the right waiter on any release, with O(1) notifications. A
// waiting group's decision changes only when a node ahead of it goes, or,
// for one the grant holds back, when a node behind that holds it back
// goes.
//
//   - The first waiting group (the group just ahead of it holds, and so
//     does every group ahead) watches every node ahead of it: as many as
//     the smallest size ahead, at most. Any departure wakes it.
//
//   - Any later group G cannot hold while the group P just ahead of it
//     does not (holders are a prefix). It watches P's last node, and
//     wakes when P goes, or announces that it holds (awaitHold/announce):
//     then it is the first waiting group, or holds. P announces when it
//     holds after a wait, and when the read on which it holds lists a
//     node behind it: P's read is after G's (P waited in G's read, and
//     holding is monotone), and G's node was made before G's read
//     ([participant.step]).
//
//   - A group the grant holds back (the rule lets it hold, a size behind
//     does not) watches every node ahead of it, as many as the smallest
//     size ahead at most, and the first node behind whose size holds it
//     back: its decision changes only when a node ahead goes, or when that
//     one does (the bound rises only once every such node is gone; then
//     it watches the next). A group behind it follows by its own watches:
//     the rule lets the held-back group hold, so the group behind watches
//     every node ahead of it; the held-back group need not announce for
//     it (it may hold already, by a grant before the smaller size came).
//
// A departure that raises the min is a departure ahead: the group behind
// the node that went watched it (first waiting or not) and decides again,
// and the groups behind it follow one announce at a time. Curator's
// deprecated InterProcessSemaphore watches only node i-max, so a release
// out of order leaves the next waiter asleep while a lease is free.
type semaphoreDriver struct {
	legacy int // the size of a node whose id carries none; 0: no bound
}

func (semaphoreDriver) Kind() Kind { return KindLease }

// GetsTheLock is the rule alone, from the nodes up to last: whether the
// participant holds, or may hold by a grant made before a smaller size
// queued behind it ([Participants] shows that). The engine grants by
// [semaphoreDriver.decide], which adds the bound of the sizes behind.
func (d semaphoreDriver) GetsTheLock(children []Child, first, last int) Decision {
	dec := d.decide(children[:last+1], first, last)
	return dec.Decision
}

func (d semaphoreDriver) decide(children []Child, first, last int) decision {
	ahead := d.limit(children[:first]) // m(first-1)
	rule := min(ahead, d.sizeOf(children[last]))
	if last < rule {
		if b := blocker(children[last+1:], last, children[last].Owner); b >= 0 {
			// The rule lets us hold, and a smaller size queued behind
			// does not: wait for a node ahead to go, or for that one.
			return decision{Decision: Decision{Watch: seqTo(first)}, heldBack: last + 1 + b}
		}
		return decision{Decision: Decision{Holds: true}, announce: true}
	}
	prev := first - 1 // the last node of the group ahead
	switch {
	case prev < 0:
		// Our own group exceeds our own size, which NewSemaphore and
		// AcquireN refuse: the engine fails the acquire.
		return decision{}
	case prev < ahead:
		// The rule lets the group ahead hold, and everything before it:
		// they hold, or wait only for a size behind them.
		return decision{Decision: Decision{Watch: seqTo(first)}}
	}
	return decision{Decision: Decision{Watch: []int{prev}}, awaitHold: true}
}

// blocker is the index in kids of the first node whose id carries a size
// of at most last: one that holds a group at last back. Its departure is
// the one that can lift the bound (another of the same kind keeps it).
// A node whose id ends as own's does (own's size, above last, or both
// unsized) is passed over without parsing its id: a queue of one size
// costs a string comparison per node behind.
func blocker(kids []Child, last int, own string) int {
	tail := ""
	if n, ok := idSize(own); ok && n > last {
		tail = own[len(own)-8:]
	}
	for i, k := range kids {
		if tail != "" && strings.HasSuffix(k.Owner, tail) {
			continue
		}
		if n, ok := idSize(k.Owner); ok && n <= last {
			return i
		}
	}
	return -1 // none: the caller only asks when there is one
}

// seqTo is 0, 1, ..., n-1.
func seqTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// limit is the smallest size among kids, math.MaxInt if none sets one.
func (d semaphoreDriver) limit(kids []Child) int {
	m := math.MaxInt
	for _, k := range kids {
		m = min(m, d.sizeOf(k))
	}
	return m
}

// sizeOf is the size a node counts with: the one its id carries, else the
// legacy size, else no bound.
func (d semaphoreDriver) sizeOf(k Child) int {
	if n := d.recorded(k); n > 0 {
		return n
	}
	return math.MaxInt
}

// recorded is the size a node was made with, as far as its name or the
// legacy record tells; 0 if neither does.
func (d semaphoreDriver) recorded(k Child) int {
	if n, ok := idSize(k.Owner); ok {
		return n
	}
	return d.legacy
}

// sizedAhead reports whether every node of kids carries its size in its id:
// if not, the legacy size may decide.
func sizedAhead(kids []Child) bool {
	for _, k := range kids {
		if _, ok := idSize(k.Owner); !ok {
			return false
		}
	}
	return true
}

// groupOf returns the bounds of the consecutive nodes sharing i's owner.
func groupOf(children []Child, i int) (first, last int) {
	first, last = i, i
	for first > 0 && children[first-1].Owner == children[i].Owner {
		first--
	}
	for last < len(children)-1 && children[last+1].Owner == children[i].Owner {
		last++
	}
	return first, last
}

// holders reports, for each child, whether it holds the lock, asking pick
// for the driver that applies to the child.
func holders(children []Child, pick func(Child) Driver) []bool {
	held := make([]bool, len(children))
	for i := 0; i < len(children); {
		first, last := groupOf(children, i)
		h := pick(children[i]).GetsTheLock(children, first, last).Holds
		for j := first; j <= last; j++ {
			held[j] = h
		}
		i = last + 1
	}
	return held
}
