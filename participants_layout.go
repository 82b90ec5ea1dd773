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

// pendingLeases counts the lease nodes, the newest, that the holder of the
// inner mutex created and may still wait with; head is the stat of the
// mutex's first node, the holder's. Every other lease node holds.
//
// Why (InterProcessSemaphoreV2.internalAcquire1Lease, Curator 5.4 and 5.7.1,
// read with javap; zklock's Curator layout takes the same steps,
// guarded.guard): an acquire takes the mutex at <path>/locks, creates one
// lease node, reads the children of leases/ until at most maxLeases exist
// (waiting on them with the mutex still held), and only then lets the
// mutex go; one that gives up deletes its lease node (returnLease) before
// it lets the mutex go. So a lease node exists while not held only while
// its creator holds the mutex, and the nodes created by earlier holders of
// the mutex hold. The mutex is exclusive, so the lease nodes the current
// holder created were created after every other lease node: they are the
// newest, made by one transaction (Curator: one create per hold of the
// mutex; zklock's AcquireN: n nodes in one multi, claim.go's queueClaim), in
// the holder's session, after the holder's mutex node. The czxid orders
// creations across directories and ties exactly the nodes of one
// transaction (ZooKeeper's leader gives each transaction the next zxid,
// and every op of a multi that one: PrepRequestProcessor.pRequest), and
// the sequence orders a directory's children as their czxids do (the
// sequence is the parent's cversion, pRequest2TxnCreate). Hence at most
// that newest group waits, and only if it is of the holder's session and
// newer than the holder's node.
//
// Sharing of sessions is why it is the newest group only, and not every
// lease node of the holder's session newer than its mutex node: threads
// of one process that share one CuratorFramework (Curator's usual setup)
// share one session, and a thread that queued on the mutex early sees the
// leases of those ahead of it, created in its session after its mutex
// node, granted before it even held the mutex. Left over: between the
// grant of the mutex and the holder's create, a lease of another thread of
// its session created after its mutex node is the newest and shows as
// waiting (and between a grant of the count and the release of the mutex,
// the new holder does); neither lasts past one round trip of the holder. A
// zklock acquire that fails in the Curator layout may leave the mutex
// before its lease nodes are deleted (the engine's cleanup): they show as
// holding until then, as Curator, which counts every child, takes them.
func pendingLeases(leases []semNode, head session.Stat) int {
	if len(leases) == 0 {
		return 0
	}
	newest := leases[len(leases)-1].st
	if newest.EphemeralOwner != head.EphemeralOwner || newest.Czxid <= head.Czxid {
		return 0
	}
	n := 0
	for i := len(leases) - 1; i >= 0 && leases[i].st.Czxid == newest.Czxid; i-- {
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
