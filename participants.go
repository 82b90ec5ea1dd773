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
	// A zklock semaphore records its size in the path's data.
	var pathData []byte
	err := c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		pathData, _, err = zc.Get(path)
		return err
	})
	if c.s.Classify(err) == session.Gone {
		return nil, nil
	}
	if err != nil {
		return fail(err)
	}
	ps, err := listParticipants(ctx, c, path, nil, func(k Child) Driver {
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
	if err != nil {
		return fail(err)
	}
	return ps, nil
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
