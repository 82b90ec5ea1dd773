package zklock

import "fmt"

// policy is everything the engine asks of a lock's recipe: how its nodes
// are named, how its path is made, which children make the path unusable,
// who holds, what else to watch, and whether its participants are traced.
// The engine knows no recipe: it asks the policy of each [Lock], and a
// recipe's policy carries its own facts (a semaphore's size, a kazoo
// layout's names). Every recipe's policy implements it the same way: a
// [Driver] (a user's, or a recipe's) through [adapt], zklock's semaphore
// by [semaphorePolicy], and a policy whose nodes, path or tracing differ
// by a decorator that embeds another and says what differs (kazooNamed,
// persistentPath and curatorLeases in semaphore_layout.go, untraced in
// rwlock_shared.go). No policy keeps state between questions.
type policy interface {
	fmt.Stringer // the policy in errors: a user's Driver's type

	// kind is the kind of the nodes the participants write.
	kind() Kind
	// newID returns the protected id of the nodes of one attempt.
	newID() (string, error)
	// nodePrefix is the name of a node of id before ZooKeeper's sequence.
	nodePrefix(id string) string
	// idPrefix is what the name of every node of id starts with.
	idPrefix(id string) string
	// pathNode is how the lock path is made when it is missing: its data,
	// and whether it is persistent (else a container, which the server
	// deletes once it is empty).
	pathNode() (data []byte, persistent bool)
	// refuses reports a plain child that makes the path unusable: the
	// engine fails with ErrUnknownNode rather than decide.
	refuses(name string) bool

	// decide decides for the participant of q. A decision may instead ask
	// the engine for reads (decision.reads): the engine makes them, after
	// the read of q.kids and on the same session, and asks again with
	// their answers in the question. It makes each at most once per
	// decision; the path's data once per attempt, given to every later
	// question of the attempt ([participant.decideIn]).
	decide(q question) decision
	// size is the size node k counts with under the policy
	// ([Participant.Size]); path is the lock path's data if a decision
	// asked for it, else nil. 0: none.
	size(k Child, path []byte) int
	// live is a size that the participants follow while they wait, nil
	// if none: the engine reads it with every first look and watches it
	// while waiting; a change makes the waiter decide again.
	live() liveSize
	// traced reports whether the Client's [Trace] hears of the lock's
	// participants (a shared read node's lock: its sub-leases are traced
	// instead, rwlock_shared.go).
	traced() bool
	// handsOff reports that a participant holds exactly when its one node
	// is first, and otherwise watches its immediate predecessor alone: the
	// handoff by grant then applies (handoff.go).
	handsOff() bool
	// registers is the size a participant registers with in the lock's
	// registry (registry.go): a zklock-layout semaphore's; 0 for none.
	registers() int
}

// question is what a policy decides on: the participant whose nodes are
// kids[first..last] on one read of the path's sorted children, and the
// answers to the reads an earlier decision on that read asked for.
type question struct {
	kids        []Child
	first, last int

	// rule: for a listing ([Participants]), not a grant: decide by the
	// nodes up to last alone, asking for no marks.
	rule bool

	path     []byte // the lock path's data...
	pathRead bool   // ...once read (reads.path)

	marks     map[int]bool // for each node asked about (reads.marks), whether it carries the held-back mark...
	marksRead bool         // ...once read
}

// reads are what a decision asks the engine to read before it decides
// again.
type reads struct {
	path  bool  // the lock path's data
	marks []int // whether these children carry the held-back mark (heldback.go)
}

// decision is the engine's view of a [Decision]: a policy's answer.
type decision struct {
	Decision

	// reads: not decided yet; read these and ask again.
	reads reads

	// awaitHold: the one watched child belongs to a participant that is
	// itself waiting; decide again as soon as that one holds (it changes
	// its node's data version), not only when it is deleted.
	awaitHold bool

	// announce: on a decision that holds, tell successors waiting with
	// awaitHold (bump the version of our last node), if any may be: the
	// engine skips it when we never waited and nobody is behind us
	// ([participant.step]).
	announce bool

	// behind: set when the rule lets the participant hold and the count
	// of the leases that may be held does not ([semaphorePolicy.ruleHolds]):
	// held back, it marks its last node ([heldBackMark]) and waits,
	// watching too these nodes queued behind it, whose going or mark may
	// lift the count: the groups behind it that the rule lets hold and
	// that carry no mark, then the first node of a size the count exceeds
	// (so never empty).
	behind []int
}

// open reports whether d asks for a read that q has not answered yet. A
// read asked for again once answered is not made again: each is made at
// most once per decision, so a policy cannot keep the engine reading.
func (d decision) open(q question) bool {
	return d.reads.path && !q.pathRead || d.reads.marks != nil && !q.marksRead
}

// nodes is what a policy has unless it says otherwise: zklock's own names
// for nodes of one kind (`_c_<uuid>-<name><seq>`, Curator's), a container
// path, no child refused, no live size, traced.
type nodes struct{ k Kind }

func (n nodes) kind() Kind                  { return n.k }
func (nodes) newID() (string, error)        { return newID() }
func (n nodes) nodePrefix(id string) string { return nodePrefix(id, n.k) }
func (nodes) idPrefix(id string) string     { return protectedPrefix + id + "-" }
func (nodes) pathNode() ([]byte, bool)      { return nil, false }
func (nodes) refuses(string) bool           { return false }
func (nodes) size(Child, []byte) int        { return 0 }
func (nodes) live() liveSize                { return nil }
func (nodes) traced() bool                  { return true }
func (nodes) handsOff() bool                { return false }
func (nodes) registers() int                { return 0 }
func (n nodes) String() string              { return "zklock " + n.k.String() + " policy" }

// driverPolicy is the one adapter of a [Driver] onto the engine: zklock's
// names for the Driver's kind, and its GetsTheLock as the decision, given
// every child of the read (the Driver's contract says what it may use).
// Mutex, both sides of RWMutex, Election, MultiLock's paths, the Curator
// layout's leases and a user's NewLock all decide through it.
type driverPolicy struct {
	nodes
	d Driver
}

// adapt is d's policy.
func adapt(d Driver) policy { return driverPolicy{nodes{d.Kind()}, d} }

func (p driverPolicy) decide(q question) decision {
	return decision{Decision: p.d.GetsTheLock(q.kids, q.first, q.last)}
}

func (p driverPolicy) String() string { return fmt.Sprintf("driver %T", p.d) }

// handsOff: zklock's exclusive drivers say so ([exclusiveDriver]); a
// user's Driver never does, since the engine cannot know that it holds
// only when first.
func (p driverPolicy) handsOff() bool {
	h, ok := p.d.(interface{ handsOff() bool })
	return ok && h.handsOff()
}
