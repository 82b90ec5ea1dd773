package zklock

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

// semaphoreDriver: at most max holders, in queue order. The nodes of one
// participant (one Owner, consecutive) form a group, and a group holds when
// its last node is among the first max nodes. Groups ahead of a holding
// group hold too, so holders are always a prefix of the queue.
//
// Waking exactly the right waiter on any release, with O(1) notifications:
//
//   - The first waiting group (every group ahead of it holds) watches every
//     node ahead of it, at most max of them. Any release wakes it and
//     nobody else.
//   - Any later group watches the last node of the group just ahead of it,
//     and wakes when that group is deleted or announces that it holds
//     (awaitHold/announce): then it is the first waiting group.
//
// Curator's deprecated InterProcessSemaphore watches only node i-max, so a
// release out of order leaves the next waiter asleep while a lease is free.
type semaphoreDriver struct{ max int }

func (semaphoreDriver) Kind() Kind { return KindLease }

func (d semaphoreDriver) GetsTheLock(children []Child, first, last int) Decision {
	return d.decide(children, first, last).Decision
}

func (d semaphoreDriver) decide(_ []Child, first, last int) decision {
	if last < d.max {
		return decision{Decision: Decision{Holds: true}, announce: true}
	}
	prev := first - 1 // the last node of the group ahead; first > 0 since last-first < max
	if prev < d.max {
		// The group ahead holds, and so does everything before it.
		watch := make([]int, first)
		for i := range watch {
			watch[i] = i
		}
		return decision{Decision: Decision{Watch: watch}}
	}
	return decision{Decision: Decision{Watch: []int{prev}}, awaitHold: true}
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
