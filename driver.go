package zklock

import (
	"math"
	"strings"
)

// Driver is a lock policy: it decides, from the sorted children of a lock
// path, whether a participant holds the lock and, if not, which siblings it
// must watch. [Mutex], both sides of [RWMutex], [Election] and, on each of
// its paths, [MultiLock] are drivers on one engine (Curator's
// LockInternals split, lockinternals.go); [NewLock] runs a user's own.
// zklock's [Semaphore] decides by a policy of its own on the same engine,
// which also counts the participants queued behind a participant (its
// sizes may differ: see [Semaphore]); no Driver needs to.
//
// What the engine does with a Driver. It creates the participant's node,
// reads the children of the lock path, sorts the lock nodes among them in
// queue order (a child with no sequence suffix is left out; one of no
// format zklock knows fails the acquire with ErrUnknownNode) and calls
// GetsTheLock with all of them and the participant's first and last index.
// If the decision holds, the participant holds. If not, a TryAcquire fails
// with ErrLocked; an Acquire reads each child Watch names with a watch
// (getData), and when any of them is deleted or its data changes (at once
// if one is gone already), or the session's connection changes, it reads
// the children again and asks again. It takes the lock only on a read of
// the children that lists the participant's node and on which GetsTheLock
// holds (the first look, or the read a waiter makes when a watched child
// changes), never on a watch notification alone: that read's pzxid is the
// lease's fencing token (participant.token; docs/design.md, "Tokens"). A
// decision that neither holds nor watches, or watches a child that is not
// ahead of the participant's first node, fails the acquire with
// ErrInvalidArgument. [Lock.Participants] asks it about every participant
// of one read to tell holders from waiters.
//
// The engine relies on two properties of every Driver, and a Driver must
// have them:
//
//   - GetsTheLock depends only on children[0..last]: nodes behind a
//     participant never decide whether it holds. The engine passes them
//     all; it grants on a read made before later nodes queued, and a
//     MultiLock decides one path at a time, so a hold that a node behind
//     could take back would not be a hold.
//   - Holding is monotone: removing a child ahead of first never turns Holds
//     into not Holds.
type Driver interface {
	// Kind is the kind of node the participant writes, and so the name it
	// carries: `_c_<uuid>-<name><seq>` with "lock-" for KindMutex,
	// "__READ__" for KindRead, "__WRIT__" for KindWrite, "lease-" for
	// KindLease and "latch-" for KindLatch. Other participants, in any library, read it back as that
	// kind. [NewLock] refuses KindUnknown. The engine asks once, when the
	// lock is made.
	Kind() Kind

	// GetsTheLock decides for the participant whose nodes are
	// children[first..last] (first == last, except for
	// [Semaphore.AcquireN]). children is sorted in queue order, lists every
	// child of the read and is never empty. It must not retain children.
	GetsTheLock(children []Child, first, last int) Decision
}

// Decision is what a [Driver] says about one participant.
type Decision struct {
	// Holds reports that the participant holds the lock.
	Holds bool

	// Watch lists the children (indices, all before first) that the
	// participant waits on when it does not hold: it decides again when any
	// of them is deleted or its data changes. It must not be empty when
	// Holds is false: the acquire fails with ErrInvalidArgument if it is.
	Watch []int
}

// exclusiveDriver: only the first node holds; everyone watches their
// predecessor. Mutex and the write side of the RWMutex (Curator's
// StandardLockInternalsDriver with maxLeases 1).
type exclusiveDriver struct{ kind Kind }

func (d exclusiveDriver) Kind() Kind { return d.kind }

// handsOff: a node holds exactly when it is first, and watches its
// immediate predecessor otherwise (handoff.go).
func (exclusiveDriver) handsOff() bool { return true }

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

// semaphorePolicy is zklock's semaphore, whose participants may have been
// made with different sizes: a rolling deploy that resizes it meets
// replicas of the old size and of the new on one path
// (docs/semantics.md, "Resizing a semaphore"). Every lease node carries
// the size of the Semaphore that made it in its protected id
// ([newSizedID]), so the policy decides from the children's names alone,
// never from their data (a request per node per decision; and [Revoke]
// and the hand-over below write it). A node whose id carries no size (a
// build from before sizes were carried, or a foreign node on the path)
// counts as legacy: the size recorded in the path's data by such builds,
// which the policy asks the engine to read when one is ahead
// ([participant.decideIn]; [Participants] reads it the same way); 0 when
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
// The count: what the engine adds to the rule before it grants
// ([semaphoreRule.ruleHolds]; a listing asks for the rule alone:
// [question].rule). The rule bounds the leases by the sizes up to the last
// holder; a smaller size that queues behind the holders bounds nothing by it, and
// a lease granted out of queue order (z, behind x, held on a read made
// before x's first read: x's server lagged) would let x take a lease on
// top of z's once the smaller size has queued. So, deciding for a group G
// on a read R that the rule lets hold, the engine counts the leases that
// may be held with G's: every node up to G's last, and every node of the
// groups behind G that the rule lets hold (the prefix) and whose last node
// does not carry the held-back mark; G is granted only if that count is at
// most every size R lists. If the whole prefix is within every size
// listed, no mark is read: a queue of one size costs nothing more. A group
// the count refuses marks its last node held back ([heldBackMark],
// [participant.mark]) and waits; before it is granted, it takes the mark
// off and decides again on a read made after that ([participant.unmark]).
// Only a node's owner marks it.
//
// Why it is safe. Let L be the leases held at some moment, and z the one
// whose deciding read R_z saw the latest state (reads of one ZooKeeper
// ensemble see prefixes of its one order of transactions). Suppose some
// lease in L was decided on a read listing a live node N of size s; then
// so was z's (its state is the latest), and R_z lists N: the claim is
// |L| <= s.
//
//   - A lease y in L ahead of z was created before z's node and lives on:
//     R_z lists it, ahead of z. It is in z's count.
//   - A lease y in L behind z holds by the rule on its own read R_y, so by
//     monotony on R_z, which is at a later state and lists y (created
//     before R_y): y is in R_z's prefix. If y ever marked its node, it took
//     the mark off before R_y, on its own session. z reads the marks after
//     R_z on its session: at a state at least R_z's (a session's reads see
//     states that only grow: the reads are served in order, and a session
//     moves only to a server that has seen what it saw), at least R_y's,
//     which on y's session follows its unmark (a session reads its own
//     writes). So z finds y unmarked, and y is in z's count.
//   - A mark of ours cannot come back after the unmark: a session's writes
//     apply in order, and one sent through a server the session has left
//     fails (SessionMovedException) rather than apply late.
//
// So |L| <= z's count <= s. The leases held before a smaller size queued
// are not taken back: while a participant of size s lives, more than s
// leases are held only if every one of them was decided on a read made
// before it queued. TestSemaphoreRollingResize (on a real ZooKeeper) and
// TestSchedules check exactly that, from the zxids: a lease's token (its
// read's pzxid) at least the czxid of a smaller size queued means the read
// listed it.
//
// Why nobody waits for ever. A mark is only read by the groups ahead of
// the marked one, and a group's count depends only on the marks behind it:
// the last group of the prefix decides by its index alone, the one ahead
// of it once that one has marked or holds, and so on to the front. A group
// refused by the count watches every node ahead, each unmarked group
// behind it in the prefix (for its mark) and the first node of a size the
// count exceeds (for its departure): the count falls, or the bound rises,
// only when one of them changes. It writes its mark on every such decision
// unless the mark is there (so one that failed, or that a Revoke replaced,
// comes back; it watches its own node for that), since a group ahead
// counts it until it does. Once all have decided, the front groups hold as
// far as the smallest size allows: a group still refused has more nodes up
// to it and holding behind it than that size. Marks cost a write per
// held-back wait, in the time a resize's sizes share a path only.
//
// Waking the right waiter on any release, with O(1) notifications. A
// waiting group's decision changes only when a node ahead of it goes, or,
// for one the count holds back, when a node behind it that it watches
// goes or changes its mark.
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
//   - A group the count holds back (the rule lets it hold, the count
//     does not) watches every node ahead of it, as many as the smallest
//     size ahead at most, each unmarked group behind it that the rule
//     lets hold, the first node of a size the count exceeds, and its own
//     node (see "Why nobody waits for ever"). A group behind it follows by its own
//     watches: the rule lets the held-back group hold, so the group behind
//     watches every node ahead of it, or is in the prefix and counts for
//     itself; the held-back group need not announce for it.
//
// A departure that raises the min is a departure ahead: the group behind
// the node that went watched it (first waiting or not) and decides again,
// and the groups behind it follow one announce at a time. Curator's
// deprecated InterProcessSemaphore watches only node i-max, so a release
// out of order leaves the next waiter asleep while a lease is free.
type semaphorePolicy struct {
	nodes     // lease nodes, `_c_<uuid>-lease-<seq>`
	max   int // the Semaphore's size, carried in its nodes' ids; 0 for a policy that only decides ([Participants])
}

// newSemaphorePolicy is the policy of a zklock-layout Semaphore of size max.
func newSemaphorePolicy(max int) semaphorePolicy { return semaphorePolicy{nodes{KindLease}, max} }

// newID: every node carries the Semaphore's size in its protected id.
func (s semaphorePolicy) newID() (string, error) { return newSizedID(s.max) }

// refuses the plain children of another library's semaphore layout
// ([foreignSemaphore]): their holders cannot be counted.
func (semaphorePolicy) refuses(name string) bool { return foreignSemaphore(name) }

func (semaphorePolicy) size(k Child, path []byte) int { return newSemaphoreRule(path).recorded(k) }

func (semaphorePolicy) String() string { return "zklock semaphore policy" }

// registers: zklock's semaphore keeps a registry of its holders
// (registry.go); a policy that only decides ([Participants]) has no size.
func (s semaphorePolicy) registers() int { return s.max }

// decide asks for the path's data first if a node up to last carries no
// size in its id (the legacy size may decide; our own nodes always carry
// one), then decides by the rule and the count ([semaphoreRule]).
func (semaphorePolicy) decide(q question) decision {
	if !q.pathRead && !sizedAhead(q.kids[:q.last+1]) {
		return decision{reads: reads{path: true}}
	}
	return newSemaphoreRule(q.path).decide(q)
}

// semaphoreRule is the semaphore's decision, once the legacy size is
// known: the size of a node whose id carries none.
type semaphoreRule struct {
	legacy int // 0: no bound
}

// newSemaphoreRule reads the legacy size from the path's data (nil: not
// read, or none recorded).
func newSemaphoreRule(path []byte) semaphoreRule {
	n, _ := SemaphoreSize(path)
	return semaphoreRule{legacy: n}
}

func (d semaphoreRule) decide(q question) decision {
	children, first, last := q.kids, q.first, q.last
	if q.rule {
		// The rule alone, from the nodes up to last: whether the
		// participant holds, or may hold by a grant made before a smaller
		// size queued behind it ([Participants] shows that).
		children = children[:last+1]
	}
	ahead := d.limit(children[:first]) // m(first-1)
	rule := min(ahead, d.sizeOf(children[last]))
	if last < rule {
		return d.ruleHolds(q, children, rule)
	}
	prev := first - 1 // the last node of the group ahead
	switch {
	case prev < 0:
		// Our own group exceeds our own size, which NewSemaphore and
		// AcquireN refuse: the engine fails the acquire.
		return decision{}
	case prev < ahead:
		// The rule lets the group ahead hold, and everything before it:
		// they hold, or wait only for the count.
		return decision{Decision: Decision{Watch: seqTo(first)}}
	}
	return decision{Decision: Decision{Watch: []int{prev}}, awaitHold: true}
}

// ruleHolds decides for q's group that the rule lets hold (m is the
// smallest size among the nodes up to its last): it holds unless the
// leases that may be held with it would be more than the size of a node
// of children (the count; the proof is at [semaphorePolicy]). Which groups
// behind carry the held-back mark it asks the engine, which reads them
// after the read of children and asks again with q.marks.
func (d semaphoreRule) ruleHolds(q question, children []Child, m int) decision {
	first, last := q.first, q.last
	holds := decision{Decision: Decision{Holds: true}, announce: true}
	tail := sizeTail(children[last].Owner)
	h := d.prefixEnd(children, last+1, m, tail)
	small := blocker(children[h:], h-1, tail)
	if small < 0 {
		return holds // even if the rule's every holder holds, no size listed is exceeded
	}
	small += h // nodes before it are of sizes above h-1, so above count-1 too
	groups := groupEnds(children, last+1, h)
	if len(groups) > 0 && !q.marksRead {
		return decision{reads: reads{marks: groups}}
	}
	count, start := last+1, last+1
	var behind []int
	for _, l := range groups {
		if !q.marks[l] {
			count += l - start + 1 // it may hold: count it
			behind = append(behind, l)
		}
		start = l + 1
	}
	b := blocker(children[small:], count-1, tail)
	if b < 0 {
		return holds
	}
	return decision{Decision: Decision{Watch: seqTo(first)}, behind: append(behind, small+b)}
}

// prefixEnd is the end of the rule's holders from from on, where m is the
// smallest size among the nodes before from (a group's end): the index of
// the first node whose group the rule keeps waiting, or len(children).
// Nodes whose ids end in tail ([sizeTail]: ours, in the prefix) are not
// parsed: their size is ours, at least m.
func (d semaphoreRule) prefixEnd(children []Child, from, m int, tail string) int {
	for i := from; i < len(children); {
		_, l := groupOf(children, i)
		if tail == "" || !strings.HasSuffix(children[i].Owner, tail) {
			m = min(m, d.sizeOf(children[i]))
		}
		if l >= m {
			return i
		}
		i = l + 1
	}
	return len(children)
}

// sizeTail is the end of own's id that carries its size, "" if it carries
// none: a node whose id ends the same way is of own's size, which the
// callers, deciding for own's group in the rule's prefix, need not parse
// again. A queue of one size then costs a string comparison per node.
func sizeTail(own string) string {
	if _, ok := idSize(own); ok {
		return own[len(own)-8:]
	}
	return ""
}

// groupEnds lists the last node of each group in children[from:to], which
// starts at a group's first node.
func groupEnds(children []Child, from, to int) []int {
	var ends []int
	for i := from; i < to; {
		_, l := groupOf(children, i)
		ends = append(ends, l)
		i = l + 1
	}
	return ends
}

// blocker is the index in kids of the first node whose id carries a size
// of at most n (one that a count above n exceeds), or -1. Nodes whose ids
// end in tail ([sizeTail]) are passed over without parsing: the caller's
// own size, in the rule's prefix, is above every n it asks about.
func blocker(kids []Child, n int, tail string) int {
	for i, k := range kids {
		if tail != "" && strings.HasSuffix(k.Owner, tail) {
			continue
		}
		if s, ok := idSize(k.Owner); ok && s <= n {
			return i
		}
	}
	return -1
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
func (d semaphoreRule) limit(kids []Child) int {
	m := math.MaxInt
	for _, k := range kids {
		m = min(m, d.sizeOf(k))
	}
	return m
}

// sizeOf is the size a node counts with: the one its id carries, else the
// legacy size, else no bound.
func (d semaphoreRule) sizeOf(k Child) int {
	if n := d.recorded(k); n > 0 {
		return n
	}
	return math.MaxInt
}

// recorded is the size a node was made with, as far as its name or the
// legacy record tells; 0 if neither does.
func (d semaphoreRule) recorded(k Child) int {
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

// holders reports, for each child, whether it holds the lock by the rule
// of the policy pick chooses for it, as a listing sees it
// ([question].rule); path is the lock path's data, if read. askPath: a
// policy asked for the path's data, which was not read (then read it, and
// ask again).
func holders(children []Child, pick func(Child) policy, path []byte, pathRead bool) (held []bool, askPath bool) {
	held = make([]bool, len(children))
	for i := 0; i < len(children); {
		first, last := groupOf(children, i)
		d := pick(children[i]).decide(question{kids: children, first: first, last: last, rule: true, path: path, pathRead: pathRead})
		askPath = askPath || d.reads.path && !pathRead
		for j := first; j <= last; j++ {
			held[j] = d.Holds
		}
		i = last + 1
	}
	return held, askPath
}
