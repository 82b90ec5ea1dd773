package zklock

import (
	"context"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// participants lists the lock's participants: holders first, then waiters,
// each in queue order. pick chooses the policy that applies to a child.
func (l *Lock) participants(ctx context.Context, pick func(Child) policy) ([]Participant, error) {
	fail := func(err error) ([]Participant, error) {
		return nil, opError("participants", l.path, err)
	}
	if ctx == nil {
		return fail(invalidf("nil context"))
	}
	names, err := listChildren(ctx, l.c, l.path)
	if err != nil || names == nil {
		return nil, opError("participants", l.path, err) // nil, nil: no path, no participants
	}
	ps, err := readParticipants(ctx, l.c, l.path, names, l.pol.refuses, pick)
	if err != nil {
		return fail(err)
	}
	return ps, nil
}

// listParticipants reads the children of path and their data, and sorts
// them into holders and waiters, each in queue order. pick chooses the
// driver that applies to a child.
func listParticipants(ctx context.Context, c *Client, path string, refuse func(string) bool,
	pick func(Child) Driver) ([]Participant, error) {
	names, err := listChildren(ctx, c, path)
	if err != nil || names == nil {
		return nil, err
	}
	return readParticipants(ctx, c, path, names, refuse, func(k Child) policy { return adapt(pick(k)) })
}

// readParticipants lists the participants of path, whose children are
// names: pick chooses the policy that applies to a child. A policy may ask
// for the path's data (a zklock semaphore's, when a lease node carries no
// size in its id: [semaphorePolicy]); it is read then.
//
// Who holds is decided over the nodes found when their data was read, not
// over the names listed: a node deleted in between (a holder releasing) is
// left out of both. Deciding over the names would show its successor
// waiting behind a node that is no longer shown, and a lock with no holder
// at all; observe printed that ("none", then the successor) for a mutex
// handed over between its reads. Every rule decides a node from the nodes
// ahead of it, and a node created since the listing queues behind every
// node listed, so each node shown holds as it did once the nodes left out
// were gone.
func readParticipants(ctx context.Context, c *Client, path string, names []string, refuse func(string) bool,
	pick func(Child) policy) ([]Participant, error) {
	kids, err := sortChildren(names, refuse)
	if err != nil {
		return nil, err
	}
	found, pts, back, err := readEach(ctx, c, path, kids)
	if err != nil {
		return nil, err
	}
	held, data, err := decideAll(ctx, c, path, found, pick)
	if err != nil {
		return nil, err
	}
	var hold, wait []Participant
	for i, h := range held {
		h = h && !back[found[i].Owner] // the rule lets it hold, the count does not
		pts[i].Holder, pts[i].Size = h, pick(found[i]).size(found[i], data)
		if h {
			hold = append(hold, pts[i])
		} else {
			wait = append(wait, pts[i])
		}
	}
	return append(hold, wait...), nil
}

// readEach reads the data of each of kids (on path) and makes its
// Participant, but for the Holder and Size: found are the kids still
// there, pts their Participants, and back the owners whose nodes carry the
// held-back mark ([heldBackMark]), which Data leaves out.
func readEach(ctx context.Context, c *Client, path string, kids []Child) (found []Child, pts []Participant, back map[string]bool, err error) {
	back = map[string]bool{}
	for _, k := range kids {
		node := path + "/" + k.Name
		data, st, err := readNode(ctx, c, node)
		if err != nil {
			return nil, nil, nil, err
		}
		if st == nil {
			continue // gone since we listed it
		}
		if heldBackData(data) {
			data, back[k.Owner] = data[len(heldBackMark):], true
		}
		pt := Participant{
			Node: node, Data: data, Read: k.Kind == KindRead,
			Kind: k.Kind, Created: time.UnixMilli(st.Ctime),
		}
		found, pts = append(found, k), append(pts, pt)
	}
	return found, pts, back, nil
}

// decideAll decides who of kids holds by the rules of the policies pick
// chooses, and returns the path's data if one of them asked for it (nil
// if none did, or the path is gone).
func decideAll(ctx context.Context, c *Client, path string, kids []Child, pick func(Child) policy) ([]bool, []byte, error) {
	held, askPath := holders(kids, pick, nil, false)
	if !askPath {
		return held, nil, nil
	}
	data, _, err := readNode(ctx, c, path)
	if err != nil {
		return nil, nil, err
	}
	held, _ = holders(kids, pick, data, true)
	return held, data, nil
}

// Participants lists the participants of any lock path, whichever recipe
// and library made it: holders first, then waiters, each in queue order,
// with their node data. It decides who holds from each node's kind, as the
// recipes do: a reader holds when no other kind of node is ahead of it; a
// semaphore lease holds by zklock's [Semaphore] rule (node i holds when i
// is below the size of every node up to it, each node's size as its name
// carries it, see [Participant.Size]; a lease node whose name carries none
// counts with the size recorded in the path's data, if any, else with no
// bound); a node of any other kind (a mutex, a writer, an election
// candidate) holds when it is first. It is what the zklock command's ls
// prints. A path that does not exist has no participants.
//
// It reads Curator's and kazoo's semaphore layouts too ([SemaphoreLayout]),
// whose nodes are not the path's own children. A path whose only children
// are "locks" and "leases" holding Curator's nodes is an
// InterProcessSemaphoreV2: its lease nodes (under leases/) hold, except
// those that the holder of its inner mutex created and waits with (Curator
// creates a lease node, and waits for the count, while it holds the mutex
// at locks/, and lets the mutex go once it holds); the mutex's other
// nodes wait. A path whose children are all kazoo lease nodes (32 hex
// digits) next to its lock <path>-__lock__ is a kazoo Semaphore: every
// lease node holds (kazoo creates one only when one is free) and the
// nodes queued on its lock wait. Curator's mutex holder is told apart by
// its session and its creation. For the round trip between a grant and
// the release of the inner lock, the new holder shows as waiting (Curator)
// or twice, holding and waiting (kazoo); and if one process has two
// acquirers on a Curator path in one session, a lease of the first may
// show as waiting until the second creates its own.
func Participants(ctx context.Context, c *Client, path string) ([]Participant, error) {
	fail := func(err error) ([]Participant, error) {
		return nil, opError("participants", path, err)
	}
	switch {
	case ctx == nil:
		return fail(invalidf("nil context"))
	case c == nil:
		return fail(invalidf("nil client"))
	}
	if err := validatePath(path); err != nil {
		return fail(err)
	}
	names, err := listChildren(ctx, c, path)
	if err != nil {
		return fail(err)
	}
	ps, _, err := participantsOf(ctx, c, path, names, nil)
	if err != nil {
		return fail(err)
	}
	return ps, nil
}

// participantsOf lists the participants of path, whose children are
// names, as [Participants] does, and names the semaphore layout they were
// read in (LayoutZklock for every lock that is not another library's
// semaphore). lockExists says whether <path>-__lock__ exists (kazoo's
// Semaphore's lock); nil if the caller does not know, and it is read when
// it matters.
func participantsOf(ctx context.Context, c *Client, path string, names []string, lockExists *bool) ([]Participant, SemaphoreLayout, error) {
	if len(names) == 0 {
		return nil, LayoutZklock, nil
	}
	ps, layout, err := foreignParticipants(ctx, c, path, names, lockExists)
	if layout != LayoutZklock || err != nil {
		return ps, layout, err
	}
	ps, err = readParticipants(ctx, c, path, names, nil, func(k Child) policy {
		switch k.Kind {
		case KindRead:
			return adapt(readDriver{})
		case KindLease:
			return newSemaphorePolicy(0)
		}
		return adapt(exclusiveDriver{k.Kind})
	})
	return ps, LayoutZklock, err
}

// SizeInForce is the size in force on a zklock semaphore's path whose
// participants are ps (as [Semaphore.Participants] or [Participants] list
// them): the smallest [Participant.Size] among them, which bounds the
// leases of anyone who queues now; 0 if none has a size (no participant,
// or none that is a zklock semaphore's). Leases granted before a smaller
// size queued stay held, so more than that many may be held for a while
// (docs/semantics.md, "Resizing a semaphore").
func SizeInForce(ps []Participant) int {
	n := 0
	for _, p := range ps {
		if p.Size > 0 && (n == 0 || p.Size < n) {
			n = p.Size
		}
	}
	return n
}

// Participant is one node queued on a lock.
type Participant struct {
	Node string // full znode path
	Data []byte // the holder's node data (owner identity by default)
	// Holder: holds the lock now (false: queued), by the recipe's rule
	// from the names. In a zklock semaphore with a smaller size queued
	// behind it, a participant the rule lets hold but the count of the
	// leases does not marks its node held back and shows as queued; for a
	// moment, while it decides, it may show as a Holder
	// (docs/semantics.md, "Resizing a semaphore").
	Holder bool
	Read   bool // a read-side participant of an RWMutex

	Kind    Kind      // what the node's name says it is
	Created time.Time // when the node was created, by the ZooKeeper leader's clock

	// Size is, for a lease of a zklock semaphore, the size of the
	// Semaphore that made it (its maxLeases), which its node's name
	// carries; 0 for other kinds and where it is not known (a Curator or
	// kazoo layout's lease). [SizeInForce] is the smallest over a path.
	Size int
}

// listChildren reads the names of path's children, with the Client's
// retries; a path that does not exist has none (nil, nil).
func listChildren(ctx context.Context, c *Client, path string) ([]string, error) {
	var names []string
	err := c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		names, err = zc.Children(path)
		return err
	})
	if c.s.Classify(err) == session.Gone {
		return nil, nil
	}
	return names, err
}

// readNode reads a node's data and stat, with the Client's retries; a
// node that is gone has a nil stat and no error.
func readNode(ctx context.Context, c *Client, node string) ([]byte, *session.Stat, error) {
	var (
		data []byte
		st   session.Stat
	)
	err := c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		data, st, err = zc.Get(node)
		return err
	})
	if c.s.Classify(err) == session.Gone {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return data, &st, nil
}
