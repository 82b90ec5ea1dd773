package zklock

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/zkrecipes/zklock/internal/session"
)

// LockPath is a lock path that [FindLocks] found, with its participants.
type LockPath struct {
	// Path is the lock path.
	Path string
	// Layout is the semaphore layout the path's nodes show: LayoutCurator
	// or LayoutKazoo for Curator's or kazoo's semaphore, LayoutZklock for
	// every other lock path, of any recipe and library.
	Layout SemaphoreLayout
	// Participants are the path's participants, as [Participants] lists
	// them: never empty.
	Participants []Participant
}

// FindLimit bounds the walk of [FindLocks]. A zero field takes its default.
type FindLimit struct {
	// Depth is how many levels below the root the walk reads: 1 reads the
	// root's children, 2 their children too. Default 10.
	Depth int
	// Nodes is how many nodes the walk lists the children of, the root
	// included. Default 10000.
	Nodes int
}

// The defaults of [FindLimit].
const (
	DefaultFindDepth = 10
	DefaultFindNodes = 10000
)

// FindLocks lists the lock paths at and below root that have participants,
// sorted by path, each with its participants as [Participants] lists them:
// what an operator looking for "which lock is everyone waiting on" reads.
// A lock path is a node whose children are lock nodes of any recipe and
// library ([Kind]), or Curator's or kazoo's semaphore ([SemaphoreLayout]).
//
// The walk is breadth first and reads each node's children once. It does
// not descend into a lock path's nodes (its plain children, which may be
// other lock paths, it does), into a Curator or kazoo semaphore's nodes
// (leases/ and locks/, the lease nodes, and <path>-__lock__), nor into a
// zklock semaphore's registry of holders beside its nodes, nor into
// /zookeeper. root may be "/". It reads at most limit.Nodes nodes and none
// deeper than limit.Depth below root; complete is false if a limit left
// nodes unread. Participants that come and go while it reads may be seen
// or not: each path is read as [Participants] reads it, one after the
// other.
//
// A root that does not exist fails with an error wrapping zk.ErrNoNode; a
// path below it that holds nodes of no library's format is left out (on
// root, the error wraps ErrUnknownNode). A malformed root or a negative
// limit fails with ErrInvalidArgument before any ZooKeeper call. ctx
// bounds the walk; it ends with ctx's error.
func FindLocks(ctx context.Context, c *Client, root string, limit FindLimit) (found []LockPath, complete bool, err error) {
	fail := func(err error) ([]LockPath, bool, error) {
		return nil, false, opError("find locks", root, err)
	}
	switch {
	case ctx == nil:
		return fail(invalidf("nil context"))
	case c == nil:
		return fail(invalidf("nil client"))
	case limit.Depth < 0 || limit.Nodes < 0:
		return fail(invalidf("limit %+v is negative", limit))
	}
	if root != "/" {
		if err := validatePath(root); err != nil {
			return fail(err)
		}
	}
	if limit.Depth == 0 {
		limit.Depth = DefaultFindDepth
	}
	if limit.Nodes == 0 {
		limit.Nodes = DefaultFindNodes
	}
	w := walk{c: c, root: root, limit: limit}
	if err := w.run(ctx); err != nil {
		return fail(err)
	}
	slices.SortFunc(w.found, func(a, b LockPath) int { return strings.Compare(a.Path, b.Path) })
	return w.found, w.complete, nil
}

// walk is one FindLocks.
type walk struct {
	c        *Client
	root     string
	limit    FindLimit
	found    []LockPath
	complete bool
}

// visit is a node the walk is to read: its path, its depth below the
// root, and whether <path>-__lock__ exists (nil: not known).
type visit struct {
	path       string
	depth      int
	lockExists *bool
}

func (w *walk) run(ctx context.Context) error {
	queue := []visit{{path: w.root}}
	w.complete = true
	for read := 0; len(queue) > 0; read++ {
		v := queue[0]
		queue = queue[1:]
		kids, err := w.read(ctx, v)
		if err != nil {
			return err
		}
		if v.depth == w.limit.Depth {
			w.complete = w.complete && len(kids) == 0
			continue
		}
		// Queue no more than the nodes left to read: a node with many
		// children costs no memory beyond the limit.
		if room := w.limit.Nodes - (read + 1) - len(queue); len(kids) > room {
			w.complete = false
			kids = kids[:max(room, 0)]
		}
		queue = append(queue, kids...)
	}
	return nil
}

// read reads node v: it notes v if it is a lock path with participants,
// and returns the children to read next.
func (w *walk) read(ctx context.Context, v visit) ([]visit, error) {
	var names []string
	err := w.c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		names, err = zc.Children(v.path)
		return err
	})
	if err != nil {
		if v.path != w.root && w.c.s.Classify(err) == session.Gone {
			return nil, nil // deleted since its parent was read
		}
		return nil, err
	}
	slices.Sort(names)
	layout := LayoutZklock
	if mayBeLock(names) {
		var ps []Participant
		ps, layout, err = participantsOf(ctx, w.c, v.path, names, v.lockExists)
		switch {
		case err == nil && len(ps) > 0:
			w.found = append(w.found, LockPath{Path: v.path, Layout: layout, Participants: ps})
		case err != nil && (v.path == w.root || !isUnknownNode(err)):
			return nil, err
		}
	}
	if layout != LayoutZklock {
		return nil, nil // a semaphore's own nodes
	}
	return w.below(v, names), nil
}

// below returns the children of v to read next: those that are not lock
// nodes, nor the lock of a kazoo semaphore next to them, nor a zklock
// semaphore's registry beside its nodes, nor /zookeeper.
func (w *walk) below(v visit, names []string) []visit {
	var out []visit
	for _, name := range names {
		if _, seq, _ := parseChild(name); seq {
			continue // a lock node (or a sequential node of no lock)
		}
		if v.path == "/" && name == "zookeeper" || name == registryName && mayBeLock(names) {
			continue // ZooKeeper's own; a semaphore's registry of holders (registry.go)
		}
		if base, ok := strings.CutSuffix(name, "-"+kazooLock); ok {
			if _, found := slices.BinarySearch(names, base); found {
				continue // kazoo's Semaphore's lock, read with it
			}
		}
		_, exists := slices.BinarySearch(names, name+"-"+kazooLock)
		out = append(out, visit{path: join(v.path, name), depth: v.depth + 1, lockExists: &exists})
	}
	return out
}

// mayBeLock reports children that may make their parent a lock path:
// sequential nodes, or Curator's or kazoo's semaphore nodes.
func mayBeLock(names []string) bool {
	for _, name := range names {
		if _, seq, _ := parseChild(name); seq {
			return true
		}
	}
	return len(names) > 0 && (curatorShape(names) || kazooShape(names))
}

func isUnknownNode(err error) bool { return errors.Is(err, ErrUnknownNode) }

// join returns the path of child name under parent.
func join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
