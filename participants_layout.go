package zklock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// Reading another library's semaphore, for [Participants]: Curator's and
// kazoo's layouts keep their nodes elsewhere than directly under the path
// ([SemaphoreLayout]), and neither records who holds.

// curatorShape reports children of a path that are Curator's
// InterProcessSemaphoreV2's: "leases", and "locks" if anything.
func curatorShape(names []string) bool {
	leases := false
	for _, n := range names {
		switch n {
		case "leases":
			leases = true
		case "locks":
		default:
			return false
		}
	}
	return leases
}

// kazooShape reports children of a path that are all kazoo Semaphore
// leases (none at all, too).
func kazooShape(names []string) bool {
	for _, n := range names {
		if !kazooLayoutNode(n) {
			return false
		}
	}
	return true
}

// foreignParticipants lists the participants of path if its children,
// names, show Curator's or kazoo's semaphore layout, and names the layout;
// LayoutZklock (and nothing read) if they show neither. lockExists says
// whether <path>-__lock__ exists; if nil, it is read when names could be
// a kazoo semaphore's.
func foreignParticipants(ctx context.Context, c *Client, path string, names []string, lockExists *bool) ([]Participant, SemaphoreLayout, error) {
	switch {
	case curatorShape(names):
		ps, ok, err := curatorParticipants(ctx, c, path)
		if ok || err != nil {
			return ps, LayoutCurator, err
		}
	case len(names) > 0 && kazooShape(names):
		if lockExists == nil {
			var exists bool
			err := c.s.Retry(ctx, func(zc session.Conn) error {
				var err error
				exists, err = zc.Exists(path + "-" + kazooLock)
				return err
			})
			if err != nil {
				return nil, LayoutZklock, err
			}
			lockExists = &exists
		}
		if *lockExists {
			ps, err := kazooParticipants(ctx, c, path, names)
			return ps, LayoutKazoo, err
		}
	}
	return nil, LayoutZklock, nil
}

// errNotLayout: the nodes under a path that looked like a semaphore layout
// are not that layout's.
var errNotLayout = errors.New("not the layout's nodes")

// curatorParticipants lists an InterProcessSemaphoreV2: holders, the lease
// nodes under leases/; waiters, the lease nodes its inner mutex's holder
// created and waits with, then the mutex's other nodes. ok is false, and
// nothing is listed, if leases/ or locks/ holds a node that is not
// Curator's (a lease node, a mutex node): the path is something else.
//
// The leases are listed before the mutex is, so that a lease node the
// mutex's holder created is in the list only if it was created while that
// holder held the mutex, or earlier.
func curatorParticipants(ctx context.Context, c *Client, path string) (ps []Participant, ok bool, err error) {
	leases, err := semNodes(ctx, c, path+"/leases", KindLease)
	if err != nil {
		return nil, false, ignoreNotLayout(err)
	}
	locks, err := semNodes(ctx, c, path+"/locks", KindMutex)
	if err != nil {
		return nil, false, ignoreNotLayout(err)
	}
	waiting := 0
	if len(locks) > 0 {
		waiting = pendingLeases(leases, locks[0].st)
	}
	held := len(leases) - waiting
	for i, n := range leases {
		ps = append(ps, n.participant(i < held))
	}
	from := 0
	if waiting > 0 {
		from = 1 // the mutex's holder shows as its lease nodes
	}
	for _, n := range locks[from:] {
		ps = append(ps, n.participant(false))
	}
	return ps, true, nil
}

func ignoreNotLayout(err error) error {
	if errors.Is(err, errNotLayout) {
		return nil
	}
	return err
}

// pendingLeases counts the newest lease nodes that the holder of the
// inner mutex created while it held it: those of its session created
// after its mutex node was. Curator's acquire creates its lease node while
// it holds the mutex and waits for the count while it still holds it, so
// at most those can be waiting; every other lease node's acquire let the
// mutex go, which it does once it holds (or once its node is deleted,
// when it fails). Curator creates one lease node per hold of the mutex,
// zklock's AcquireN n at once: they are the newest, consecutive.
func pendingLeases(leases []semNode, head session.Stat) int {
	n := 0
	for i := len(leases) - 1; i >= 0; i-- {
		st := leases[i].st
		if st.EphemeralOwner != head.EphemeralOwner || st.Czxid <= head.Czxid {
			break
		}
		n++
	}
	return n
}

// semNode is one node of a Curator semaphore, read.
type semNode struct {
	node string
	kind Kind
	data []byte
	st   session.Stat
}

func (n semNode) participant(holds bool) Participant {
	return Participant{Node: n.node, Data: n.data, Holder: holds, Kind: n.kind, Created: time.UnixMilli(n.st.Ctime)}
}

// semNodes reads the children of dir, in queue order, with their data
// and stat; every child must be a node of kind (else errNotLayout). A dir
// that does not exist has none.
func semNodes(ctx context.Context, c *Client, dir string, kind Kind) ([]semNode, error) {
	names, err := listChildren(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	kids, err := sortChildren(names, func(string) bool { return true })
	if err != nil {
		return nil, errNotLayout // a plain node, or one of no library's format
	}
	var out []semNode
	for _, k := range kids {
		if k.Kind != kind {
			return nil, errNotLayout
		}
		node := dir + "/" + k.Name
		data, st, err := readNode(ctx, c, node)
		if err != nil {
			return nil, err
		}
		if st != nil {
			out = append(out, semNode{node: node, kind: kind, data: data, st: *st})
		}
	}
	return out, nil
}

// kazooParticipants lists a kazoo Semaphore: holders, its lease nodes
// names, in the order they were created; waiters, the nodes queued on its
// lock at <path>-__lock__, in queue order. kazoo's acquire creates a lease
// node only if one is free, under the lock, so every lease node holds.
func kazooParticipants(ctx context.Context, c *Client, path string, names []string) ([]Participant, error) {
	var (
		hold  []Participant
		zxids = map[string]int64{}
	)
	for _, name := range names {
		node := path + "/" + name
		data, st, err := readNode(ctx, c, node)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue // gone since we listed it
		}
		zxids[node] = st.Czxid
		hold = append(hold, Participant{Node: node, Data: data, Holder: true, Kind: KindLease, Created: time.UnixMilli(st.Ctime)})
	}
	slices.SortFunc(hold, func(a, b Participant) int { return cmp.Compare(zxids[a.Node], zxids[b.Node]) })
	wait, err := listParticipants(ctx, c, path+"-"+kazooLock, nil, func(k Child) Driver { return exclusiveDriver{k.Kind} })
	if err != nil {
		return nil, err
	}
	for i := range wait {
		wait[i].Holder = false // the lock's holder waits for a lease, or is about to let the lock go
	}
	return append(hold, wait...), nil
}
