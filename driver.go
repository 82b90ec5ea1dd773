package zklock

// Driver is a lock policy: it decides, from the sorted children of a lock
// path, whether a participant holds the lock and, if not, which siblings it
// must watch. [Mutex], both sides of [RWMutex] and [Semaphore] are drivers on
// one engine (Curator's LockInternals split); [NewLock] runs a user's own.
//
// The engine relies on two properties of every Driver, and a Driver must have
// them:
//
//   - GetsTheLock depends only on children[0..last]: nodes behind a
//     participant never decide whether it holds.
//   - Holding is monotone: removing a child ahead of first never turns Holds
//     into not Holds.
//
// ZooKeeper's sequence numbers only grow, so no child can ever appear ahead
// of a participant once it is queued; children ahead can only go away. With
// the two properties above, when a watched child is deleted and the driver
// says the snapshot without that child holds, the participant holds now,
// without reading the children again. That saves a round trip on every
// handoff.
type Driver interface {
	// LockName is the name written into the participant's nodes:
	// `_c_<uuid>-<LockName><seq>`. It must be one of the names zklock
	// parses ("lock-", "__READ__", "__WRIT__", "lease-") so that other
	// participants can tell what the node is.
	LockName() string

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
	// of them is deleted (or, with AwaitHold, announces that it holds). It
	// must not be empty when Holds is false.
	Watch []int

	// AwaitHold says that the one watched child belongs to a participant
	// that is itself waiting, and that this participant must decide again
	// as soon as that one holds, not only when it is deleted. The watched
	// participant's driver must set Announce.
	AwaitHold bool

	// Announce, on a decision that holds, asks the engine to announce the
	// hold to successors waiting with AwaitHold, if the participant had to
	// wait (it bumps the version of its last node).
	Announce bool
}

// exclusiveDriver: only the first node holds; everyone watches their
// predecessor. Mutex and the write side of the RWMutex (Curator's
// StandardLockInternalsDriver with maxLeases 1).
type exclusiveDriver struct{ name string }

func (d exclusiveDriver) LockName() string { return d.name }

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

func (readDriver) LockName() string { return lockNameRead }

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
//     (AwaitHold/Announce): then it is the first waiting group.
//
// Curator's deprecated InterProcessSemaphore watches only node i-max, so a
// release out of order leaves the next waiter asleep while a lease is free.
type semaphoreDriver struct{ max int }

func (semaphoreDriver) LockName() string { return lockNameLease }

func (d semaphoreDriver) GetsTheLock(children []Child, first, last int) Decision {
	if last < d.max {
		return Decision{Holds: true, Announce: true}
	}
	prev := first - 1 // the last node of the group ahead; first > 0 since last-first < max
	if prev < d.max {
		// The group ahead holds, and so does everything before it.
		watch := make([]int, first)
		for i := range watch {
			watch[i] = i
		}
		return Decision{Watch: watch}
	}
	return Decision{Watch: []int{prev}, AwaitHold: true}
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
