package zklock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// SemaphoreLayout is the set of nodes a [Semaphore] keeps on ZooKeeper:
// zklock's own, or those of Apache Curator's InterProcessSemaphoreV2 or of
// kazoo's Semaphore, so that a Semaphore shares its leases with processes
// that use those libraries on the same path. No one layout serves all
// three: their inner locks live in different places, and each would count
// the others' nodes as leases. docs/interop.md compares them.
type SemaphoreLayout int

// The semaphore layouts.
const (
	// LayoutZklock is the default: nodes `_c_<uuid>-lease-<seq>` directly
	// under the path, each carrying its Semaphore's size in its uuid (a
	// version-8 UUID whose last 8 hex digits are the size), so that
	// Semaphores of different sizes share the path, the smallest among the
	// holders bounding them ([Semaphore]); first come, first served, with
	// no inner lock.
	LayoutZklock SemaphoreLayout = iota

	// LayoutCurator is Curator's InterProcessSemaphoreV2: an acquirer takes
	// a mutex at <path>/locks (`_c_<uuid>-lock-<seq>`, Curator's
	// InterProcessMutex), creates its protected ephemeral-sequential lease
	// node <path>/leases/_c_<uuid>-lease-<seq>, waits until at most
	// maxLeases leases exist, and releases the mutex. The size is not
	// recorded: every participant must be given the same one, or the same
	// SharedCount ([WithSharedCount]). Parents are container nodes.
	LayoutCurator

	// LayoutKazoo is kazoo's Semaphore: an acquirer takes a kazoo Lock at
	// the sibling path <path>-__lock__ (nodes `<32 hex>__lock__<seq>`),
	// creates the ephemeral node <path>/<32 hex> if fewer than maxLeases
	// children exist (waiting on the children otherwise), and releases the
	// lock. <path> and <path>-__lock__ are persistent, as kazoo makes them;
	// <path>'s data records the size as a decimal number, the one size of
	// every participant: an acquire of another size fails with
	// ErrSizeMismatch, as kazoo's does. AcquireN of more than one lease is
	// refused: kazoo has none.
	LayoutKazoo
)

// String returns the layout's name.
func (l SemaphoreLayout) String() string {
	switch l {
	case LayoutZklock:
		return "zklock"
	case LayoutCurator:
		return "curator"
	case LayoutKazoo:
		return "kazoo"
	}
	return "SemaphoreLayout(" + strconv.Itoa(int(l)) + ")"
}

// semOptions are the options that apply to a Semaphore only.
type semOptions struct {
	layout    SemaphoreLayout
	countPath string
}

// WithSemaphoreLayout sets the nodes a [Semaphore] keeps: zklock's own
// (default), Curator's or kazoo's ([SemaphoreLayout]). They differ in how
// a size is shared: zklock's nodes carry each participant's, so sizes may
// differ during a rolling resize; Curator's is not recorded (every
// participant is given the same, or the same SharedCount); kazoo's is
// recorded once in the path and another fails with ErrSizeMismatch. A
// value that is none of the three makes [NewSemaphore] fail with
// ErrInvalidArgument, and so does the option given to any other lock.
func WithSemaphoreLayout(l SemaphoreLayout) LockOption {
	return func(o *lockOptions) error {
		if l < LayoutZklock || l > LayoutKazoo {
			return invalidf("semaphore layout %d is none of %v, %v, %v", int(l), LayoutZklock, LayoutCurator, LayoutKazoo)
		}
		if o.sem == nil {
			o.sem = &semOptions{}
		}
		o.sem.layout = l
		return nil
	}
}

// WithSharedCount makes a [LayoutCurator] semaphore read its size from a
// Curator SharedCount at countPath, as InterProcessSemaphoreV2 does when
// given a SharedCountReader: a persistent node holding a 4-byte big-endian
// int, created with maxLeases (its seed) if absent, its parents as
// containers. The count is read on every acquire and watched while one
// waits: a larger count lets waiting acquires through; a smaller one
// applies to the decisions made after it is seen (leases held stay held,
// as with Curator). Default: the constant maxLeases. A malformed path, or
// the option with another layout than LayoutCurator, makes [NewSemaphore]
// fail with ErrInvalidArgument; an acquire that finds fewer than 4 bytes
// at countPath fails with ErrInvalidArgument.
func WithSharedCount(countPath string) LockOption {
	return func(o *lockOptions) error {
		if err := validatePath(countPath); err != nil {
			return fmt.Errorf("shared count: %w", err)
		}
		if o.sem == nil {
			o.sem = &semOptions{}
		}
		o.sem.countPath = countPath
		return nil
	}
}

// newSemLayout builds the layout o names for a semaphore of maxLeases
// leases whose own lock would be cfg's.
func newSemLayout(cfg lockConfig, o semOptions, maxLeases int) (semLayout, error) {
	if o.countPath != "" && o.layout != LayoutCurator {
		return nil, invalidf("WithSharedCount needs %v, not %v", LayoutCurator, o.layout)
	}
	if o.layout == LayoutZklock {
		return zklockLayout{lock: cfg.build(), max: maxLeases}, nil // cfg's policy is the semaphore's
	}
	g := &guarded{c: cfg.c, path: cfg.path, max: maxLeases, kind: o.layout}
	if o.layout == LayoutKazoo {
		// Both paths persistent, as kazoo makes them; the lease path
		// records the size. A lease is a place on it (kazooLayout.lease),
		// which holds from its create and never asks its policy to
		// decide: the exclusive driver only names the kind.
		inner := persistentPath{kazooNamed{adapt(exclusiveDriver{KindMutex})}, nil}
		leases := persistentPath{adapt(exclusiveDriver{KindLease}), []byte(strconv.Itoa(maxLeases))}
		g.inner, g.leases = cfg.on(cfg.path+"-"+kazooLock, inner).build(), cfg.on(cfg.path, leases).build()
		return kazooLayout{g}, nil
	}
	leases := curatorLeases{}
	size := func() int { return maxLeases }
	if o.countPath != "" {
		count := &sharedCount{c: cfg.c, path: o.countPath, seed: int32(maxLeases)}
		leases.count, size = count, count.get
	}
	leases.policy = adapt(curatorLeaseDriver{size})
	g.inner = cfg.on(cfg.path+"/locks", adapt(exclusiveDriver{KindMutex})).build()
	g.leases = cfg.on(cfg.path+"/leases", leases).build()
	return curatorLayout{g, o.countPath != ""}, nil
}

// guarded is what the Curator and kazoo layouts share: an inner lock taken
// around every acquire, and a path that must show no other layout's nodes.
type guarded struct {
	c      *Client
	path   string
	max    int
	kind   SemaphoreLayout
	inner  *Lock // the lock taken around an acquire: <path>/locks, or <path>-__lock__
	leases *Lock // where the leases are: <path>/leases, or <path>
}

// curatorLayout is [LayoutCurator]: the leases' own lock decides, under
// the inner lock.
type curatorLayout struct {
	*guarded
	counted bool // the size is a SharedCount's, which may grow
}

func (l curatorLayout) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	return l.guard(ctx, n, try, func(ctx context.Context, _ *Lease) ([]*Lease, error) {
		return l.leases.acquire(ctx, op, n, try)
	})
}

func (l curatorLayout) participants(ctx context.Context) ([]Participant, error) {
	return l.leases.Participants(ctx)
}

func (l curatorLayout) checkN(n int) error {
	if l.counted && n >= 1 {
		return nil // the count may grow
	}
	return checkN(n, l.max)
}

// kazooLayout is [LayoutKazoo]: a lease is a plain node made under
// kazoo's lock when fewer than the size exist.
type kazooLayout struct{ *guarded }

func (l kazooLayout) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	return l.guard(ctx, n, try, func(ctx context.Context, inner *Lease) ([]*Lease, error) {
		return l.lease(ctx, op, try, inner)
	})
}

func (l kazooLayout) checkN(n int) error {
	if n != 1 {
		return invalidf("n %d: kazoo's semaphore layout grants one lease at a time", n)
	}
	return nil
}

// checkFree refuses a path that shows the nodes of another layout than
// g's, and a kazoo layout's recorded size other than g's (ErrSizeMismatch),
// before anything is created: it reads the path's children and data. It
// reports whether the path exists.
func (g *guarded) checkFree(ctx context.Context) (exists bool, err error) {
	var (
		names  []string
		data   []byte
		kazoo  bool
		others = g.kind == LayoutCurator // kazoo's lock path stays once made (persistent)
	)
	err = g.c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		if names, err = zc.Children(g.path); err != nil {
			return err
		}
		if data, _, err = zc.Get(g.path); err != nil || !others {
			return err
		}
		kazoo, err = zc.Exists(g.path + "-" + kazooLock)
		return err
	})
	switch {
	case g.c.s.Classify(err) == session.Gone:
		return false, nil
	case err != nil:
		return false, err
	case kazoo:
		// A kazoo semaphore with no holder shows its lock path, and only it.
		return true, fmt.Errorf("%w: %s-%s (the %v semaphore layout, not %v)", ErrUnknownNode, g.path, kazooLock, LayoutKazoo, g.kind)
	}
	if err := g.refuseNames(names); err != nil {
		return true, err
	}
	if n, sized := parseSize(data); g.kind == LayoutKazoo && sized && n != int64(g.max) {
		// kazoo's Semaphore._ensure_path raises ValueError the same way.
		return true, fmt.Errorf("%w: %s has %q leases recorded by its other participants, not %d", ErrSizeMismatch, g.path, data, g.max)
	}
	return true, nil
}

// refuseNames refuses the children of the path that another layout wrote.
func (g *guarded) refuseNames(names []string) error {
	for _, name := range names {
		if other, ok := layoutOf(name); ok && other != g.kind {
			return fmt.Errorf("%w: %q (the %v semaphore layout, not %v)", ErrUnknownNode, name, other, g.kind)
		}
	}
	return nil
}

// layoutOf names the layout that writes a child such as name directly
// under a semaphore's path, if any does.
func layoutOf(name string) (SemaphoreLayout, bool) {
	switch {
	case zklockLayoutNode(name):
		return LayoutZklock, true
	case curatorLayoutNode(name):
		return LayoutCurator, true
	case kazooLayoutNode(name):
		return LayoutKazoo, true
	}
	return 0, false
}

// guard runs under while holding the inner lock: check the path, take the
// inner lock, acquire the leases while holding it, release it. If the
// inner lock is lost while we wait (its session ended, or someone deleted
// its node), the acquire starts again from the inner lock, as Curator's
// and kazoo's do after a session loss; whatever we created meanwhile is
// deleted by the engine's cleanup.
func (g *guarded) guard(ctx context.Context, n int, try bool, under func(context.Context, *Lease) ([]*Lease, error)) ([]*Lease, error) {
	if err := g.c.usable(ctx); err != nil {
		return nil, err
	}
	for {
		inner, err := g.enter(ctx, try)
		if err != nil {
			return nil, err
		}
		leases, err := g.underInner(ctx, inner, func(lctx context.Context) ([]*Lease, error) { return under(lctx, inner) })
		g.leave(inner)
		if !errors.Is(err, errInnerLost) {
			return leases, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		g.c.s.Log().Debug("zklock: semaphore's inner lock lost while waiting; again", "path", g.path)
	}
}

// enter checks the path and takes the inner lock.
func (g *guarded) enter(ctx context.Context, try bool) (*Lease, error) {
	exists, err := g.checkFree(ctx)
	if err != nil {
		return nil, err
	}
	if g.kind == LayoutKazoo && !exists {
		// kazoo's Semaphore makes the path persistent and then records
		// its size; we do both in the create.
		if err := g.leases.ensureParents(ctx); err != nil {
			return nil, err
		}
	}
	if try {
		return g.inner.TryAcquire(ctx)
	}
	return g.inner.Acquire(ctx)
}

// leave releases the inner lock, bounded: past the bound the janitor
// deletes the node in the background while the session lasts (see
// [Lease.Release]).
func (g *guarded) leave(inner *Lease) {
	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := inner.Release(rctx); err != nil && !errors.Is(err, ErrReleased) {
		g.c.s.Log().Debug("zklock: release the semaphore's inner lock", "node", inner.Node(), "err", err)
	}
}

// errInnerLost: the inner lock ended while we held it.
var errInnerLost = errors.New("inner lock lost")

// underInner runs under while inner is held, with a context that ends
// when inner does. If under fails once inner has ended, it starts again
// (errInnerLost), unless ctx has ended too: then ctx's error says why, not
// the Canceled of inner's end, which a caller whose deadline passed would
// not expect (the chaos suite saw one, from an acquire of a few
// milliseconds whose inner lock was lost at that moment).
func (g *guarded) underInner(ctx context.Context, inner ender, under func(context.Context) ([]*Lease, error)) ([]*Lease, error) {
	lctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-inner.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	defer func() { cancel(); <-stopped }()
	leases, err := under(lctx)
	switch {
	case err == nil || inner.Err() == nil:
		return leases, err
	case ctx.Err() != nil && errors.Is(err, lctx.Err()):
		return nil, ctx.Err()
	case ctx.Err() != nil:
		return nil, err
	}
	return nil, errInnerLost
}

// ender is what underInner watches of the inner lock's lease.
type ender interface {
	Done() <-chan struct{}
	Err() error
}

// lease takes a lease of kazoo's layout while holding its lock, as
// Semaphore._get_lease does: read the path's children with a watch; if
// fewer than maxLeases, create the ephemeral <path>/<32 hex>; else wait
// for the children to change. The node is a [placeClaim] (as
// [RWMutex.Downgrade]'s): it is ours from its create, a create whose reply
// was lost is recovered by trying again (the node exists:
// [participant.watchOwn] checks that our session owns it), and a failed or
// cancelled acquire deletes it. Only the inner lock's session may own it:
// if that session ends, so does the lock, and we start again.
//
// Why at most maxLeases: every kazoo-layout acquirer, kazoo's and ours,
// reads the children and creates its node while holding the one lock at
// <path>-__lock__, and kazoo's Lock and ours agree on who holds it (both
// order the `__lock__` nodes by sequence). So between the read and the
// create nobody else adds a lease, and the count read is at most the count
// at the create.
func (l kazooLayout) lease(ctx context.Context, op string, try bool, inner *Lease) ([]*Lease, error) {
	for {
		st := l.c.s.State()
		names, ch, err := l.children(ctx)
		if err != nil {
			return nil, err
		}
		if len(names) < l.max {
			id, err := newID()
			if err != nil {
				return nil, err
			}
			id = kazooID(id)
			cl := placeClaim{l: l.leases, node: l.path + "/" + id, id: id, guard: inner.node, sid: inner.h.Session()}
			leases, err := newParticipant(l.c, l.path, cl).acquire(ctx, op)
			if errors.Is(err, errGuardGone) {
				return nil, errInnerLost // start again from the lock
			}
			return leases, err
		}
		if try {
			return nil, ErrLocked
		}
		// A reconnect may have lost the watch (go-zookeeper only logs a
		// failed re-registration): read again on every change of state.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		case <-st.Changed:
		}
	}
}

// children reads the path's children with a watch, refusing another
// layout's.
func (l kazooLayout) children(ctx context.Context) ([]string, <-chan session.Event, error) {
	var (
		names []string
		ch    <-chan session.Event
	)
	err := l.c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		names, ch, err = zc.ChildrenW(l.path)
		return err
	})
	if err == nil {
		err = l.refuseNames(names)
	}
	return names, ch, err
}

// participants lists the holders of a kazoo layout (kazoo's waiters queue
// on its lock only).
func (l kazooLayout) participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, invalidf("nil context")
	}
	names, err := listChildren(ctx, l.c, l.path)
	if err != nil {
		return nil, err
	}
	var out []Participant
	for _, name := range names {
		node := l.path + "/" + name
		data, st, err := readNode(ctx, l.c, node)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue // gone since we listed it
		}
		out = append(out, Participant{Node: node, Data: data, Holder: true, Kind: KindLease, Created: time.UnixMilli(st.Ctime)})
	}
	return out, nil
}

// curatorLeases is the policy of a Curator layout's leases path: its
// driver's ([curatorLeaseDriver]), refusing every plain child, following
// the SharedCount if there is one.
type curatorLeases struct {
	policy
	count liveSize // nil: the size is a constant
}

// refuses every plain child: Curator counts every child of leases; we
// count the lease nodes. A plain child would be a lease to Curator and
// none to us.
func (curatorLeases) refuses(string) bool { return true }

func (p curatorLeases) live() liveSize { return p.count }

// curatorLeaseDriver decides on the leases path of a Curator layout: a
// participant holds when its last node is among the first max, counting
// every node ahead of it. Curator's InterProcessSemaphoreV2 counts every
// child instead (children.size() <= maxLeases); the two agree while the
// inner mutex is held, because nobody creates a lease node without holding
// it, so no node is behind ours. Without it they still never grant more
// than max: of the holders at any moment, the one that created its node
// last read the children after every other holder had created its node,
// and all of them were still there; both rules count them, so there are
// at most max. Waiters watch every node ahead (Curator watches the
// children): any release decides again.
type curatorLeaseDriver struct{ max func() int }

func (curatorLeaseDriver) Kind() Kind { return KindLease }

func (d curatorLeaseDriver) GetsTheLock(_ []Child, first, last int) Decision {
	if last < d.max() {
		return Decision{Holds: true}
	}
	// With first == 0 nothing is ahead: only a larger SharedCount lets us
	// through, and the engine watches it (curatorLeases.live).
	watch := make([]int, first)
	for i := range watch {
		watch[i] = i
	}
	return Decision{Watch: watch}
}

// Refusals of the semaphore layouts: the plain or sequential children of a
// semaphore's path that belong to a layout other than its own.

// zklockLayoutNode reports a child that zklock's own semaphore layout
// writes directly under the path: `_c_<uuid>-lease-<seq>`.
func zklockLayoutNode(name string) bool {
	ch, ok, _ := parseChild(name)
	return ok && ch.Kind == KindLease
}

// curatorLayoutNode reports a child of Curator's InterProcessSemaphoreV2
// layout (its LOCK_SCHEMA: "locks" and "leases").
func curatorLayoutNode(name string) bool { return name == "locks" || name == "leases" }

// kazooLayoutNode reports a lease of kazoo's Semaphore: a plain node named
// by uuid4().hex.
func kazooLayoutNode(name string) bool { return len(name) == kazooIDLen && isHex(name) }

// kazooID turns a protected id (a version 4 UUID) into the 32 hex digits
// of kazoo's uuid.uuid4().hex, the id its Lock puts before "__lock__".
func kazooID(uuid string) string { return strings.ReplaceAll(uuid, "-", "") }

// kazooNamed names a policy's nodes as kazoo's Lock names them,
// `<32 hex>__lock__<seq>`: the lock of a kazoo-layout semaphore, which
// kazoo's Lock must see as a contender (its _get_predecessor matches only
// its own "__lock__" pattern).
type kazooNamed struct{ policy }

func (kazooNamed) newID() (string, error) {
	id, err := newID()
	return kazooID(id), err
}

func (kazooNamed) nodePrefix(id string) string { return id + kazooLock }
func (kazooNamed) idPrefix(id string) string   { return id + kazooLock }

// persistentPath makes a policy's lock path persistent, with data, as
// kazoo's ensure_path makes it (a kazoo-layout semaphore records its size
// in its path's data).
type persistentPath struct {
	policy
	data []byte
}

func (p persistentPath) pathNode() ([]byte, bool) { return p.data, true }
