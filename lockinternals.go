package zklock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zklock/internal/session"
)

// Lock is the engine under every recipe: Curator's LockInternals with a
// pluggable [Driver]. Each Acquire creates a protected ephemeral-sequential
// node `_c_<uuid>-<name><seq>` under the lock path (whose missing
// ancestors are created as container nodes), reads the children in queue
// order and asks the driver whether it holds; if not, it watches (with
// getData) the siblings the driver names and decides again when they change,
// and after every reconnect or session change.
//
// A *Lock is safe for concurrent use; each Acquire is an independent
// participant with its own node.
type Lock struct {
	c      *Client
	path   string
	driver Driver
	data   []byte
	refuse func(name string) bool // plain children that make the path unusable
	size   []byte                 // a semaphore's maxLeases, recorded in the path's data

	// Set for the locks of the Curator and kazoo semaphore layouts only
	// (semaphore_layout.go).
	kazoo      bool     // nodes named as kazoo's Lock names them: <32 hex>__lock__<seq>
	persistent bool     // the lock path itself is persistent, as kazoo's ensure_path makes it
	count      liveSize // the size, when it may change while participants wait

	untraced bool // a shared read node's lock: its sub-leases are traced instead (rwlock_shared.go)

	// queued: the latest first look on this lock found its participant
	// queued behind others, so the next first look is sent without a
	// children watch ([participant.startLooks]).
	queued atomic.Bool
}

// liveSize is a semaphore size that participants follow while they wait
// (a Curator SharedCount, semaphore_layout.go). The engine checks it on a
// path's first look, in place of a size recorded in the path, and watches
// it while waiting: a change makes the waiter decide again.
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
		return nil, fmt.Errorf("zklock: new lock: %w", err)
	}
	return l, nil
}

func newLock(c *Client, path string, d Driver, opts []LockOption) (*Lock, error) {
	if c == nil {
		return nil, invalidf("nil client")
	}
	if err := validatePath(path); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, invalidf("nil driver")
	}
	if d.Kind().lockName() == "" {
		return nil, invalidf("driver kind %v is none of %v, %v, %v, %v, %v",
			d.Kind(), KindMutex, KindRead, KindWrite, KindLease, KindLatch)
	}
	o := lockOptions{}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil lock option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if _, sem := d.(semaphoreDriver); o.sem != nil && !sem {
		return nil, invalidf("WithSemaphoreLayout and WithSharedCount apply to a Semaphore only")
	}
	if _, read := d.(readDriver); o.shared && !read {
		return nil, invalidf("WithSharedReads applies to an RWMutex only")
	}
	data := c.identity
	if o.set {
		data = o.data
	}
	return &Lock{c: c, path: path, driver: d, data: data}, nil
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
	return l.participants(ctx, func(Child) Driver { return l.driver })
}

func (l *Lock) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	return acquire(ctx, op, l.path, request{locks: []*Lock{l}, n: n, try: try})
}

// request is what one acquire asks of the engine: a participant made of
// n nodes on the path of each of locks, all created by one operation.
type request struct {
	locks []*Lock // one per path; a MultiLock's are several
	n     int     // nodes on each path: [Semaphore.AcquireN]'s n, else 1
	try   bool    // never wait for others: ErrLocked instead
	whole bool    // one lease covers every node (a MultiLock's), else one per node

	// A downgrade's read node: its full name and protected id (a plain
	// ephemeral node, not sequential) and the only session it may live in.
	node    string
	id      string
	session int64
}

// errRequeue: our nodes are gone (their session ended, or someone deleted
// them); queue again.
var errRequeue = errors.New("requeue")

// acquire runs one participant of r until it holds, fails, or ctx ends.
// what names the lock in errors and traces.
func acquire(ctx context.Context, op, what string, r request) ([]*Lease, error) {
	c := r.locks[0].c
	p := newParticipant(c, what, r)
	if err := c.usable(ctx); err != nil {
		return nil, p.failed(op, err)
	}
	leases, err := p.run(ctx)
	if err != nil {
		return nil, p.failed(op, err)
	}
	p.acquired(leases)
	return leases, nil
}

// participant is one acquire: a group of nodes made by one operation, on
// one path or several, in one session, with one protected id. Acquire,
// TryAcquire, AcquireN, MultiLock, Downgrade and Campaign all run through
// it.
type participant struct {
	c       *Client
	req     request
	what    string
	parts   []*part // one per path, in the order of req.locks
	id      string  // the protected id shared by our nodes
	session int64   // the session of our nodes, or of the unsure create
	unsure  bool    // a create may have made nodes we cannot name but by id
	waited  bool    // some decision said wait
	start   time.Time
	created time.Time       // when our nodes were last created
	ahead   int             // participants ahead at the first look
	node    string          // our first node, once created (for traces)
	gone    <-chan struct{} // closed if the keeper finds our last node deleted while we wait...
	stopped func()          // ...until this is called (nil: not waiting)
}

// part is a participant's place on one path.
type part struct {
	l        *Lock
	nodes    []string             // full paths, once known
	own      <-chan session.Event // a watch on our last node (a MultiLock's, a downgrade's); nil until set
	ownAt    uint64               // the Client's epoch when own was set
	token    int64                // the path's pzxid when the read that decided we hold was made ([participant.token])
	pre      <-chan fetched       // the first look, read while the create was on its way
	looked   bool                 // the first look was made
	seen     seenVersion          // the last version of an awaited node we decided on
	counted  sizeVersion          // the version of a SharedCount we decided on (semaphore_layout.go)
	held     bool                 // decided to hold...
	heldAt   uint64               // ...in this epoch
	announce bool                 // on the grant, tell successors waiting with awaitHold
	watch    bool                 // the first look leaves a children watch ([participant.startLooks])
	looking  bool                 // our last read is recorded with the Client (LookStart)...
	events   uint64               // ...when the path had had this many children events
}

// seenVersion is a node's data version, as a waiter with awaitHold saw it.
type seenVersion struct {
	path    string
	version int32
}

func newParticipant(c *Client, what string, r request) *participant {
	p := &participant{c: c, req: r, what: what, parts: make([]*part, len(r.locks)), start: time.Now()}
	for i, l := range r.locks {
		p.parts[i] = &part{l: l}
	}
	return p
}

// single reports a participant on one path.
func (p *participant) single() bool { return len(p.parts) == 1 }

// last is our last node on the first path: the one the keeper may check
// while we wait.
func (p *participant) last() string {
	nodes := p.parts[0].nodes
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
		if p.req.session != 0 {
			return nil, ErrSessionExpired // a downgrade's node lives in its write lease's session only
		}
		p.abandon() // whatever may be left of ours in this session
		p.c.s.Log().Debug("zklock: queueing again", "path", p.what)
	}
}

// abandon hands whatever nodes of ours may exist to the janitor, and
// forgets them. After a create whose fate was unknown it deletes by
// protected id, which also catches a node a retried create may have left
// beside the ones we know.
func (p *participant) abandon() {
	for _, pt := range p.parts {
		switch {
		case p.unsure && p.req.node == "":
			p.c.s.Discard(session.Job{Parent: pt.l.path, Prefix: pt.l.idPrefix(p.id), Session: p.session})
		case p.unsure:
			p.c.s.Discard(session.Job{Nodes: []string{p.req.node}, Session: p.session})
		case pt.nodes != nil:
			p.c.s.Discard(session.Job{Nodes: pt.nodes, Session: p.session})
		}
		p.endLook(pt)
		*pt = part{l: pt.l}
	}
	p.unsure = false
}

// enqueue creates our nodes. A create that fails with a connection error
// may still have happened: we look for our nodes by their protected id,
// and accept them only in the session that made them.
func (p *participant) enqueue(ctx context.Context) error {
	if err := p.newID(); err != nil {
		return err
	}
	prefixes := p.prefixes()
	if err := p.fits(prefixes); err != nil {
		return err
	}
	var b backoff.BackOff
	for {
		sid, err := p.c.s.AwaitSession(ctx)
		if err != nil {
			return err
		}
		if p.req.session != 0 && sid != p.req.session {
			return ErrSessionExpired
		}
		made, again, err := p.create(ctx, sid, prefixes)
		switch {
		case err != nil:
			return err
		case made:
			p.created = time.Now()
			return nil
		case again:
			continue
		}
		if b == nil {
			b = p.c.s.NewBackOff()
		}
		if err := session.Sleep(ctx, b.NextBackOff()); err != nil {
			return err
		}
	}
}

func (p *participant) newID() error {
	if p.req.node != "" {
		p.id = p.req.id
		return nil
	}
	var err error
	p.id, err = newID()
	if err == nil && p.parts[0].l.kazoo {
		p.id = kazooID(p.id)
	}
	return err
}

// maxRequest is ZooKeeper's default bound on a request, jute.maxbuffer
// (0xfffff bytes). A server closes the connection of a client that sends a
// larger one (NIOServerCnxn.readLength, "Len error"), which looks like a
// connection loss: retried, it would never end.
const maxRequest = 0xfffff

// fits refuses, before any ZooKeeper call, a create of our nodes (named
// prefixes) whose request would exceed maxRequest: an AcquireN of
// thousands of leases, or a few with large node data. It estimates the
// request from above, as jute writes it: per op a 9-byte multi header, the
// path, the data, the ACL and the flags.
func (p *participant) fits(prefixes []string) error {
	size := 4 + 8 + 9 // the length, the request header, the multi's end
	data := len(p.parts[0].l.data)
	for _, prefix := range prefixes {
		size += 9 + 4 + len(prefix) + 4 + data + 4 + 4
		for _, a := range p.c.s.ACL(prefix) {
			size += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
		}
	}
	if size > maxRequest {
		return invalidf("creating %d nodes of %d bytes of data takes a request of about %d bytes, over ZooKeeper's limit of %d (jute.maxbuffer)",
			len(prefixes), data, size, maxRequest)
	}
	return nil
}

// prefixes are the names of the nodes to create, before their sequence:
// n on each path.
func (p *participant) prefixes() []string {
	out := make([]string, 0, len(p.parts)*p.req.n)
	for _, pt := range p.parts {
		prefix := pt.l.path + "/" + pt.l.nodePrefix(p.id)
		for i := 0; i < p.req.n; i++ {
			out = append(out, prefix)
		}
	}
	return out
}

// create tries once to create our nodes in session. made: they exist;
// again: try again at once (parents were missing, or the session changed
// under the create); neither: the create's fate was unknown and our nodes
// were not found: back off.
func (p *participant) create(ctx context.Context, sid int64, prefixes []string) (made, again bool, err error) {
	c := p.c
	zc := c.s.Conn()
	sent := time.Now()
	p.startLooks()
	pres, cancel := p.prefetch(zc, prefixes[0])
	nodes, err := p.createOp(zc, prefixes)
	o := c.s.Classify(err)
	if o != session.Done || zc.SessionID() != sid {
		cancel()
	}
	switch o {
	case session.Done:
		c.s.Confirm(sent, sid) // a write the quorum acknowledged
		if now := zc.SessionID(); now != sid {
			// The sid changed while the create was in flight, so the
			// nodes may belong to the new one: delete them if so (an
			// orphan there would block the queue until that sid ends),
			// and create again.
			c.s.Discard(session.Job{Nodes: nodes, Session: now})
			return false, true, nil
		}
		p.assign(nodes, sid, pres)
		return true, false, nil
	case session.Gone:
		return false, true, p.ensureParents(ctx)
	case session.Closing:
		return false, false, ErrClientClosed
	case session.Permanent:
		return false, false, err
	}
	return p.recover(ctx, sid)
}

// createOp creates every node of ours in one operation: one multi, so one
// transaction with one zxid (what makes a MultiLock deadlock-free, see
// docs/design.md), or a plain create for one node.
func (p *participant) createOp(zc session.Conn, prefixes []string) ([]string, error) {
	data := p.parts[0].l.data
	if p.req.node == "" {
		return zc.CreateEach(prefixes, data, p.c.s.ACL)
	}
	err := zc.CreateEphemeral(p.req.node, data, p.c.s.ACL(p.req.node))
	if session.NodeExists(err) {
		// A create whose reply was lost made it: only we know its name.
		// watchOwn checks that our session owns it.
		err = nil
	}
	return []string{p.req.node}, err
}

// assign records the nodes a create made, in session.
func (p *participant) assign(nodes []string, sid int64, pres []<-chan fetched) {
	n := len(nodes) / len(p.parts)
	for i, pt := range p.parts {
		pt.nodes, pt.pre = nodes[i*n:(i+1)*n], pres[i]
	}
	p.session, p.node = sid, nodes[0]
}

// recover looks for our nodes after a create whose fate is unknown. Only
// the session that sent it can own a node it made; another session means
// the node (if any) went with the old one. Until we know, the node is ours
// to clean up, by its protected id; nodes found stay so (abandon deletes by
// id, which also catches a stray of a retried create).
func (p *participant) recover(ctx context.Context, sid int64) (made, again bool, err error) {
	p.unsure, p.session = true, sid
	s, err := p.c.s.AwaitSession(ctx)
	if err != nil {
		return false, false, err
	}
	if s != sid {
		p.unsure = false
		return false, false, nil
	}
	for _, pt := range p.parts {
		nodes, err := p.find(pt)
		if err != nil || nodes == nil {
			return false, false, nil
		}
		pt.nodes = nodes
	}
	p.node = p.parts[0].nodes[0]
	return true, false, nil
}

// find looks for our nodes on pt's path. The sync first lets the server we
// now talk to catch up with the leader. One transaction made all of them,
// so it finds all or none.
func (p *participant) find(pt *part) ([]string, error) {
	l, zc := pt.l, p.c.s.Conn()
	_ = zc.Sync(l.path)
	names, err := zc.Children(l.path)
	if err != nil {
		return nil, err
	}
	prefix := l.idPrefix(p.id)
	var ours []string
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			ours = append(ours, name)
		}
	}
	if len(ours) != p.req.n {
		p.discardNames(l, ours)
		return nil, nil
	}
	kids, err := sortChildren(ours, nil)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, len(kids))
	for i, k := range kids {
		nodes[i] = l.path + "/" + k.Name
	}
	_, st, err := zc.Get(nodes[len(nodes)-1])
	if err != nil {
		return nil, err
	}
	if st.EphemeralOwner != p.session {
		return nil, nil // not ours: never counts
	}
	return nodes, nil
}

func (p *participant) discardNames(l *Lock, names []string) {
	if len(names) == 0 {
		return
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = l.path + "/" + n
	}
	p.c.s.Discard(session.Job{Nodes: paths, Session: p.session})
}

// ensureParents creates every lock path and its missing ancestors as
// container nodes, which the server deletes once they are empty again.
func (p *participant) ensureParents(ctx context.Context) error {
	for _, pt := range p.parts {
		if err := pt.l.ensureParents(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ensureParents creates the lock path and its missing ancestors as
// container nodes. It tries the lock path first and walks up only while
// the parent is missing: the server reaps an empty container (its
// ContainerManager), so with a lock per entity the usual case is one lock
// path gone under a parent that stays, one request rather than one per
// level.
func (l *Lock) ensureParents(ctx context.Context) error {
	dirs := parents(l.path)
	i := len(dirs) - 1
	for {
		err := l.createDir(ctx, dirs[i])
		if err == nil {
			break
		}
		if i == 0 || l.c.s.Classify(err) != session.Gone {
			return err
		}
		i-- // its parent is missing: create that first
	}
	for i++; i < len(dirs); i++ {
		if err := l.createDir(ctx, dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

// createDir creates dir as a container node (the lock path itself
// persistent, where the lock's layout asks for it), if it is not there.
func (l *Lock) createDir(ctx context.Context, dir string) error {
	var data []byte
	if dir == l.path {
		data = l.size // a semaphore records its size in its path
	}
	err := l.c.s.Retry(ctx, func(zc session.Conn) error {
		if dir == l.path && l.persistent {
			return createPersistent(zc, dir, data, l.c.s.ACL(dir))
		}
		return zc.CreateContainer(dir, data, l.c.s.ACL(dir))
	})
	if err != nil {
		return fmt.Errorf("create parent %s: %w", dir, err)
	}
	return nil
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
		pt := p.undecided(st.Epoch)
		if pt == nil {
			if leases, err := p.grant(ctx, st); err != nil || leases != nil {
				return leases, err
			}
			continue // the session changed since the read: decide again
		}
		v, err := p.survey(pt, st.Epoch)
		if again, err := p.backoff(ctx, &b, err); again {
			continue
		} else if err != nil {
			return nil, err
		}
		if v.d.Holds {
			pt.hold(st.Epoch, p.waited && v.d.announce)
			continue
		}
		if p.req.try {
			return nil, ErrLocked
		}
		p.queued()
		p.startWaiting()
		if err := p.wait(ctx, pt, st, pt.plan(v.kids, v.d)); err != nil {
			return nil, err
		}
	}
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

// undecided returns the first part not decided to hold in epoch, or nil.
func (p *participant) undecided(epoch uint64) *part {
	for _, pt := range p.parts {
		if !pt.held || pt.heldAt != epoch {
			pt.held = false
			return pt
		}
	}
	return nil
}

func (pt *part) hold(epoch uint64, announce bool) {
	pt.held, pt.heldAt, pt.announce = true, epoch, announce
}

// view is a participant's place in one path's queue, as one read showed it.
type view struct {
	kids        []Child
	first, last int
	d           decision
}

// survey reads pt's queue and decides, and gets what the decision needs
// before acting on it: a holder's token, from the read itself
// ([participant.token]); for every part of a participant on several
// paths, whose grant checks them all, a watch on our own node.
func (p *participant) survey(pt *part, epoch uint64) (v view, err error) {
	if p.req.node != "" {
		// A downgrade's read node holds from its create on (see
		// [RWMutex.Downgrade]); reading it back proves it is there and
		// ours, and gives the token: its czxid, after the write lease's
		// grant (so above that lease's token) and before the read node's
		// delete (so below the token of any writer after it).
		pt.looked = true
		v.d.Holds = true
		if pt.own == nil {
			var st session.Stat
			if st, err = p.watchOwn(pt, epoch); err == nil {
				pt.token = st.Czxid
			}
		}
		return v, err
	}
	if !p.single() && pt.ownAt != epoch {
		pt.own = nil // read sets a watch on our node again, in this epoch
	}
	var ps session.ParentStat
	first := !pt.looked
	if first {
		v.kids, ps, err = p.look(pt)
	} else {
		v.kids, ps, err = p.read(pt, epoch)
	}
	if err != nil {
		return v, err
	}
	var ok bool
	if v.first, v.last, ok = p.locate(pt, v.kids); !ok {
		return v, errRequeue
	}
	v.d = decide(pt.l.driver, v.kids, v.first, v.last)
	if err := pt.check(v.d, v.first); err != nil {
		return v, err
	}
	if first {
		pt.l.queued.Store(!v.d.Holds) // how the next first look is sent ([participant.startLooks])
	}
	if v.d.Holds {
		pt.token = ps.Pzxid
	}
	if pt.own == nil && !p.single() {
		_, err = p.watchOwn(pt, epoch)
	}
	return v, err
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
	for {
		st := p.c.s.State()
		switch {
		case st.Closed:
			return st, ErrClientClosed
		case !st.Connected:
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-st.Changed:
			}
			continue
		case p.c.s.Conn().SessionID() != p.session:
			return st, errRequeue // our nodes went with the old session
		}
		return st, nil
	}
}

// check refuses a decision the engine cannot act on: a driver bug must
// fail the acquire, never hang it or panic.
func (pt *part) check(d decision, first int) error {
	if d.Holds {
		return nil
	}
	if len(d.Watch) == 0 && pt.l.count == nil { // a SharedCount's change is watched too
		return invalidf("driver %T neither holds nor names a node to watch", pt.l.driver)
	}
	for _, i := range d.Watch {
		if i < 0 || i >= first {
			return invalidf("driver %T watches child %d, not one ahead of the participant's first node %d", pt.l.driver, i, first)
		}
	}
	return nil
}

// look is a part's first read: the children of the lock path, in queue
// order, and the path's stat, pipelined with a semaphore's size check.
// Whoever holds on it at once takes its token from the stat
// ([participant.token]) and needs no other request. It uses the read that
// [participant.prefetch] made while the create was on its way if that
// read shows our nodes, and reads again otherwise. Only a look that
// succeeds counts: after one that failed (the connection closed under
// it), the next survey looks again rather than read, since a read does
// not check the size, and a semaphore participant admitted under another
// size grants more leases than the others allow.
func (p *participant) look(pt *part) ([]Child, session.ParentStat, error) {
	kids, ps, ok := p.prefetched(pt)
	if !ok {
		names, s, err := pt.l.fetch(p.c.s.Conn(), pt.watch)
		if err != nil {
			return nil, s, err // not looked: the next survey looks again, and checks the size
		}
		if kids, err = p.parse(pt, names); err != nil {
			return nil, s, err
		}
		ps = s
	}
	pt.looked = true
	if first, _, ok := p.locate(pt, kids); ok && first > p.ahead {
		p.ahead = first
	}
	return kids, ps, nil
}

// prefetched returns the prefetched look, if there is one and it lists our
// nodes.
func (p *participant) prefetched(pt *part) ([]Child, session.ParentStat, bool) {
	if pt.pre == nil {
		return nil, session.ParentStat{}, false
	}
	f := <-pt.pre
	pt.pre = nil
	if f.err != nil {
		return nil, session.ParentStat{}, false
	}
	kids, err := p.parse(pt, f.names)
	if err != nil {
		return nil, session.ParentStat{}, false
	}
	_, _, ok := p.locate(pt, kids)
	return kids, f.ps, ok
}

// fetched is what a look reads.
type fetched struct {
	names []string
	ps    session.ParentStat
	err   error
}

// fetch reads the children and stat of the lock path, with a children
// watch if watch is set, and, for a semaphore, checks its recorded size,
// in parallel.
func (l *Lock) fetch(zc session.Conn, watch bool) ([]string, session.ParentStat, error) {
	var sized chan error
	if l.size != nil || l.count != nil {
		sized = make(chan error, 1)
		go func() { sized <- l.checkSize(zc) }()
	}
	read := zc.ChildrenStat
	if watch {
		read = zc.ChildrenStatW
	}
	names, ps, err := read(l.path)
	if sized != nil {
		if serr := <-sized; err == nil {
			err = serr
		}
	}
	return names, ps, err
}

// parse sorts the names of a read and drops strays of ours.
func (p *participant) parse(pt *part, names []string) ([]Child, error) {
	kids, err := sortChildren(names, pt.l.refuse)
	if err != nil {
		return nil, err
	}
	return p.dropStrays(pt, kids), nil
}

// prefetch starts the first look of every path as soon as the create of
// our nodes (the request carrying marker) has gone out on zc, so that its
// answer comes a moment after the create's rather than a round trip
// later. cancel stops it if the create did not succeed.
//
// Why the look can be trusted: ZooKeeper answers a session's requests in
// the order it sent them, a read after the session's write only once that
// write is applied (CommitProcessor keeps a session's reads behind its
// pending writes), so a read sent after the create on the same connection
// sees our nodes. A read that went out on another connection (the first
// dropped in between) may not; [participant.look] uses the prefetched read
// only if it lists our nodes by name, which no read made before the create
// can, and reads again otherwise.
func (p *participant) prefetch(zc session.Conn, marker string) ([]<-chan fetched, func()) {
	pres := make([]<-chan fetched, len(p.parts))
	if p.req.node != "" {
		return pres, func() {} // a downgrade does not look (see survey)
	}
	sent, stop := p.c.s.Expect(marker)
	quit := make(chan struct{})
	for i, pt := range p.parts {
		out := make(chan fetched, 1)
		pres[i] = out
		go func(l *Lock, watch bool) {
			select {
			case <-sent:
			case <-quit: // the create failed: nobody reads out
				return
			}
			var f fetched
			f.names, f.ps, f.err = l.fetch(zc, watch)
			out <- f
		}(pt.l, pt.watch)
	}
	return pres, func() { stop(); close(quit) }
}

// token is the fencing token of a lease: the largest of its parts'
// tokens, each the lock path's pzxid (the zxid of its latest child create
// or delete, DataTree.createNode and deleteNode) in the read that decided
// the part holds. They strictly increase across successive conflicting
// holders: H's deciding read lists no earlier conflicting holder, so its
// pzxid is at least that holder's delete, while the holder's own deciding
// read listed its node, so was of a state before that delete. The proof,
// with a MultiLock's and a downgrade's, is in docs/design.md, "Tokens";
// TestMutexExclusion checks them.
func (p *participant) token() int64 {
	var t int64
	for _, pt := range p.parts {
		if pt.token > t {
			t = pt.token
		}
	}
	return t
}

// watchOwn reads our last node on pt's path with a watch: its owner proves
// it is ours, the watch tells a participant on several paths if someone
// deletes it (see [participant.quiet]), and a downgrade takes its token
// from its czxid.
func (p *participant) watchOwn(pt *part, epoch uint64) (session.Stat, error) {
	st, own, err := p.c.s.Conn().GetW(pt.nodes[len(pt.nodes)-1])
	if err != nil {
		return st, err
	}
	if st.EphemeralOwner != p.session {
		// Never count a node of another session; if it is the current
		// one's, it must not stay in the queue either.
		p.c.s.Discard(session.Job{Nodes: pt.nodes, Session: st.EphemeralOwner})
		pt.nodes = nil
		return st, errRequeue
	}
	pt.own, pt.ownAt = own, epoch
	return st, nil
}

// read gets the children of pt's path, in queue order, and its stat: the
// read a waiter makes on waking. A participant on several paths also reads
// its own node with a watch ([participant.watchOwn]) when it has none,
// pipelined on the connection, so it costs no round trip. A semaphore's
// size was checked by the first look; a read does not check it again.
//
// A waiter on one path keeps no watch on its own node: it never holds but
// on a read that lists it, and learns that someone deleted it from that
// read, on its next wake, or from the keeper, which checks waiters' nodes
// at least every third of the session timeout ([session.Session.Waiting]).
//
// It leaves no children watch: such a watch would fire at the next create
// or delete on the path, a notification to this session per handoff (with
// 8 clients on one mutex, 3.0 notifications per handoff instead of 2.0),
// and nothing waits for it. No exclusion depends on it: a waiter wakes on
// its predecessor's data watch and holds only on a read that lists no
// conflicting node ahead ([participant.token]). Its one use was to cover,
// at no request, a node this read finds holding. Without it the node is
// bare at the grant ([participant.covers] gives no Path), so
// [session.Session.Grant] hands it to the keeper for a data watch of its
// own once the lease is armAge old, as it does today when the next
// participant's create spends the children watch, which on a contended
// path comes within milliseconds. A node deleted before then ends its
// lease within armAge of the grant (the keeper's getData finds it gone),
// one deleted later at ZooKeeper's notice of its data watch. The cost: a
// getData for a lease held longer than armAge after a wait that nobody
// else's create or delete would have spent. TestDeletedHeldNodeEndsLease
// ("held after a wait") fails if such a node is not watched.
func (p *participant) read(pt *part, epoch uint64) ([]Child, session.ParentStat, error) {
	p.endLook(pt) // this read sets no watch that could cover our nodes
	zc := p.c.s.Conn()
	if pt.own != nil || p.single() {
		names, ps, err := zc.ChildrenStat(pt.l.path)
		if err != nil {
			return nil, ps, err
		}
		kids, err := p.parse(pt, names)
		return kids, ps, err
	}
	owned := make(chan error, 1)
	go func() {
		_, err := p.watchOwn(pt, epoch)
		owned <- err
	}()
	names, ps, err := zc.ChildrenStat(pt.l.path)
	if oerr := <-owned; oerr != nil {
		err = oerr // errRequeue (our node went with another session) comes first
	}
	if err != nil {
		return nil, ps, err
	}
	kids, err := p.parse(pt, names)
	return kids, ps, err
}

// checkSize checks that the semaphore's path records our maxLeases, and
// records it if nothing is recorded yet (a path made by someone else). It
// runs on the first read after our create: a path cannot be deleted and
// made again while our node is in it, so what it reads is what every
// participant queued with us agreed to.
func (l *Lock) checkSize(zc session.Conn) error {
	if l.count != nil {
		return l.count.check(zc)
	}
	for {
		data, st, err := zc.Get(l.path)
		if err != nil {
			return err
		}
		switch {
		case string(data) == string(l.size):
			return nil
		case len(data) == 0:
			err := zc.SetIf(l.path, l.size, st.Version)
			if session.BadVersion(err) {
				continue // someone recorded a size meanwhile: compare with it
			}
			return err
		}
		// Data that is not a decimal number is not a size record: kazoo's
		// Semaphore._ensure_path ignores it the same way (the path's data
		// may serve another purpose), and so do we.
		if n, ok := parseDecimal(data); !ok || strconv.FormatInt(n, 10) == string(l.size) {
			return nil
		}
		return invalidf("semaphore %s has %q leases recorded by its other participants, not %s", l.path, data, l.size)
	}
}

// dropStrays removes from kids any node with our protected id that is not
// one of ours: a create retried after a lost reply can, rarely, leave one.
// It is ours (only we know the id), so we delete it.
func (p *participant) dropStrays(pt *part, kids []Child) []Child {
	var strays []string
	out := kids[:0]
	for _, k := range kids {
		if k.Owner == p.id && !pt.owns(k.Name) {
			strays = append(strays, k.Name)
			continue
		}
		out = append(out, k)
	}
	p.discardNames(pt.l, strays)
	return out
}

func (pt *part) owns(name string) bool {
	for _, n := range pt.nodes {
		if n[len(pt.l.path)+1:] == name {
			return true
		}
	}
	return false
}

// locate finds our nodes in kids; ok is false if any is missing.
func (p *participant) locate(pt *part, kids []Child) (first, last int, ok bool) {
	first, found := -1, 0
	for i, k := range kids {
		if k.Owner == p.id {
			if first < 0 {
				first = i
			}
			last = i
			found++
		}
	}
	return first, last, first >= 0 && found == len(pt.nodes)
}

// grant turns our nodes into leases once every part holds: if no own-node
// watch has fired ([participant.quiet]) and the session is still st's. It
// returns nil leases if the caller must decide again, after waiting for
// the quorum to confirm the session if its deadline was behind (it never
// grants past the deadline).
func (p *participant) grant(ctx context.Context, st session.Snapshot) ([]*Lease, error) {
	if quiet, err := p.quiet(); !quiet {
		return nil, err
	}
	holds, err := p.c.s.Grant(st.Epoch, p.session, p.groups(), p.token(), p.leaseMeta(), p.covers())
	if errors.Is(err, session.ErrUnconfirmed) {
		p.startWaiting() // the keeper confirms the session only for leases held or awaited
		return nil, p.c.s.AwaitConfirmed(ctx, st)
	}
	var leases []*Lease
	if holds != nil {
		leases = make([]*Lease, len(holds))
		for i, h := range holds {
			leases[i] = newLease(p.c, h)
		}
		for _, pt := range p.parts {
			p.endLook(pt)
			if pt.announce {
				p.announce(pt)
			}
		}
	}
	return leases, err
}

// startLooks decides, for the first look of every part, whether it leaves
// a children watch, and records with the Client each that does, before it
// is sent: whether that watch is still pending at the grant is then known
// (see held.go). A downgrade does not look.
//
// The watch serves one purpose: to cover, at no request, our nodes if this
// look finds them holding (a lease on a free lock, most leases). If the
// look finds us queued, it only costs a notification to this session at
// the next create or delete on the path. Which it will be is not known when
// it is sent (right behind the create), so it follows the lock's latest
// first look (Lock.queued): on a contended lock, where the looks find the
// participant queued, it is sent without one. Either way is safe: no
// exclusion or token depends on the watch (see [participant.read]), and a
// look without one that finds us holding leaves our nodes bare at the
// grant ([participant.covers]), so the keeper sets a data watch of their
// own once the lease is armAge old: a getData for a lease held that long,
// and a node deleted before then ends its lease within armAge of the
// grant. TestDeletedHeldNodeEndsLease ("held at once after a lock was
// contended") fails if such a node is not watched.
func (p *participant) startLooks() {
	if p.req.node != "" {
		return
	}
	for _, pt := range p.parts {
		pt.watch = !pt.l.queued.Load()
		if pt.watch {
			p.startLook(pt)
		} else {
			p.endLook(pt)
		}
	}
}

// startLook records a read of pt's path about to be sent, in place of the
// one before (or of a create tried again).
func (p *participant) startLook(pt *part) {
	p.endLook(pt)
	pt.events, pt.looking = p.c.s.LookStart(pt.l.path), true
}

func (p *participant) endLook(pt *part) {
	if pt.looking {
		p.c.s.LookEnd(pt.l.path)
		pt.looking = false
	}
}

// covers says, for each of our nodes in the order of groups, what watch
// covers it: its own (the last node of a part, while its watch is set), or
// the children watch of the part's last read, if that read left one (it is
// recorded with the Client only then: [participant.startLooks],
// [participant.read]); otherwise none, and the Client hands the node to the
// keeper.
func (p *participant) covers() []session.Cover {
	var out []session.Cover
	for _, pt := range p.parts {
		for i := range pt.nodes {
			own := i == len(pt.nodes)-1 && pt.own != nil
			cv := session.Cover{Own: own}
			if pt.looking {
				cv.Path, cv.Events = pt.l.path, pt.events
			}
			out = append(out, cv)
		}
	}
	return out
}

// quiet reports whether no own-node watch has fired. ZooKeeper sends a
// client's notifications in order with its replies, and go-zookeeper hands
// each one to its watcher before reading the next off the connection, so
// quiet watches mean every node of ours was there at the latest state we
// saw. One that has fired makes its path undecided (read again); a
// deletion means queue again.
func (p *participant) quiet() (bool, error) {
	quiet := true
	for _, pt := range p.parts {
		select {
		case ev := <-pt.own:
			pt.own, pt.held, quiet = nil, false, false
			if session.Deleted(ev) {
				return false, errRequeue
			}
		default:
		}
	}
	return quiet, nil
}

// groups are the nodes of each lease to grant: one lease per node, or one
// for all of them (a MultiLock's, whose first node is the lease's Node).
func (p *participant) groups() [][]string {
	var all []string
	for _, pt := range p.parts {
		all = append(all, pt.nodes...)
	}
	if p.req.whole {
		return [][]string{all}
	}
	groups := make([][]string, len(all))
	for i := range all {
		groups[i] = all[i : i+1]
	}
	return groups
}

// announce tells successors waiting with awaitHold on our last node of pt
// that we hold, by bumping its version. If someone wrote to it since its
// create (a revocation), what they wrote stays: the bump writes the node's
// data back.
func (p *participant) announce(pt *part) {
	zc, node := p.c.s.Conn(), pt.nodes[len(pt.nodes)-1]
	sent := time.Now()
	err := zc.SetIf(node, pt.l.data, 0)
	for session.BadVersion(err) {
		data, ns, gerr := zc.Get(node)
		if err = gerr; err == nil {
			err = zc.SetIf(node, data, ns.Version)
		}
	}
	if err != nil {
		p.c.s.Log().Debug("zklock: announce hold", "node", node, "err", err)
		return
	}
	p.c.s.Confirm(sent, p.session)
}

// watchPlan is what a waiter keeps while it sleeps: only the paths it
// watches. The children snapshot itself is dropped, so a waiter costs
// little memory.
type watchPlan struct {
	paths     []string
	awaitHold bool
}

// plan prepares the wait.
func (pt *part) plan(kids []Child, d decision) watchPlan {
	w := watchPlan{paths: make([]string, len(d.Watch)), awaitHold: d.awaitHold}
	for i, idx := range d.Watch {
		w.paths[i] = pt.l.path + "/" + kids[idx].Name
	}
	return w
}

// wait sets the watches of plan and sleeps until one fires, our own node
// on pt's path changes (a participant on several paths) or is found gone
// (the keeper's check), the session state changes or ctx is done. Then
// the loop reads again: a waiter takes the lock only on a read, whose
// pzxid is its token ([participant.token]), never on a notification
// alone.
func (p *participant) wait(ctx context.Context, pt *part, st session.Snapshot, w watchPlan) error {
	zc := p.c.s.Conn()
	gone := p.gone
	if !p.single() {
		// Its own nodes' watches tell, and the grant checks them all
		// (quiet): a node on a path decided already is found then.
		gone = nil
	}
	var buf [1]<-chan session.Event
	watches := buf[:0]
	for _, path := range w.paths {
		s, ch, err := zc.GetW(path)
		switch p.c.s.Classify(err) {
		case session.Done:
			if w.awaitHold && s.Version != 0 && pt.seen != (seenVersion{path, s.Version}) {
				// It announced before we watched (or someone wrote to it:
				// deciding again tells). A version decided on once is not
				// news: then wait for the next change.
				pt.seen = seenVersion{path, s.Version}
				return nil
			}
			watches = append(watches, ch)
		case session.Permanent:
			return err
		default:
			return nil // gone already, or the loop sorts out the session
		}
	}
	var counted <-chan session.Event
	if pt.l.count != nil {
		ch, again, err := pt.l.count.watch(zc, &pt.counted)
		if again || err != nil {
			return err // decide again with the count just read
		}
		counted = ch
	}
	if len(watches) == 1 {
		// The usual wait, on one node ahead: a plain select, which the
		// waiter wakes from on every handoff (reflect.Select allocates).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.Changed:
		case ev := <-pt.own:
			return pt.ownChanged(ev)
		case <-gone:
			return errRequeue
		case <-watches[0]:
		case <-counted: // the count changed: decide again
		}
		return nil
	}
	cases := make([]reflect.SelectCase, 0, len(watches)+5)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.Changed)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(pt.own)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(gone)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(counted)})
	for _, ch := range watches {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, v, _ := reflect.Select(cases)
	switch chosen {
	case 0:
		return ctx.Err()
	case 2:
		ev, _ := v.Interface().(session.Event)
		return pt.ownChanged(ev)
	case 3:
		return errRequeue
	}
	return nil // a watched node or the count changed, or the session's state: decide again
}

// ownChanged handles our own node's watch: deleted means queue again;
// anything else (a data change, the session's end) means read again.
func (pt *part) ownChanged(ev session.Event) error {
	pt.own = nil
	if session.Deleted(ev) {
		return errRequeue
	}
	return nil
}
