package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
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
	// under the path, which records the size; first come, first served,
	// with no inner lock.
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
	// <path>'s data records the size as a decimal number. AcquireN of more
	// than one lease is refused: kazoo has none.
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
// (default), Curator's or kazoo's ([SemaphoreLayout]). A value that is
// none of the three makes [NewSemaphore] fail with ErrInvalidArgument, and
// so does the option given to any other lock.
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

// semOptionsOf reads the semaphore options out of opts; errors are left to
// newLock, which applies every option.
func semOptionsOf(opts []LockOption) semOptions {
	var o lockOptions
	for _, opt := range opts {
		if opt == nil || opt(&o) != nil {
			return semOptions{}
		}
	}
	if o.sem == nil {
		return semOptions{}
	}
	return *o.sem
}

// layoutLocks builds the locks of a Curator or kazoo layout from the
// semaphore's lock l (its client, path and node data).
func (s *Semaphore) layoutLocks(o semOptions, maxLeases int) error {
	l := s.lock
	sub := func(path string, d Driver) *Lock { return &Lock{c: l.c, path: path, driver: d, data: l.data} }
	switch o.layout {
	case LayoutCurator:
		s.inner = sub(l.path+"/locks", exclusiveDriver{KindMutex})
		s.leases = sub(l.path+"/leases", curatorLeaseDriver{s.size})
		// Curator counts every child of leases; we count the lease nodes.
		// A plain child would be a lease to Curator and none to us.
		s.leases.refuse = func(string) bool { return true }
		if o.countPath != "" {
			s.count = &sharedCount{c: l.c, path: o.countPath, seed: int32(maxLeases)}
			s.leases.count = s.count // never a nil *sharedCount in the interface
		}
	case LayoutKazoo:
		if o.countPath != "" {
			return invalidf("WithSharedCount needs %v, not %v", LayoutCurator, o.layout)
		}
		s.inner = sub(l.path+"-"+kazooLock, exclusiveDriver{KindMutex})
		s.inner.kazoo, s.inner.persistent = true, true
		s.leases = sub(l.path, l.driver)
		s.leases.persistent, s.leases.size = true, l.size
	default:
		if o.countPath != "" {
			return invalidf("WithSharedCount needs %v, not %v", LayoutCurator, o.layout)
		}
	}
	s.layout = o.layout
	return nil
}

// size is the semaphore's current size: its SharedCount's, if it has one.
func (s *Semaphore) size() int {
	if s.count != nil {
		return s.count.get()
	}
	return s.max
}

// checkFree refuses a path that shows the nodes of another layout than
// s's, and checks a kazoo layout's recorded size, before anything is
// created: it reads the path's children and data. It reports whether the
// path exists.
func (s *Semaphore) checkFree(ctx context.Context) (exists bool, err error) {
	path, c := s.lock.path, s.lock.c
	var (
		names []string
		data  []byte
	)
	err = c.s.Retry(ctx, func(zc session.Conn) error {
		var err error
		if names, err = zc.Children(path); err != nil {
			return err
		}
		data, _, err = zc.Get(path)
		return err
	})
	if c.s.Classify(err) == session.Gone {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.refuseNames(names); err != nil {
		return true, err
	}
	if s.layout == LayoutCurator {
		// kazoo's lock path stays once made (persistent): a kazoo
		// semaphore with no holder shows it, and only it.
		var kazoo bool
		err := c.s.Retry(ctx, func(zc session.Conn) error {
			var err error
			kazoo, err = zc.Exists(path + "-" + kazooLock)
			return err
		})
		if err != nil {
			return true, err
		}
		if kazoo {
			return true, fmt.Errorf("%w: %s-%s (the %v semaphore layout, not %v)", ErrUnknownNode, path, kazooLock, LayoutKazoo, s.layout)
		}
	}
	if n, sized := parseDecimal(data); s.layout == LayoutKazoo && sized && n != int64(s.max) {
		// kazoo's Semaphore._ensure_path raises ValueError the same way.
		return true, invalidf("semaphore %s has %q leases recorded by its other participants, not %d", path, data, s.max)
	}
	return true, nil
}

// refuseNames refuses the children of the path that another layout wrote.
func (s *Semaphore) refuseNames(names []string) error {
	for _, name := range names {
		var other SemaphoreLayout
		switch {
		case s.layout != LayoutZklock && zklockLayoutNode(name):
			other = LayoutZklock
		case s.layout != LayoutCurator && curatorLayoutNode(name):
			other = LayoutCurator
		case s.layout != LayoutKazoo && kazooLayoutNode(name):
			other = LayoutKazoo
		default:
			continue
		}
		return fmt.Errorf("%w: %q (the %v semaphore layout, not %v)", ErrUnknownNode, name, other, s.layout)
	}
	return nil
}

// layoutAcquire is Acquire, TryAcquire and AcquireN under the Curator and
// kazoo layouts: check the path, take the inner lock, acquire the leases
// while holding it, release it. If the inner lock is lost while we wait
// (its session ended, or someone deleted its node), the acquire starts
// again from the inner lock, as Curator's and kazoo's do after a session
// loss; whatever we created meanwhile is deleted by the engine's cleanup.
func (s *Semaphore) layoutAcquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	path, c := s.lock.path, s.lock.c
	fail := func(err error) ([]*Lease, error) { return nil, fmt.Errorf("zklock: %s %s: %w", op, path, err) }
	if err := c.usable(ctx); err != nil {
		return fail(err)
	}
	for {
		exists, err := s.checkFree(ctx)
		if err != nil {
			return fail(err)
		}
		if s.layout == LayoutKazoo && !exists {
			// kazoo's Semaphore makes the path persistent and then records
			// its size; we do both in the create.
			if err := s.leases.ensureParents(ctx); err != nil {
				return fail(err)
			}
		}
		var inner *Lease
		if try {
			inner, err = s.inner.TryAcquire(ctx)
		} else {
			inner, err = s.inner.Acquire(ctx)
		}
		if err != nil {
			return nil, err
		}
		leases, err := s.underInner(ctx, op, n, try, inner)
		// Bounded: past it the janitor deletes the node in the background
		// while the session lasts (see [Lease.Release]).
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		if rerr := inner.Release(rctx); rerr != nil && !errors.Is(rerr, ErrReleased) {
			c.s.Log().Debug("zklock: release the semaphore's inner lock", "node", inner.Node(), "err", rerr)
		}
		cancel()
		if errors.Is(err, errInnerLost) && ctx.Err() == nil {
			c.s.Log().Debug("zklock: semaphore's inner lock lost while waiting; again", "path", path)
			continue
		}
		return leases, err
	}
}

// errInnerLost: the inner lock ended while we held it.
var errInnerLost = errors.New("inner lock lost")

// underInner acquires the leases while inner is held, with a context that
// ends when inner does.
func (s *Semaphore) underInner(ctx context.Context, op string, n int, try bool, inner *Lease) ([]*Lease, error) {
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
	var (
		leases []*Lease
		err    error
	)
	if s.layout == LayoutCurator {
		leases, err = s.leases.acquire(lctx, op, n, try)
	} else {
		leases, err = s.kazooLease(lctx, op, try, inner)
	}
	if err != nil && ctx.Err() == nil && inner.Err() != nil {
		return nil, errInnerLost
	}
	return leases, err
}

// kazooLease takes a lease of kazoo's layout while holding its lock, as
// Semaphore._get_lease does: read the path's children with a watch; if
// fewer than maxLeases, create the ephemeral <path>/<32 hex>; else wait
// for the children to change. The node is created by the engine's
// plain-node request (as [RWMutex.Downgrade]'s): it is ours from its
// create, a create whose reply was lost is recovered by trying again (the
// node exists: [participant.watchOwn] checks that our session owns it),
// and a failed or cancelled acquire deletes it. Only the inner lock's
// session may own it: if that session ends, so does the lock, and we start
// again.
//
// Why at most maxLeases: every kazoo-layout acquirer, kazoo's and ours,
// reads the children and creates its node while holding the one lock at
// <path>-__lock__, and kazoo's Lock and ours agree on who holds it (both
// order the `__lock__` nodes by sequence). So between the read and the
// create nobody else adds a lease, and the count read is at most the count
// at the create.
func (s *Semaphore) kazooLease(ctx context.Context, op string, try bool, inner *Lease) ([]*Lease, error) {
	path, c := s.lock.path, s.lock.c
	for {
		var (
			names []string
			ch    <-chan session.Event
		)
		st := c.s.State()
		err := c.s.Retry(ctx, func(zc session.Conn) error {
			var err error
			names, ch, err = zc.ChildrenW(path)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("zklock: %s %s: %w", op, path, err)
		}
		if err := s.refuseNames(names); err != nil {
			return nil, fmt.Errorf("zklock: %s %s: %w", op, path, err)
		}
		if len(names) < s.max {
			id, err := newID()
			if err != nil {
				return nil, fmt.Errorf("zklock: %s %s: %w", op, path, err)
			}
			id = kazooID(id)
			r := request{locks: []*Lock{s.leases}, n: 1, id: id, session: inner.h.Session(), node: path + "/" + id}
			return acquire(ctx, op, path, r)
		}
		if try {
			return nil, fmt.Errorf("zklock: %s %s: %w", op, path, ErrLocked)
		}
		// A reconnect may have lost the watch (go-zookeeper only logs a
		// failed re-registration): read again on every change of state.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zklock: %s %s: %w", op, path, ctx.Err())
		case <-ch:
		case <-st.Changed:
		}
	}
}

// layoutParticipants lists the holders and waiters of a Curator layout
// (the lease nodes; the inner lock's waiters are not listed) or the
// holders of a kazoo layout (kazoo's waiters queue on its lock only).
func (s *Semaphore) layoutParticipants(ctx context.Context) ([]Participant, error) {
	if s.layout == LayoutCurator {
		return s.leases.Participants(ctx)
	}
	path, c := s.lock.path, s.lock.c
	fail := func(err error) ([]Participant, error) {
		return nil, fmt.Errorf("zklock: participants %s: %w", path, err)
	}
	if ctx == nil {
		return fail(invalidf("nil context"))
	}
	names, err := listChildren(ctx, c, path)
	if err != nil {
		return fail(err)
	}
	var out []Participant
	for _, name := range names {
		node := path + "/" + name
		data, st, err := readNode(ctx, c, node)
		if err != nil {
			return fail(err)
		}
		if st == nil {
			continue // gone since we listed it
		}
		out = append(out, Participant{Node: node, Data: data, Holder: true, Kind: KindLease, Created: time.UnixMilli(st.Ctime)})
	}
	return out, nil
}

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
	// through, and the engine watches it (Lock.count).
	watch := make([]int, first)
	for i := range watch {
		watch[i] = i
	}
	return Decision{Watch: watch}
}

// sharedCount follows a Curator SharedCount node, as SharedValue does: the
// newest value read wins (SharedValue.updateValue keeps the value of the
// largest mzxid; we order by czxid and version, which grow with it).
type sharedCount struct {
	c    *Client
	path string
	seed int32

	mu    sync.Mutex
	value int32
	ver   sizeVersion
	known bool
}

// get returns the count last read.
func (s *sharedCount) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known {
		return int(s.seed)
	}
	return int(s.value)
}

// store keeps data read at ver, if it is newer than what we have.
func (s *sharedCount) store(data []byte, st session.Stat) (sizeVersion, error) {
	ver := sizeVersion{st.Czxid, st.Version}
	if len(data) < 4 {
		// Curator's SharedCount.fromBytes (ByteBuffer.getInt) fails too.
		return ver, invalidf("shared count %s holds %d bytes, not a 4-byte count", s.path, len(data))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known || ver.after(s.ver) {
		s.value, s.ver, s.known = int32(binary.BigEndian.Uint32(data)), ver, true
	}
	return ver, nil
}

// check reads the count, creating it with the seed if it is absent, as
// SharedValue.start does (a persistent node; parents are containers). It
// runs with the first look of every acquire.
func (s *sharedCount) check(zc session.Conn) error {
	for {
		data, st, err := zc.Get(s.path)
		if errors.Is(err, zk.ErrNoNode) {
			if err := s.create(zc); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		_, err = s.store(data, st)
		return err
	}
}

func (s *sharedCount) create(zc session.Conn) error {
	for _, dir := range parents(s.path) {
		var err error
		if dir == s.path {
			seed := make([]byte, 4)
			binary.BigEndian.PutUint32(seed, uint32(s.seed))
			err = createPersistent(zc, dir, seed, s.c.s.ACL(dir))
		} else {
			err = zc.CreateContainer(dir, nil, s.c.s.ACL(dir))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// watch reads the count with a watch, for a waiter whose last decision
// used the version *seen. again: the count read is another than *seen, so
// decide again (at once, without waiting); otherwise ch fires when the
// count changes. Errors that may pass are left to the waiter's loop (nil,
// again).
func (s *sharedCount) watch(zc session.Conn, seen *sizeVersion) (ch <-chan session.Event, again bool, err error) {
	data, st, ch, err := zc.GetDataW(s.path)
	if errors.Is(err, zk.ErrNoNode) {
		// Deleted: the value stays what it was (so does SharedValue's);
		// wake when it is made again.
		exists, ch, err := zc.ExistsW(s.path)
		if err == nil && !exists {
			return ch, false, nil
		}
		return nil, true, permanent(s.c, err)
	}
	if err != nil {
		return nil, true, permanent(s.c, err)
	}
	ver, err := s.store(data, st)
	if err != nil {
		return nil, true, err
	}
	if ver != *seen {
		*seen = ver
		return nil, true, nil
	}
	return ch, false, nil
}

// permanent returns err if it cannot pass by retrying, else nil.
func permanent(c *Client, err error) error {
	if err == nil || c.s.Classify(err) != session.Permanent {
		return nil
	}
	return err
}

// createPersistent makes a persistent node; one that exists is fine.
func createPersistent(zc session.Conn, path string, data []byte, acl []zk.ACL) error {
	return zc.CreatePersistent(path, data, acl)
}
