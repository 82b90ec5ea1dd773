package zklock

import (
	"context"
	"math"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// participants lists the lock's participants: holders first, then waiters,
// each in queue order. pick chooses the driver that applies to a child.
func (l *Lock) participants(ctx context.Context, pick func(Child) Driver) ([]Participant, error) {
	fail := func(err error) ([]Participant, error) {
		return nil, opError("participants", l.path, err)
	}
	if ctx == nil {
		return fail(invalidf("nil context"))
	}
	ps, err := listParticipants(ctx, l.c, l.path, l.refuse, pick)
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
	return readParticipants(ctx, c, path, names, refuse, pick)
}

// readParticipants is listParticipants of the children names, read.
func readParticipants(ctx context.Context, c *Client, path string, names []string, refuse func(string) bool,
	pick func(Child) Driver) ([]Participant, error) {
	kids, err := sortChildren(names, refuse)
	if err != nil {
		return nil, err
	}
	held := holders(kids, pick)
	var hold, wait []Participant
	for i, k := range kids {
		node := path + "/" + k.Name
		data, st, err := readNode(ctx, c, node)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue // gone since we listed it
		}
		pt := Participant{
			Node: node, Data: data, Holder: held[i], Read: k.Kind == KindRead,
			Kind: k.Kind, Created: time.UnixMilli(st.Ctime),
		}
		if held[i] {
			hold = append(hold, pt)
		} else {
			wait = append(wait, pt)
		}
	}
	return append(hold, wait...), nil
}

// Participants lists the participants of any lock path, whichever recipe
// and library made it: holders first, then waiters, each in queue order,
// with their node data. It decides who holds from each node's kind, as the
// recipes do: a reader holds when no other kind of node is ahead of it; a
// semaphore lease holds when it is among the first maxLeases, as recorded
// in the path's data by zklock's [Semaphore] (all leases hold if nothing is
// recorded); a node of any other kind (a mutex, a writer, an election
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
	// A zklock semaphore records its size in the path's data.
	var pathData []byte
	err = c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		pathData, _, err = zc.Get(path)
		return err
	})
	if c.s.Classify(err) == session.Gone {
		return nil, LayoutZklock, nil
	}
	if err != nil {
		return nil, LayoutZklock, err
	}
	ps, err = readParticipants(ctx, c, path, names, nil, func(k Child) Driver {
		switch k.Kind {
		case KindRead:
			return readDriver{}
		case KindLease:
			if n, ok := SemaphoreSize(pathData); ok {
				return semaphoreDriver{max: n}
			}
			return semaphoreDriver{max: math.MaxInt32}
		}
		return exclusiveDriver{k.Kind}
	})
	return ps, LayoutZklock, err
}

// Participant is one node queued on a lock.
type Participant struct {
	Node   string // full znode path
	Data   []byte // the holder's node data (owner identity by default)
	Holder bool   // holds the lock now (false: queued)
	Read   bool   // a read-side participant of an RWMutex

	Kind    Kind      // what the node's name says it is
	Created time.Time // when the node was created, by the ZooKeeper leader's clock
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
