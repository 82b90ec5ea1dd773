package zklock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
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

// errRequeue: our nodes are gone (their session ended, or someone deleted
// them); queue again.
var errRequeue = errors.New("requeue")

func (l *Lock) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	fail := func(err error) ([]*Lease, error) {
		return nil, fmt.Errorf("zklock: %s %s: %w", op, l.path, err)
	}
	if err := l.c.usable(ctx); err != nil {
		return fail(err)
	}
	p := &participant{l: l, c: l.c, n: n}
	leases, err := p.run(ctx, try)
	if err != nil {
		return fail(err)
	}
	return leases, nil
}

// participant is one Acquire: its nodes, in queue order, and the session
// that owns them.
type participant struct {
	l       *Lock
	c       *Client
	n       int
	id      string   // protected id shared by our nodes
	nodes   []string // full paths, once known
	unsure  bool     // a create may have made nodes we cannot name but by id
	session int64    // the session of nodes, or of the unsure create
	token   int64
	own     <-chan event   // a watch on our last node; nil until read sets it
	pre     <-chan fetched // the first look, read while the create was on its way
	seen    seenVersion    // the last version of an awaited node we decided on
}

// seenVersion is a node's data version, as a waiter with awaitHold saw it.
type seenVersion struct {
	path    string
	version int32
}

// run queues the participant and waits until it holds.
//
// Leaving by any path but a grant deletes our nodes: the deferred abandon
// is the one place that cleans up a failed, cancelled or refused acquire,
// so no return path can forget it.
func (p *participant) run(ctx context.Context, try bool) (leases []*Lease, err error) {
	defer func() {
		if leases == nil {
			p.abandon()
		}
	}()
	for {
		if err := p.enqueue(ctx); err != nil {
			return nil, err
		}
		// The keeper has the session confirmed while we wait, so that a
		// grant finds the deadline ahead.
		done := p.c.await(p.nodes[len(p.nodes)-1], p.session)
		leases, err = p.await(ctx, try)
		done()
		if !errors.Is(err, errRequeue) {
			return leases, err
		}
		p.abandon() // whatever may be left of ours in this session
		p.c.log.Debug("zklock: queueing again", "path", p.l.path)
	}
}

// abandon hands whatever nodes of ours may exist to the janitor, and
// forgets them.
func (p *participant) abandon() {
	switch {
	case p.nodes != nil:
		p.c.janitor.discard(job{nodes: p.nodes, session: p.session})
	case p.unsure:
		p.c.janitor.discard(job{parent: p.l.path, prefix: protectedPrefix + p.id + "-", session: p.session})
	}
	p.nodes, p.unsure, p.own, p.token, p.pre = nil, false, nil, 0, nil
}

// enqueue creates our nodes. A create that fails with a connection error
// may still have happened: we look for our nodes by their protected id,
// and accept them only in the session that made them.
func (p *participant) enqueue(ctx context.Context) error {
	l, c := p.l, p.c
	var err error
	if p.id, err = newID(); err != nil {
		return err
	}
	prefix := l.path + "/" + nodePrefix(p.id, l.driver.Kind())
	var b backoff.BackOff
	for {
		session, err := c.awaitSession(ctx)
		if err != nil {
			return err
		}
		zc := c.conn()
		sent := time.Now()
		pre, cancelPre := p.prefetch(zc, prefix)
		nodes, err := zc.create(prefix, l.data, c.acl, p.n)
		if c.classify(err) != done || zc.sessionID() != session {
			cancelPre()
		}
		switch c.classify(err) {
		case done:
			c.confirm(sent, session) // a write the quorum acknowledged
			if now := zc.sessionID(); now != session {
				// The session changed while the create was in flight, so
				// the nodes may belong to the new one: delete them if so
				// (an orphan there would block the queue until that session
				// ends), and create again.
				c.janitor.discard(job{nodes: nodes, session: now})
				continue
			}
			p.nodes, p.session, p.pre = nodes, session, pre
			return nil
		case gone:
			if err := l.ensureParents(ctx); err != nil {
				return err
			}
			continue
		case closing:
			return ErrClientClosed
		case permanent:
			return err
		}
		// The create's fate is unknown. Only the session that sent it can
		// own a node it made; another session means the node (if any) went
		// with the old one. Until we know, the node is ours to clean up.
		p.unsure, p.session = true, session
		s, err := c.awaitSession(ctx)
		if err != nil {
			return err
		}
		if s == session {
			if found, err := p.find(); err == nil && found != nil {
				p.nodes, p.unsure = found, false
				return nil
			}
		} else {
			p.unsure = false
		}
		if b == nil {
			b = c.newBackOff()
		}
		if err := sleep(ctx, b.NextBackOff()); err != nil {
			return err
		}
	}
}

// find looks for our nodes after a create whose outcome is unknown. The
// sync first lets the server we now talk to catch up with the leader.
func (p *participant) find() ([]string, error) {
	l, zc := p.l, p.c.conn()
	_ = zc.sync(l.path)
	names, err := zc.children(l.path)
	if err != nil {
		return nil, err
	}
	prefix := protectedPrefix + p.id + "-"
	var ours []string
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			ours = append(ours, name)
		}
	}
	if len(ours) != p.n {
		p.discardNames(ours)
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
	_, st, err := zc.get(nodes[len(nodes)-1])
	if err != nil {
		return nil, err
	}
	if st.ephemeralOwner != p.session {
		return nil, nil // not ours: never counts
	}
	return nodes, nil
}

func (p *participant) discardNames(names []string) {
	if len(names) == 0 {
		return
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = p.l.path + "/" + n
	}
	p.c.janitor.discard(job{nodes: paths, session: p.session})
}

// ensureParents creates the lock path and its missing ancestors as
// container nodes, which the server deletes once they are empty again.
func (l *Lock) ensureParents(ctx context.Context) error {
	for _, dir := range parents(l.path) {
		dir := dir
		var data []byte
		if dir == l.path {
			data = l.size // a semaphore records its size in its path
		}
		err := l.c.retry(ctx, func(zc conn) error { return zc.createContainer(dir, data, l.c.acl) })
		if err != nil {
			return fmt.Errorf("create parent %s: %w", dir, err)
		}
	}
	return nil
}

// await waits until our nodes hold, deciding again after every change of
// a watched sibling and every change of the session's state.
func (p *participant) await(ctx context.Context, try bool) ([]*Lease, error) {
	waited := false
	var b backoff.BackOff
	for {
		st, err := p.ready(ctx)
		if err != nil {
			return nil, err
		}
		v, err := p.survey(try)
		if again, err := p.backoff(ctx, &b, err); again {
			continue
		} else if err != nil {
			return nil, err
		}
		if v.d.Holds {
			if leases, err := p.grant(ctx, st, waited && v.d.announce); err != nil || leases != nil {
				return leases, err
			}
			continue // the session changed since the read: decide again
		}
		if try {
			return nil, ErrLocked
		}
		waited = true
		fast, announce, err := p.wait(ctx, st, p.plan(v.kids, v.first, v.last, v.d))
		if err != nil {
			return nil, err
		}
		if fast {
			if leases, err := p.grant(ctx, st, announce); err != nil || leases != nil {
				return leases, err
			}
		}
	}
}

// view is a participant's place in the queue, as one read showed it.
type view struct {
	kids        []Child
	first, last int
	d           decision
}

// survey reads the queue and decides, and gets what the decision needs
// before acting on it: a token for a holder (from the path's stat when it
// can, see [participant.parentToken]; else from our node), and for a
// waiter, the watch on its own node.
func (p *participant) survey(try bool) (v view, err error) {
	var ps parentStat
	if p.token == 0 {
		v.kids, ps, err = p.look() // the first look: no token yet
	} else {
		v.kids, err = p.read()
	}
	if err != nil {
		return v, err
	}
	var ok bool
	if v.first, v.last, ok = p.locate(v.kids); !ok {
		return v, errRequeue
	}
	v.d = decide(p.l.driver, v.kids, v.first, v.last)
	if err := p.check(v.d, v.first); err != nil {
		return v, err
	}
	switch {
	case v.d.Holds && p.token == 0:
		if p.token = p.parentToken(ps); p.token == 0 {
			err = p.watchOwn()
		}
	case !v.d.Holds && !try && p.own == nil:
		err = p.watchOwn()
	}
	return v, err
}

// backoff sorts out the error of a read: again says to read again (after a
// backoff, for an error that may pass); err is what ends the acquire,
// errRequeue when our nodes or the path are gone.
func (p *participant) backoff(ctx context.Context, b *backoff.BackOff, err error) (again bool, _ error) {
	switch classify(err) {
	case done:
		*b = nil
		return false, nil
	case gone:
		return false, errRequeue // the path or our node is gone, so is our node
	case retry:
		if *b == nil {
			*b = p.c.newBackOff()
		}
		if err := sleep(ctx, (*b).NextBackOff()); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, err
}

// ready waits until the session that owns our nodes is connected.
func (p *participant) ready(ctx context.Context) (clientState, error) {
	for {
		st := p.c.state()
		switch {
		case st.closed:
			return st, ErrClientClosed
		case !st.connected:
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-st.changed:
			}
			continue
		case p.c.conn().sessionID() != p.session:
			return st, errRequeue // our nodes went with the old session
		}
		return st, nil
	}
}

// check refuses a decision the engine cannot act on: a driver bug must
// fail the acquire, never hang it or panic.
func (p *participant) check(d decision, first int) error {
	if d.Holds {
		return nil
	}
	if len(d.Watch) == 0 {
		return invalidf("driver %T neither holds nor names a node to watch", p.l.driver)
	}
	for _, i := range d.Watch {
		if i < 0 || i >= first {
			return invalidf("driver %T watches child %d, not one ahead of the participant's first node %d", p.l.driver, i, first)
		}
	}
	return nil
}

// look is an acquire's first read: the children of the lock path, in queue
// order, and the path's stat, pipelined with a semaphore's size check.
// Whoever holds on it at once may take its token from the stat
// ([participant.parentToken]) and needs no other request; whoever waits
// reads its own node next ([participant.watchOwn]). It uses the read that
// [participant.prefetch] made while the create was on its way if that
// read shows our nodes, and reads again otherwise.
func (p *participant) look() ([]Child, parentStat, error) {
	if kids, ps, ok := p.prefetched(); ok {
		return kids, ps, nil
	}
	names, ps, err := p.l.fetch(p.c.conn())
	if err != nil {
		return nil, ps, err
	}
	kids, err := p.parse(names)
	return kids, ps, err
}

// prefetched returns the prefetched look, if there is one and it lists our
// nodes.
func (p *participant) prefetched() ([]Child, parentStat, bool) {
	if p.pre == nil {
		return nil, parentStat{}, false
	}
	f := <-p.pre
	p.pre = nil
	if f.err != nil {
		return nil, parentStat{}, false
	}
	kids, err := p.parse(f.names)
	if err != nil {
		return nil, parentStat{}, false
	}
	_, _, ok := p.locate(kids)
	return kids, f.ps, ok
}

// fetched is what a look reads.
type fetched struct {
	names []string
	ps    parentStat
	err   error
}

// fetch reads the children and stat of the lock path and, for a
// semaphore, checks its recorded size, in parallel.
func (l *Lock) fetch(zc conn) ([]string, parentStat, error) {
	var sized chan error
	if l.size != nil {
		sized = make(chan error, 1)
		go func() { sized <- l.checkSize(zc) }()
	}
	names, ps, err := zc.childrenStat(l.path)
	if sized != nil {
		if serr := <-sized; err == nil {
			err = serr
		}
	}
	return names, ps, err
}

// parse sorts the names of a look and drops strays of ours.
func (p *participant) parse(names []string) ([]Child, error) {
	kids, err := sortChildren(names, p.l.refuse)
	if err != nil {
		return nil, err
	}
	return p.dropStrays(kids), nil
}

// prefetch starts the first look as soon as the create of our nodes (the
// request carrying prefix) has gone out on zc, so that its answer comes a
// moment after the create's rather than a round trip later. cancel stops
// it if the create did not succeed.
//
// Why the look can be trusted: ZooKeeper answers a session's requests in
// the order it sent them, a read after the session's write only once that
// write is applied (CommitProcessor keeps a session's reads behind its
// pending writes), so a read sent after the create on the same connection
// sees our nodes. A read that went out on another connection (the first
// dropped in between) may not; [participant.look] uses the prefetched read
// only if it lists our nodes by name, which no read made before the create
// can, and reads again otherwise.
func (p *participant) prefetch(zc conn, prefix string) (<-chan fetched, func()) {
	sent, stop := p.c.wire.expect(prefix)
	quit := make(chan struct{})
	out := make(chan fetched, 1)
	go func() {
		select {
		case <-sent:
		case <-quit: // the create failed: nobody reads out
			return
		}
		var f fetched
		f.names, f.ps, f.err = p.l.fetch(zc)
		out <- f
	}()
	return out, func() { stop(); close(quit) }
}

// parentToken returns the token of a participant that holds on its first
// look, from the lock path's stat, or 0 if the stat cannot give it.
//
// Proof that these tokens still strictly increase across successive
// conflicting holders, mixed with the czxid tokens of everyone else. Our
// last node's sequence is the path's create count before it
// (PrepRequestProcessor.pRequest2TxnCreate), so the count after it is
// seq+1; the stat's cversion counts creates and deletes, 2*creates -
// children (DataNode.copyStat). When cversion = 2*(seq+1) - numChildren,
// nothing was created under the path after our node up to this read, and
// the token is the path's pzxid P, the zxid of the latest create or delete
// of a child up to the read (at least our czxid). Any holder before us
// held until its node was deleted, and we hold only on a read that no
// longer lists that node, so that delete is at most P, and that holder's
// token (its czxid, or its own P) is below its delete. Any conflicting
// holder after us has a node we do not see, created after this read, so
// its czxid, and so its token, is above P.
func (p *participant) parentToken(ps parentStat) int64 {
	ch, ok, _ := parseChild(p.nodes[len(p.nodes)-1][len(p.l.path)+1:])
	if !ok || ps.pzxid == 0 {
		return 0
	}
	if ps.cversion != 2*(ch.seq+1)-ps.numChildren { // int32 arithmetic: wraps as the server's does
		return 0 // something was created after us: read our own czxid
	}
	return ps.pzxid
}

// watchOwn reads our last node with a watch: its czxid is the token, its
// owner proves it is ours, and the watch tells a waiter if someone deletes
// it (see [participant.intact]).
func (p *participant) watchOwn() error {
	st, own, err := p.c.conn().getW(p.nodes[len(p.nodes)-1])
	if err != nil {
		return err
	}
	if st.ephemeralOwner != p.session {
		// Never count a node of another session; if it is the current
		// one's, it must not stay in the queue either.
		p.c.janitor.discard(job{nodes: p.nodes, session: st.ephemeralOwner})
		p.nodes = nil
		return errRequeue
	}
	p.token, p.own = st.czxid, own
	return nil
}

// read gets the children of the lock path, in queue order. When our own
// node has no watch (a MultiLock's first read, or after the watch fired)
// it also reads our node with one ([participant.watchOwn]), pipelined on
// the connection, so it costs no round trip. A semaphore's size was
// checked by the first look; a read does not check it again.
func (p *participant) read() ([]Child, error) {
	owned := make(chan error, 1)
	if p.own == nil {
		go func() { owned <- p.watchOwn() }()
	} else {
		owned <- nil
	}
	names, err := p.c.conn().children(p.l.path)
	if oerr := <-owned; oerr != nil {
		err = oerr // errRequeue (our node went with another session) comes first
	}
	if err != nil {
		return nil, err
	}
	kids, err := sortChildren(names, p.l.refuse)
	if err != nil {
		return nil, err
	}
	return p.dropStrays(kids), nil
}

// checkSize checks that the semaphore's path records our maxLeases, and
// records it if nothing is recorded yet (a path made by someone else). It
// runs on the first read after our create: a path cannot be deleted and
// made again while our node is in it, so what it reads is what every
// participant queued with us agreed to.
func (l *Lock) checkSize(zc conn) error {
	for {
		data, st, err := zc.get(l.path)
		if err != nil {
			return err
		}
		switch {
		case bytes.Equal(data, l.size):
			return nil
		case len(data) == 0:
			err := zc.setIf(l.path, l.size, st.version)
			if badVersion(err) {
				continue // someone recorded a size meanwhile: compare with it
			}
			return err
		}
		return invalidf("semaphore %s has %q leases recorded by its other participants, not %s", l.path, data, l.size)
	}
}

// dropStrays removes from kids any node with our protected id that is not
// one of ours: a create retried after a lost reply can, rarely, leave one.
// It is ours (only we know the id), so we delete it.
func (p *participant) dropStrays(kids []Child) []Child {
	var strays []string
	out := kids[:0]
	for _, k := range kids {
		if k.Owner == p.id && !p.owns(k.Name) {
			strays = append(strays, k.Name)
			continue
		}
		out = append(out, k)
	}
	p.discardNames(strays)
	return out
}

func (p *participant) owns(name string) bool {
	for _, n := range p.nodes {
		if n[len(p.l.path)+1:] == name {
			return true
		}
	}
	return false
}

// locate finds our nodes in kids; ok is false if any is missing.
func (p *participant) locate(kids []Child) (first, last int, ok bool) {
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
	return first, last, first >= 0 && found == len(p.nodes)
}

// grant turns our nodes into leases. It returns nil leases if the session
// changed since st (the caller decides again), or, after waiting for it, if
// the session's deadline was not ahead (it never grants past the deadline).
func (p *participant) grant(ctx context.Context, st clientState, announce bool) ([]*Lease, error) {
	leases, err := p.c.grant(st.epoch, p.session, p.nodes, p.token)
	if errors.Is(err, errUnconfirmed) {
		return nil, p.c.awaitConfirmed(ctx, st)
	}
	if leases != nil && announce {
		// Successors waiting with awaitHold watch our last node: bumping
		// its version tells them we hold. If someone wrote to it since its
		// create (a revocation), what they wrote stays: the bump writes
		// the node's data back.
		zc, node := p.c.conn(), p.nodes[len(p.nodes)-1]
		sent := time.Now()
		err := zc.setIf(node, p.l.data, 0)
		for badVersion(err) {
			data, ns, gerr := zc.get(node)
			if err = gerr; err == nil {
				err = zc.setIf(node, data, ns.version)
			}
		}
		if err != nil {
			p.c.log.Debug("zklock: announce hold", "node", node, "err", err)
		} else {
			p.c.confirm(sent, p.session)
		}
	}
	return leases, err
}

// watchPlan is what a waiter keeps while it sleeps: only the paths it
// watches and, for each, whether its deletion alone makes us hold. The
// children snapshot itself is dropped, so a waiter costs little memory.
type watchPlan struct {
	paths     []string
	fast      []bool // deleting paths[i] alone makes us hold
	announce  []bool // and then we must announce it
	awaitHold bool
}

// plan prepares the wait and its fast path; see [Driver] for why the fast
// path is safe.
func (p *participant) plan(kids []Child, first, last int, d decision) watchPlan {
	w := watchPlan{
		paths:     make([]string, len(d.Watch)),
		fast:      make([]bool, len(d.Watch)),
		announce:  make([]bool, len(d.Watch)),
		awaitHold: d.awaitHold,
	}
	without := make([]Child, 0, len(kids)-1)
	for i, idx := range d.Watch {
		w.paths[i] = p.l.path + "/" + kids[idx].Name
		without = append(append(without[:0], kids[:idx]...), kids[idx+1:]...)
		d2 := decide(p.l.driver, without, first-1, last-1)
		w.fast[i], w.announce[i] = d2.Holds, d2.Holds && d2.announce
	}
	return w
}

// wait sets the watches of plan and sleeps until one fires, our own node
// changes, the session state changes or ctx is done. fast reports that a
// watched node was deleted, that alone makes us hold, and our own node was
// still there when it was.
func (p *participant) wait(ctx context.Context, st clientState, w watchPlan) (fast, announce bool, err error) {
	zc := p.c.conn()
	cases := make([]reflect.SelectCase, 0, len(w.paths)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.changed)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.own)})
	for i, path := range w.paths {
		s, ch, err := zc.getW(path)
		switch classify(err) {
		case done:
			if w.awaitHold && s.version != 0 && p.seen != (seenVersion{path, s.version}) {
				// It announced before we watched (or someone wrote to it:
				// deciding again tells). A version decided on once is not
				// news: then wait for the next change.
				p.seen = seenVersion{path, s.version}
				return false, false, nil
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		case gone:
			return p.intact(w.fast[i]), w.announce[i], nil // gone already
		case permanent:
			return false, false, err
		default:
			return false, false, nil // the loop sorts out the session
		}
	}
	chosen, v, _ := reflect.Select(cases)
	switch chosen {
	case 0:
		return false, false, ctx.Err()
	case 1:
		return false, false, nil
	case 2:
		return false, false, p.ownChanged(v)
	}
	i := chosen - 3
	if ev, _ := v.Interface().(event); deleted(ev) {
		return p.intact(w.fast[i]), w.announce[i], nil
	}
	return false, false, nil
}

// intact reports fast, unless our own node's watch has fired: then the
// loop must look again. go-zookeeper hands each notification to its
// watcher's channel before it reads the next one off the connection, and
// ZooKeeper sends a client's notifications in the order of the changes, so
// if our node was deleted before the watched one, its event is already in
// our channel.
func (p *participant) intact(fast bool) bool {
	if !fast {
		return false
	}
	select {
	case <-p.own:
		p.own = nil // read again, and set a new watch
		return false
	default:
		return true
	}
}

// ownChanged handles our own node's watch: deleted means queue again;
// anything else (a data change, the session's end) means read again.
func (p *participant) ownChanged(v reflect.Value) error {
	p.own = nil
	if ev, _ := v.Interface().(event); deleted(ev) {
		return errRequeue
	}
	return nil
}

// participants lists the lock's participants: holders first, then waiters,
// each in queue order. pick chooses the driver that applies to a child.
func (l *Lock) participants(ctx context.Context, pick func(Child) Driver) ([]Participant, error) {
	fail := func(err error) ([]Participant, error) {
		return nil, fmt.Errorf("zklock: participants %s: %w", l.path, err)
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
	var names []string
	err := c.retry(ctx, func(zc conn) error {
		var err error
		names, err = zc.children(path)
		return err
	})
	if classify(err) == gone {
		return nil, nil
	}
	if err != nil {
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
		var (
			data []byte
			st   stat
		)
		err := c.retry(ctx, func(zc conn) error {
			var err error
			data, st, err = zc.get(node)
			return err
		})
		if classify(err) == gone {
			continue // gone since we listed it
		}
		if err != nil {
			return nil, err
		}
		pt := Participant{
			Node: node, Data: data, Holder: held[i], Read: k.Kind == KindRead,
			Kind: k.Kind, Created: time.UnixMilli(st.ctime),
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
		return nil, fmt.Errorf("zklock: participants %s: %w", path, err)
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
	err := c.retry(ctx, func(zc conn) error {
		var err error
		pathData, _, err = zc.get(path)
		return err
	})
	if classify(err) == gone {
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
			if n, err := strconv.Atoi(string(pathData)); err == nil && n > 0 {
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
