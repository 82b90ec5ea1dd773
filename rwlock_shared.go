package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

// WithSharedReads makes the read side of an [RWMutex] share one read node
// among the goroutines that read through it: at most one read node of the
// RWMutex is in the queue at a time, and while it holds, a read Acquire or
// TryAcquire returns at once, with no ZooKeeper request, a [Lease] of its
// own on that node (same [Lease.Node], same [Lease.Token]). Release ends
// only that lease; the node is deleted when its last lease is released.
// Every lease on the node ends when the node is lost, with the node's
// cause ([Lease.Err]), and is revoked with it ([Lease.Revoked]).
//
// Writers are not starved. The shared node watches the lock's children;
// once a writer's node (any client's: zklock's, Apache Curator's
// `__WRIT__`, kazoo's `__lock__`) is queued behind it, new reads stop
// joining it and queue as they would without the option: behind that
// writer, on a fresh shared node. New reads wait from the moment the
// children notification arrives until the read that follows it says
// whether a writer came (one round trip). So a writer waits at most for
// the leases on the node when it queued, plus those taken before
// ZooKeeper's notification of its node reached the process, each for as
// long as its holder holds it. While the connection is down, reads join
// without waiting for that read.
//
// When to use it: many goroutines of one process taking the read side of
// one lock for short stretches (a request handler that reads a config
// generation). What it costs: a lease is as strong as the node under it
// and no stronger: readers of one process are one participant for other
// processes (Participants lists the node once), and a lease taken on a
// node that is later lost ends with all the others. A read acquire that
// arrives while the shared node is queued waits with it and is granted
// with it; a TryAcquire then fails with ErrLocked, without a request,
// also while the node's first look is on its way. [RWMutex.Downgrade]
// returns a lease on a read node of its own, outside the shared node, as
// without the option.
//
// Default: off, each read acquire is a participant with its own node. On
// any lock other than an RWMutex it makes the constructor fail with
// ErrInvalidArgument.
func WithSharedReads() LockOption {
	return func(o *lockOptions) error {
		o.shared = true
		return nil
	}
}

// sharedReads is the read side of an RWMutex with WithSharedReads: a layer
// over the engine, not a mode of it. At most one sharedClaim is open for joining
// at a time (cur); a sharedClaim is one participant of the engine (one read
// node, one engine lease, base) with any number of sub-leases, the leases
// that Acquire returns.
//
// Why a sub-lease is never live while its node is not held. A sub-lease
// is live only if it has not ended and its base lease is live: Err asks
// the base first ([sharedClaim.live]), so a node lost by any cause (its session,
// its deadline, a delete from outside, the Client's Close) ends every
// sub-lease on the very next Err, as the base's own Err would; Done is
// closed by the sharedClaim's goroutine as soon as the base's Done closes. The
// node itself is deleted only by the base's Release, called once the
// sharedClaim's set of live sub-leases is empty, that is after every sub-lease
// ended (Release ends a sub-lease before it leaves the set); none can be
// added after that, since joins and the set are under one mutex and an
// empty sharedClaim is closed for joining. The base lease ends before its node
// is deleted (internal/session/hold.go, Hold.Release). So every sub-lease
// has ended before its node goes, and while the base lease is live the
// node is held, by the engine's own argument.
//
// Exclusion between a writer and the readers never depends on the
// children watch of [sharedClaim.watchWriters]: a writer's node waits, as any
// other, until the shared node is deleted. The watch only bounds how long:
// ZooKeeper fires a getChildren watch at the next create or delete of a
// child of the path (DataTree.createNode and deleteNode trigger
// NodeChildrenChanged on the parent), so the sharedClaim pauses joins when the
// notification of a writer's create arrives, and closes for them once the
// read that follows shows the writer.
type sharedReads struct {
	l *Lock // the engine's read lock, untraced: the sub-leases are traced

	mu  sync.Mutex
	cur *sharedClaim // the sharedClaim new reads join, if any
}

func newSharedReads(read lockConfig) *sharedReads {
	return &sharedReads{l: read.on(read.path, untraced{read.pol}).build()}
}

// sharedClaim is one shared read node. Its fields are guarded by sharedReads.mu.
type sharedClaim struct {
	s      *sharedReads
	try    bool               // a TryAcquire's: it never queues
	cancel context.CancelFunc // stops the base acquire
	ready  chan struct{}      // closed once base or err is set
	base   *Lease
	err    error
	joined []*sharedWaiter    // the acquires waiting for a queued sharedClaim
	subs   map[*subLease]bool // live sub-leases, once granted
	closed bool               // no more joins: a writer is queued behind, the node is gone, or its last lease went
	exited chan struct{}      // the sharedClaim's goroutine has returned
	paused bool               // a children notification came: its read is on its way ([sharedClaim.watchWriters])
	resume chan struct{}      // closed when the pause ends

	until atomic.Int64 // a deadline of base read earlier, in Unix nanoseconds ([sharedClaim.live])
}

// live returns nil while the node's lease is live, as base.Err does, but
// without the session's mutex while a deadline of base read earlier is
// still ahead: so that readers at memory speed do not contend with the
// session's own goroutines. That is exact: every other way a lease ends
// (its session, its node, the Client) closes base's Done at once, and a
// deadline is a time before which no leader can have expired the session
// (internal/session/keeper.go), which stays true of that session once
// read; past it, base.Err compares the clock with the current deadline
// itself.
func (cl *sharedClaim) live(now time.Time) error {
	select {
	case <-cl.base.Done():
		return cl.base.Err()
	default:
	}
	if now.UnixNano() < cl.until.Load() {
		return nil
	}
	if err := cl.base.Err(); err != nil {
		return err
	}
	cl.until.Store(cl.base.ValidUntil().UnixNano())
	return nil
}

// sharedWaiter is an acquire waiting for a queued sharedClaim; the sharedClaim's goroutine
// hands it its lease at the grant.
type sharedWaiter struct {
	start time.Time
	lease *Lease
}

// subLease is the state of a lease on a shared node.
type subLease struct {
	cl      *sharedClaim
	granted time.Time

	mu       sync.Mutex
	err      error // set once, when it ends
	until    time.Time
	released bool
	done     chan struct{}
}

func (s *sharedReads) Acquire(ctx context.Context) (*Lease, error) {
	return s.acquire(ctx, "acquire", false)
}

func (s *sharedReads) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.acquire(ctx, "try acquire", true)
}

// acquire joins the open sharedClaim, or opens one. A sharedClaim that
// holds gives a lease at once; a queued one is waited for (a TryAcquire
// does not wait: ErrLocked). A sharedWaiter whose ctx ends leaves; the last
// to leave stops the sharedClaim's acquire, which deletes its node.
func (s *sharedReads) acquire(ctx context.Context, op string, try bool) (*Lease, error) {
	start := time.Now()
	if err := s.l.c.usable(ctx); err != nil {
		return nil, s.failed(op, start, err)
	}
	for {
		l, again, err := s.attempt(ctx, start, try)
		switch {
		case err != nil:
			return nil, s.failed(op, start, err) // the engine's errors are *OpErrors already
		case !again:
			s.acquired(l, start)
			return l, nil
		}
	}
}

// attempt joins or opens a sharedClaim once: a lease, or again (a pause
// ended; a TryAcquire's sharedClaim could not hold), or an error.
func (s *sharedReads) attempt(ctx context.Context, start time.Time, try bool) (_ *Lease, again bool, _ error) {
	s.mu.Lock()
	cl := s.joinableLocked(try)
	if wait := s.pauseLocked(cl, try); wait != nil {
		s.mu.Unlock()
		return nil, true, wait(ctx)
	}
	if cl.base != nil {
		l := cl.addLocked(start)
		s.mu.Unlock()
		return l, false, nil
	}
	if try && !cl.try {
		s.mu.Unlock()
		return nil, false, ErrLocked // a node of ours is queued
	}
	w := &sharedWaiter{start: start}
	cl.joined = append(cl.joined, w)
	s.mu.Unlock()
	return s.await(ctx, cl, w, try)
}

// joinableLocked returns the sharedClaim to join, opening one if there is
// none or the open one is closed or lost. s.mu is held.
func (s *sharedReads) joinableLocked(try bool) *sharedClaim {
	cl := s.cur
	if cl != nil && cl.base != nil && !cl.closed && cl.live(time.Now()) != nil {
		cl.closed = true // lost: its goroutine is ending its leases
	}
	if cl == nil || cl.closed {
		cl = s.open(try)
	}
	return cl
}

// pauseLocked returns, for a holding sharedClaim paused by a children
// notification, a wait until the children read that follows returns; nil
// if the read may join now. While the connection is down the read does
// not wait (the children read waits for it): otherwise a read would join
// a node that a writer may be queued behind. s.mu is held.
func (s *sharedReads) pauseLocked(cl *sharedClaim, try bool) func(context.Context) error {
	if cl.base == nil || !cl.paused || try {
		return nil
	}
	st := s.l.c.s.State()
	if !st.Connected {
		return nil
	}
	resume := cl.resume
	return func(ctx context.Context) error {
		select {
		case <-resume:
		case <-st.Changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
}

// await waits for a queued sharedClaim's grant, or for ctx; again: the
// sharedClaim was a TryAcquire's, which could not hold, and w may queue.
func (s *sharedReads) await(ctx context.Context, cl *sharedClaim, w *sharedWaiter, try bool) (_ *Lease, again bool, _ error) {
	select {
	case <-cl.ready:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.lease != nil {
		return w.lease, false, nil
	}
	if err := cl.err; err != nil {
		if cl.try && !try && errors.Is(err, ErrLocked) {
			return nil, true, nil // joined a TryAcquire's sharedClaim that could not hold: queue
		}
		return nil, false, err
	}
	cl.leaveLocked(w)
	return nil, false, ctx.Err()
}

// open starts a sharedClaim and makes it the one to join. s.mu is held.
func (s *sharedReads) open(try bool) *sharedClaim {
	ctx, cancel := context.WithCancel(context.Background())
	cl := &sharedClaim{s: s, try: try, cancel: cancel, ready: make(chan struct{}), subs: map[*subLease]bool{},
		exited: make(chan struct{}), resume: make(chan struct{})}
	s.cur = cl
	go cl.run(ctx)
	return cl
}

// leaveLocked takes a sharedWaiter whose ctx ended off a queued sharedClaim; the last
// one out closes the sharedClaim and stops its acquire. s.mu is held.
func (cl *sharedClaim) leaveLocked(w *sharedWaiter) {
	for i, x := range cl.joined {
		if x == w {
			cl.joined = append(cl.joined[:i], cl.joined[i+1:]...)
			break
		}
	}
	if len(cl.joined) == 0 {
		cl.closeLocked()
		cl.cancel() // the engine deletes the node, as for any cancelled acquire
	}
}

// closeLocked stops new reads joining the sharedClaim. s.mu is held.
func (cl *sharedClaim) closeLocked() {
	cl.closed = true
	if cl.s.cur == cl {
		cl.s.cur = nil
	}
}

// addLocked makes a lease on the sharedClaim's node. s.mu is held.
func (cl *sharedClaim) addLocked(start time.Time) *Lease {
	sub := &subLease{cl: cl, granted: time.Now(), done: make(chan struct{})}
	cl.subs[sub] = true
	b := cl.base
	return &Lease{c: b.c, node: b.node, token: b.token, meta: b.meta, sub: sub}
}

// run is the sharedClaim's goroutine, its only one: it acquires the node, hands
// the waiters their leases, then watches the lock's children for a writer
// queued behind the node until the node's lease ends, and then ends every
// lease left on it. Stop signals: ctx (cancelled by the last sharedWaiter to
// leave) before the grant, the base lease's Done after it. Whoever releases
// the last lease waits for it to return (exited).
func (cl *sharedClaim) run(ctx context.Context) {
	defer close(cl.exited)
	defer cl.cancel()
	s := cl.s
	leases, err := s.l.acquire(ctx, "acquire", 1, cl.try)
	s.mu.Lock()
	if err == nil && len(cl.joined) == 0 {
		// Everyone left while the grant was on its way.
		cl.closeLocked()
		cl.err = context.Canceled
		close(cl.ready)
		s.mu.Unlock()
		if rerr := leases[0].Release(context.Background()); rerr != nil {
			s.l.c.s.Log().Debug("zklock: shared read: release an unwanted node", "err", rerr)
		}
		return
	}
	if err != nil {
		cl.closeLocked()
		cl.err = err
		close(cl.ready)
		s.mu.Unlock()
		return
	}
	cl.base = leases[0]
	cl.until.Store(cl.base.ValidUntil().UnixNano())
	for _, w := range cl.joined {
		w.lease = cl.addLocked(w.start)
	}
	cl.joined = nil
	close(cl.ready)
	s.mu.Unlock()

	cl.watchWriters()
	<-cl.base.Done()
	cl.lost()
}

// watchWriters watches the lock's children until a writer is queued behind
// the node (then closes the sharedClaim for joining) or the node's lease ends.
// Any node that is not a reader's, with a greater sequence, is such a
// writer: a writer ahead of the node would keep it from holding, and a
// mutex or kazoo's `__lock__` node excludes readers as a writer does.
//
// From a children notification until the read that follows it returns,
// the sharedClaim is paused: new reads wait instead of joining (while the
// connection is up; see [sharedReads.acquire]). So the leases on the node
// stop growing from the moment ZooKeeper's notification of a writer's
// create arrives, not one read later; a change that is not a writer (a
// reader's node, another process's) costs the process's new reads one
// round trip.
func (cl *sharedClaim) watchWriters() {
	c, path := cl.s.l.c, cl.s.l.path
	mine, ok, _ := parseChild(strings.TrimPrefix(cl.base.node, path+"/"))
	if !ok {
		return
	}
	for {
		st := c.s.State()
		names, ch, err := c.s.Conn().ChildrenW(path)
		if cl.sawWriter(err == nil && writerBehind(names, mine.seq)) || !cl.next(st, ch, err) {
			return
		}
	}
}

// sawWriter ends a pause, and closes the sharedClaim for joining if a
// writer is queued behind it; it reports writer.
func (cl *sharedClaim) sawWriter(writer bool) bool {
	cl.s.mu.Lock()
	defer cl.s.mu.Unlock()
	if writer {
		cl.closeLocked()
	}
	cl.resumeLocked()
	return writer
}

// next waits for the children watch ch to fire (the sharedClaim is then
// paused) or, after a read that failed with err, for the session's state
// to change; false once the node's lease ends, or after an error that
// cannot pass (the path or the Client is gone: the base lease says so).
func (cl *sharedClaim) next(st session.Snapshot, ch <-chan session.Event, err error) bool {
	done := cl.base.Done()
	if err == nil {
		select {
		case <-ch:
			cl.s.mu.Lock()
			cl.paused = true
			cl.s.mu.Unlock()
			return true
		case <-done:
			return false
		}
	}
	if cl.s.l.c.s.Classify(err) != session.Retry {
		return false
	}
	select {
	case <-st.Changed:
		return true
	case <-done:
		return false
	}
}

// resumeLocked ends a pause: the reads waiting for it go on. s.mu is held.
func (cl *sharedClaim) resumeLocked() {
	if cl.paused {
		cl.paused = false
		close(cl.resume)
		cl.resume = make(chan struct{})
	}
}

// writerBehind reports a node that excludes readers queued after seq.
func writerBehind(names []string, seq int32) bool {
	for _, name := range names {
		ch, ok, err := parseChild(name)
		if ok && err == nil && ch.Kind != KindRead && seqBefore(seq, ch.seq) {
			return true
		}
	}
	return false
}

// lost ends every lease still on the sharedClaim once its base lease has ended:
// lost, since a released base has no lease left on it.
func (cl *sharedClaim) lost() {
	s := cl.s
	err := cl.base.Err()
	s.mu.Lock()
	cl.closeLocked()
	subs := make([]*subLease, 0, len(cl.subs))
	for sub := range cl.subs {
		subs = append(subs, sub)
	}
	clear(cl.subs)
	s.mu.Unlock()
	for _, sub := range subs {
		sub.end(err)
	}
}

// end ends the sub-lease with err and traces it; it reports whether it
// was live.
func (sub *subLease) end(err error) bool {
	now := time.Now()
	deadline := now // ValidUntil is the earlier of the deadline and the end
	// If the node's lease has ended (lost), it ended first: no lease on the
	// node is valid past the end that its ValidUntil reports, though this
	// one ends only when its holder or the sharedClaim's goroutine sees it,
	// later (TestFakeSharedReadsDeletedNodeServesNoMore).
	if now.UnixNano() >= sub.cl.until.Load() || sub.cl.closedByLoss() {
		deadline = sub.cl.base.ValidUntil()
	}
	sub.mu.Lock()
	if sub.err != nil {
		sub.mu.Unlock()
		return false
	}
	sub.err, sub.until = err, now
	if deadline.Before(now) {
		sub.until = deadline
	}
	close(sub.done)
	sub.mu.Unlock()
	cl := sub.cl
	t := cl.s.l.c.trace
	info := LeaseInfo{Path: cl.s.l.path, Node: cl.base.node, Kind: KindRead, Token: cl.base.token, Held: now.Sub(sub.granted), Err: err}
	if errors.Is(err, ErrReleased) {
		if t.Released != nil {
			t.Released(info)
		}
	} else if t.Lost != nil {
		t.Lost(info)
	}
	return true
}

func (sub *subLease) Done() <-chan struct{} { return sub.done }

func (sub *subLease) Err() error {
	sub.mu.Lock()
	err := sub.err
	sub.mu.Unlock()
	if err != nil {
		return err
	}
	if err := sub.cl.live(time.Now()); err != nil {
		sub.end(err)
		sub.mu.Lock()
		defer sub.mu.Unlock()
		return sub.err
	}
	return nil
}

func (sub *subLease) ValidUntil() time.Time {
	sub.mu.Lock()
	ended, until := sub.err != nil, sub.until
	sub.mu.Unlock()
	if ended {
		return until
	}
	return sub.cl.base.ValidUntil()
}

// Release ends the sub-lease; the last one on its sharedClaim releases the node
// (with ctx) and waits, while ctx allows, for the sharedClaim's goroutine to
// return.
func (sub *subLease) Release(ctx context.Context) error {
	sub.mu.Lock()
	if sub.released {
		sub.mu.Unlock()
		return fmt.Errorf("%s: %w", sub.cl.base.node, ErrReleased)
	}
	sub.released = true
	sub.mu.Unlock()
	if lost := sub.Err(); lost != nil {
		return fmt.Errorf("lease %s was lost: %w", sub.cl.base.node, lost)
	}
	if !sub.end(ErrReleased) {
		return fmt.Errorf("lease %s was lost: %w", sub.cl.base.node, sub.Err())
	}
	cl := sub.cl
	s := cl.s
	s.mu.Lock()
	delete(cl.subs, sub)
	last := len(cl.subs) == 0 && !cl.closedByLoss()
	if last {
		cl.closeLocked()
	}
	s.mu.Unlock()
	if !last {
		return nil
	}
	if err := cl.base.Release(ctx); err != nil {
		s.l.c.s.Log().Debug("zklock: shared read: release the node", "node", cl.base.node, "err", err)
	}
	// The goroutine returns once a children read in flight does; one
	// stuck while the connection is down must not hold Release past ctx.
	select {
	case <-cl.exited:
	case <-ctx.Done():
	}
	return nil
}

// closedByLoss reports a sharedClaim whose node's lease ended already: its
// goroutine takes care of it. It needs no lock.
func (cl *sharedClaim) closedByLoss() bool {
	select {
	case <-cl.base.Done():
		return true
	default:
		return false
	}
}

// acquired traces a lease on the shared node.
func (s *sharedReads) acquired(l *Lease, start time.Time) {
	if f := s.l.c.trace.Acquired; f != nil {
		f(AcquireInfo{Path: s.l.path, Node: l.node, Kind: KindRead, Waited: time.Since(start), Token: l.token})
	}
}

// failed wraps the error of a failed read, and traces it.
func (s *sharedReads) failed(op string, start time.Time, err error) error {
	return s.traceFailed(start, opError(op, s.l.path, err))
}

// traceFailed traces a failed read and returns its error.
func (s *sharedReads) traceFailed(start time.Time, err error) error {
	if f := s.l.c.trace.Failed; f != nil {
		f(AcquireInfo{Path: s.l.path, Kind: KindRead, Waited: time.Since(start), Err: err})
	}
	return err
}

// untraced keeps a policy's participants from the Client's [Trace]: a
// shared read node's, whose sub-leases are traced instead.
type untraced struct{ policy }

func (untraced) traced() bool { return false }
