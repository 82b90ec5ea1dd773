package zklock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zklock/internal/session"
)

// Lock is the engine under every recipe: Curator's LockInternals with a
// pluggable [Driver]. Each Acquire creates a protected ephemeral-sequential
// node `_c_<uuid>-<name><seq>` under the lock path (whose missing
// ancestors are created as container nodes), reads the children in queue
// order and asks the lock's policy (its [Driver], for a Lock of [NewLock])
// whether it holds; if not, it watches (with getData) the siblings the
// policy names and decides again when they change, and after every
// reconnect or session change.
//
// The engine has three parts, one file each: a claim makes the nodes
// (claim.go), a waiter on each path reads the queue, asks the policy and
// waits (waiter.go, look.go), and the grant turns waiters that all hold
// into leases (grant.go). [participant.run] ties them together.
//
// A *Lock is safe for concurrent use; each Acquire is an independent
// participant with its own node.
type Lock struct {
	lockConfig

	// queued: the latest first look on this lock found its participant
	// queued behind others, so the next first look is sent without a
	// children watch ([participant.startLooks]).
	queued atomic.Bool

	// tokens: a lease of this lock was asked for its token. Where grants
	// come without their zxid (ZooKeeper before 3.9), the lock then takes
	// no part in the handoff while its queue is short
	// ([participant.handsOff]); until then a lease handed over reads its
	// token only if asked ([Lease.Token]).
	tokens atomic.Bool
}

// lockConfig is what a Lock is made of. Every Lock is built from one, by
// [lockConfig.build]: the recipes' own (a RWMutex's write side, a
// semaphore layout's inner locks) derive theirs from a validated one.
// Whatever differs between recipes is the policy's ([policy]).
type lockConfig struct {
	c    *Client
	path string
	pol  policy
	data []byte
}

func (cfg lockConfig) build() *Lock { return &Lock{lockConfig: cfg} }

// on returns cfg for another path and policy, with the same client and
// node data.
func (cfg lockConfig) on(path string, pol policy) lockConfig {
	return lockConfig{c: cfg.c, path: path, pol: pol, data: cfg.data}
}

// liveSize is a size that participants follow while they wait (a Curator
// SharedCount, semaphore_layout.go), as a policy names it ([policy].live).
// The engine reads it on a path's first look, and watches it while
// waiting: a change makes the waiter decide again.
type liveSize interface {
	check(zc session.Conn) error
	// watch sets a watch on the size, for a waiter whose last decision
	// used the version *seen. again: the size read is another, so decide
	// again at once (*seen is updated); otherwise ch fires when it changes.
	watch(zc session.Conn, seen *sizeVersion) (ch <-chan session.Event, again bool, err error)
}

// sizeVersion identifies one value of a live size's node: a node deleted
// and made again starts its version at 0 again, with a new czxid.
type sizeVersion struct {
	czxid   int64
	version int32
}

func (v sizeVersion) after(w sizeVersion) bool {
	return v.czxid > w.czxid || v.czxid == w.czxid && v.version > w.version
}

// NewLock returns a lock on path with the policy d. It validates its
// arguments (errors wrap ErrInvalidArgument: a nil client or driver, a bad
// path, a driver whose Kind is not one zklock writes) and makes no
// ZooKeeper call.
func NewLock(c *Client, path string, d Driver, opts ...LockOption) (*Lock, error) {
	l, err := newLock(c, path, d, opts)
	if err != nil {
		return nil, opError("new lock", path, err)
	}
	return l, nil
}

func newLock(c *Client, path string, d Driver, opts []LockOption) (*Lock, error) {
	var pol policy
	if d != nil {
		pol = adapt(d)
	}
	cfg, o, err := newLockConfig(c, path, pol, opts)
	if err == nil {
		err = o.only(false, false)
	}
	if err != nil {
		return nil, err
	}
	return cfg.build(), nil
}

// newLockConfig validates a lock's arguments and applies its options, once.
// The recipe that calls it refuses the options of other recipes
// ([lockOptions.only]).
func newLockConfig(c *Client, path string, pol policy, opts []LockOption) (lockConfig, lockOptions, error) {
	o := lockOptions{}
	switch {
	case c == nil:
		return lockConfig{}, o, invalidf("nil client")
	case pol == nil:
		return lockConfig{}, o, invalidf("nil driver")
	}
	if err := validatePath(path); err != nil {
		return lockConfig{}, o, err
	}
	if pol.kind().lockName() == "" {
		return lockConfig{}, o, invalidf("driver kind %v is none of %v, %v, %v, %v, %v",
			pol.kind(), KindMutex, KindRead, KindWrite, KindLease, KindLatch)
	}
	for _, opt := range opts {
		if opt == nil {
			return lockConfig{}, o, invalidf("nil lock option")
		}
		if err := opt(&o); err != nil {
			return lockConfig{}, o, err
		}
	}
	data := c.identity
	if o.set {
		data = o.data
	}
	return lockConfig{c: c, path: path, pol: pol, data: data}, o, nil
}

// Path returns the lock path.
func (l *Lock) Path() string { return l.path }

// Acquire waits until the lock is held and returns the lease, or returns
// when ctx is done with an error for which errors.Is(err, ctx.Err()) holds.
// A done ctx returns at once. On failure nothing is left behind: our node
// is deleted by a cleanup that does not depend on ctx, retried until it
// succeeds or the session ends. If the session expires while waiting, or
// our node is deleted by someone else, the participant queues again (at the
// back) while ctx allows. Errors wrap ErrClientClosed, ErrUnknownNode,
// ErrInvalidArgument (a driver that neither holds nor watches) or
// ZooKeeper's own.
func (l *Lock) Acquire(ctx context.Context) (*Lease, error) {
	leases, err := l.acquire(ctx, "acquire", 1, false)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// TryAcquire takes the lock if the driver says it holds at once, without
// waiting for anyone, and otherwise returns an error wrapping ErrLocked. It
// leaves no node behind when it fails. It still waits for ZooKeeper itself
// (bounded by ctx).
func (l *Lock) TryAcquire(ctx context.Context) (*Lease, error) {
	leases, err := l.acquire(ctx, "try acquire", 1, true)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// Participants lists the lock's participants: holders first, then waiters,
// each in queue order, with their node data, as the lock's driver sees
// them.
func (l *Lock) Participants(ctx context.Context) ([]Participant, error) {
	return l.participants(ctx, func(Child) policy { return l.pol })
}

func (l *Lock) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	p := newQueueParticipant(l.c, l.path, []*Lock{l}, n)
	p.try = try
	return p.acquire(ctx, op)
}

// errRequeue: our nodes are gone (their session ended, or someone deleted
// them); queue again.
var errRequeue = errors.New("requeue")

// participant is one acquire: a claim (the nodes it makes, claim.go) and
// a waiter on each of its paths (waiter.go). Acquire, TryAcquire,
// AcquireN, MultiLock, Downgrade and Campaign all run through it; they
// differ only in their claim.
type participant struct {
	c       *Client
	claim   claim
	ws      []*waiter // one per path, in the order of the claim's locks
	try     bool      // never wait for others: ErrLocked instead
	whole   bool      // one lease covers every node (a MultiLock's), else one per node
	what    string    // the lock's name in errors and traces
	id      string    // the protected id shared by our nodes
	session int64     // the session of our nodes, or of the unsure create
	unsure  bool      // a create may have made nodes we cannot name but by id
	waited  bool      // some decision said wait
	start   time.Time
	created time.Time       // when our nodes were last created
	ahead   int             // participants ahead at the first look
	node    string          // our first node, once created (for traces)
	gone    <-chan struct{} // closed if the keeper finds our last node deleted while we wait...
	stopped func()          // ...until this is called (nil: not waiting)

	queue queueClaim // the claim, for a queue: held here, it costs no allocation of its own
}

// newQueueParticipant is a participant of a [queueClaim] of n nodes on
// the path of each of ls.
func newQueueParticipant(c *Client, what string, ls []*Lock, n int) *participant {
	p := &participant{queue: queueClaim{ls: ls, n: n}}
	p.init(c, what, &p.queue)
	return p
}

func newParticipant(c *Client, what string, cl claim) *participant {
	p := &participant{}
	p.init(c, what, cl)
	return p
}

func (p *participant) init(c *Client, what string, cl claim) {
	ls := cl.locks()
	p.c, p.claim, p.what, p.ws, p.start = c, cl, what, make([]*waiter, len(ls)), time.Now()
	for i, l := range ls {
		p.ws[i] = &waiter{l: l, guard: len(ls) > 1}
	}
}

// acquire runs the participant until it holds, fails, or ctx ends; op
// names the call in errors and traces.
func (p *participant) acquire(ctx context.Context, op string) ([]*Lease, error) {
	if err := p.c.usable(ctx); err != nil {
		return nil, p.failed(op, err)
	}
	leases, err := p.run(ctx)
	if err != nil {
		return nil, p.failed(op, err)
	}
	p.acquired(leases)
	return leases, nil
}

// last is our last node on the first path: the one the keeper may check
// while we wait.
func (p *participant) last() string {
	nodes := p.ws[0].nodes
	return nodes[len(nodes)-1]
}

// run queues the participant and waits until it holds.
//
// Leaving by any path but a grant deletes our nodes: the deferred abandon
// is the one place that cleans up a failed, cancelled or refused acquire,
// so no return path can forget it.
func (p *participant) run(ctx context.Context) (leases []*Lease, err error) {
	defer func() {
		if leases == nil {
			p.abandon()
		}
	}()
	for {
		if err := p.enqueue(ctx); err != nil {
			return nil, err
		}
		leases, err = p.await(ctx)
		p.stopWaiting()
		if !errors.Is(err, errRequeue) {
			return leases, err
		}
		if err := p.c.s.Replaced(p.session); err != nil {
			return nil, err // a swap on reconnect ends every wait of the old session (internal/session/replaced.go)
		}
		if p.claim.session() != 0 {
			return nil, ErrSessionExpired // a place lives in its one session only
		}
		p.abandon() // whatever may be left of ours in this session
		p.c.s.Log().Debug("zklock: queueing again", "path", p.what)
	}
}

// await waits until our nodes hold on every path, deciding one path at a
// time, again after every change of a watched sibling and every change of
// the session's state. Holding is monotone ([Driver]), so a path that
// holds keeps holding while we decide the next; a path counts only if it
// was decided in the Client's current epoch (one connection, one session),
// and the grant checks the own-node watches once more (see
// [participant.quiet]). The argument is in docs/design.md, "MultiLock".
func (p *participant) await(ctx context.Context) ([]*Lease, error) {
	var b backoff.BackOff
	for {
		st, err := p.ready(ctx)
		if err != nil {
			return nil, err
		}
		w := p.undecided(st.Epoch)
		if w == nil {
			leases, err := p.grant(ctx, st)
			if err != nil || leases != nil {
				return leases, err
			}
			continue // the session changed since the read: decide again
		}
		if err := p.step(ctx, w, st, &b); err != nil {
			return nil, err
		}
	}
}

// step decides w once, and acts on it: hold, fail a try, or wait. An
// error that may pass is backed off and leaves w undecided.
func (p *participant) step(ctx context.Context, w *waiter, st session.Snapshot, b *backoff.BackOff) error {
	v, err := p.claim.survey(p, w, st.Epoch)
	if again, err := p.backoff(ctx, b, err); again || err != nil {
		return err
	}
	if v.d.Holds {
		// Announce to whoever may wait for our hold: a participant
		// queued behind us decides that we wait on a read of its own,
		// which may come before ours even when we never wait (our first
		// look can be late: a lagging server, a dropped connection). Its
		// node was made before its read, so ours lists it: a holder
		// with nobody behind it, the common case, spends no write.
		if w.marked {
			// Not while our node says held back: take the mark off, and
			// decide on a read made after that ([participant.unmark]).
			_, err := p.backoff(ctx, b, p.unmark(w))
			return err
		}
		// Decided from the registry, the nodes behind are not known: announce.
		w.hold(st.Epoch, v.d.announce && (p.waited || v.fromReg || v.last < len(v.kids)-1))
		return nil
	}
	if p.try {
		return ErrLocked
	}
	if len(v.d.behind) > 0 {
		// Held back: tell the groups ahead that count us that we do not
		// hold ([participant.mark]), then wait as decided (a watched node
		// that changed since our read is found so when it is watched).
		if again, err := p.backoff(ctx, b, p.mark(w)); again || err != nil {
			return err
		}
	}
	p.queued()
	p.startWaiting()
	return p.wait(ctx, w, st, w.plan(v))
}

// startWaiting records, before our first wait, that we wait: the keeper
// then has the session confirmed, so that a grant finds the deadline
// ahead, and checks that our node is still there ([session.Session.Waiting]).
// Who holds on its first look never needs it.
func (p *participant) startWaiting() {
	if p.stopped == nil {
		p.gone, p.stopped = p.c.s.Waiting(p.last(), p.session)
	}
}

// stopWaiting undoes startWaiting, if it was done.
func (p *participant) stopWaiting() {
	if p.stopped != nil {
		p.stopped()
		p.gone, p.stopped = nil, nil
	}
}

// undecided returns the first waiter not decided to hold in epoch, or nil.
func (p *participant) undecided(epoch uint64) *waiter {
	for _, w := range p.ws {
		if !w.held || w.heldAt != epoch {
			w.held = false
			return w
		}
	}
	return nil
}

// backoff sorts out the error of a read: again says to read again (after a
// backoff, for an error that may pass); err is what ends the acquire,
// errRequeue when our nodes or the path are gone.
func (p *participant) backoff(ctx context.Context, b *backoff.BackOff, err error) (again bool, _ error) {
	switch p.c.s.Classify(err) {
	case session.Done:
		*b = nil
		return false, nil
	case session.Gone:
		return false, errRequeue // the path or our node is gone, so is our node
	case session.Retry:
		if *b == nil {
			*b = p.c.s.NewBackOff()
		}
		if err := session.Sleep(ctx, (*b).NextBackOff()); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, err
}

// ready waits until the session that owns our nodes is connected.
func (p *participant) ready(ctx context.Context) (session.Snapshot, error) {
	st, err := p.c.s.AwaitConnected(ctx)
	if err == nil && p.c.s.ID() != p.session {
		return st, errRequeue // our nodes went with the old session
	}
	return st, err
}
