package zklock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock/internal/session"
)

// A claim is how a participant's nodes are made: where, in which session,
// how a create whose reply was lost is sorted out, and how holding is then
// judged. It is the one thing the recipes choose; the loop that queues,
// waits and grants ([participant.run]) is the same for all of them.
//
//   - [queueClaim]: n ephemeral-sequential nodes on each of one or more
//     paths, made by one operation; a waiter on each path asks the lock's
//     driver. Acquire, AcquireN, MultiLock and Campaign.
//   - [placeClaim]: one plain ephemeral node at a place chosen by the
//     caller, in a session the caller names, which holds from its create:
//     the caller has already excluded every conflicting holder.
//     [RWMutex.Downgrade] and kazoo's semaphore lease.
type claim interface {
	// locks are the locks of the claim's paths, one waiter each.
	locks() []*Lock
	// newID returns the protected id of the nodes of one attempt.
	newID() (string, error)
	// session is the only session the nodes may be made in (0: any); the
	// participant fails with ErrSessionExpired once that one has ended.
	session() int64
	// names are the paths the create asks for: a prefix before
	// ZooKeeper's sequence for each node of a queue, the node itself for a
	// place.
	names(id string) []string
	// create makes the nodes in one operation on zc.
	create(p *participant, zc session.Conn, names []string) ([]string, error)
	// find looks for the nodes of p on w's path after a create whose fate
	// is unknown, in the session that sent it: nil if there are none.
	find(p *participant, w *waiter) ([]string, error)
	// forget hands whatever nodes an unknown create may have left on w's
	// path to the janitor. w.nodes, which [participant.abandon] hands over
	// itself with their grant watch, must not go before that watch is
	// fired: a queue's cleanup by id spares them; a place's node has no
	// grant watch.
	forget(p *participant, w *waiter)
	// survey reads w's path and decides whether p holds there.
	survey(p *participant, w *waiter, epoch uint64) (view, error)
	// queues reports whether the claim reads a queue at all: only then do
	// its first looks go out with the create ([participant.prefetch]).
	queues() bool
}

// enqueue creates our nodes. A create that fails with a connection error
// may still have happened: we look for our nodes by their protected id,
// and accept them only in the session that made them.
func (p *participant) enqueue(ctx context.Context) error {
	id, err := p.claim.newID()
	if err != nil {
		return err
	}
	p.id = id
	names := p.claim.names(id)
	if err := p.fits(names); err != nil {
		return err
	}
	var b backoff.BackOff
	for {
		sid, err := p.c.s.AwaitSession(ctx)
		if err != nil {
			return err
		}
		if s := p.claim.session(); s != 0 && sid != s {
			return ErrSessionExpired
		}
		made, again, err := p.create(ctx, sid, names)
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

// maxRequest is ZooKeeper's default bound on a request, jute.maxbuffer
// (0xfffff bytes). A server closes the connection of a client that sends a
// larger one (NIOServerCnxn.readLength, "Len error"), which looks like a
// connection loss: retried, it would never end.
const maxRequest = 0xfffff

// requestSize estimates from above, as jute writes it, the request that
// creates a node at each of names with data bytes each: per op a 9-byte
// multi header, the path, the data, the ACL and the flags.
func requestSize(names []string, data int, acl func(string) []zk.ACL) int {
	size := 4 + 8 + 9 // the length, the request header, the multi's end
	for _, name := range names {
		size += 9 + 4 + len(name) + 4 + data + 4 + 4
		for _, a := range acl(name) {
			size += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
		}
	}
	return size
}

// fits refuses, before any ZooKeeper call, a create of our nodes whose
// request would exceed maxRequest: an AcquireN of thousands of leases, or
// a few with large node data.
func (p *participant) fits(names []string) error {
	data := len(p.ws[0].l.data)
	if size := requestSize(names, data, p.c.s.ACL); size > maxRequest {
		return invalidf("creating %d nodes of %d bytes of data takes a request of about %d bytes, over ZooKeeper's limit of %d (jute.maxbuffer)",
			len(names), data, size, maxRequest)
	}
	return nil
}

// create tries once to create our nodes in session. made: they exist;
// again: try again at once (parents were missing, or the session changed
// under the create); neither: the create's fate was unknown and our nodes
// were not found: back off.
func (p *participant) create(ctx context.Context, sid int64, names []string) (made, again bool, err error) {
	c := p.c
	zc := c.s.Conn()
	sent := time.Now()
	p.startLooks()
	pres, cancel := p.prefetch(zc, names[0])
	nodes, err := p.claim.create(p, zc, names)
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

// assign records the nodes a create made, in session.
func (p *participant) assign(nodes []string, sid int64, pres []<-chan fetched) {
	n := len(nodes) / len(p.ws)
	for i, w := range p.ws {
		w.nodes, w.pre = nodes[i*n:(i+1)*n], pres[i]
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
	for _, w := range p.ws {
		nodes, err := p.claim.find(p, w)
		if err != nil || nodes == nil {
			return false, false, nil
		}
		w.nodes = nodes
	}
	p.node = p.ws[0].nodes[0]
	return true, false, nil
}

// abandon hands whatever nodes of ours may exist to the janitor, and
// forgets them. The nodes we know go with their grant watch, fired first
// (handoff.go). After a create whose fate was unknown the claim also
// hands over, by protected id, a node a retried create may have left
// beside them; never the ones we know: deleted before their fire, they
// would leave the watch for the session's life, since nobody may fire it
// once the node is gone. TestGiveUpAfterLostCreateReplyLeavesNoWatch.
func (p *participant) abandon() {
	for _, w := range p.ws {
		if w.nodes != nil {
			_ = p.disarm(w)   // if that fails, or the watch did not hear it, the janitor fires it first
			var then []string // our marker, after the node (registry.go)
			if w.marker != "" {
				then = []string{w.marker}
			}
			p.c.s.Discard(session.Job{Nodes: w.nodes, Then: then, Session: p.session, Grant: w.armed, Heard: w.grant})
		}
		if p.unsure {
			p.claim.forget(p, w)
		}
		w.reset()
	}
	p.unsure = false
}

// ensureParents creates every lock path and its missing ancestors as
// container nodes, which the server deletes once they are empty again.
func (p *participant) ensureParents(ctx context.Context) error {
	for _, w := range p.ws {
		if err := w.l.ensureParents(ctx); err != nil {
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

// createDir creates dir as a container node (the lock path itself as its
// policy makes it: [policy].pathNode), if it is not there.
func (l *Lock) createDir(ctx context.Context, dir string) error {
	var (
		data       []byte
		persistent bool
	)
	if dir == l.path {
		data, persistent = l.pol.pathNode()
	}
	err := l.c.s.Retry(ctx, func(zc session.Conn) error {
		if persistent {
			return zc.CreatePersistent(dir, data, l.c.s.ACL(dir))
		}
		return zc.CreateContainer(dir, data, l.c.s.ACL(dir))
	})
	if err != nil {
		return fmt.Errorf("create parent %s: %w", dir, err)
	}
	return nil
}

// queueClaim is n ephemeral-sequential nodes on the path of each of ls,
// all made by one operation: one multi, so one transaction with one zxid
// (what makes a MultiLock deadlock-free, see docs/design.md), or a plain
// create for one node.
type queueClaim struct {
	ls []*Lock
	n  int // nodes on each path: [Semaphore.AcquireN]'s n, else 1
}

func (q queueClaim) locks() []*Lock { return q.ls }
func (q queueClaim) session() int64 { return 0 }
func (q queueClaim) queues() bool   { return true }

func (q queueClaim) newID() (string, error) { return q.ls[0].pol.newID() }

// names are the names of the nodes to create, before their sequence: n on
// each path.
func (q queueClaim) names(id string) []string {
	out := make([]string, 0, len(q.ls)*q.n)
	for _, l := range q.ls {
		prefix := l.path + "/" + l.pol.nodePrefix(id)
		for i := 0; i < q.n; i++ {
			out = append(out, prefix)
		}
	}
	return out
}

func (q queueClaim) create(p *participant, zc session.Conn, names []string) ([]string, error) {
	return zc.CreateEach(names, p.ws[0].l.data, p.c.s.ACL)
}

// find looks for our nodes on w's path. The sync first lets the server we
// now talk to catch up with the leader. One transaction made all of them,
// so it finds all or none. If the sync failed, the read may miss nodes
// applied later: the next create's reads drop them as strays
// ([participant.dropStrays]), and an abandon's cleanup by id syncs until
// it can (the janitor's find).
func (q queueClaim) find(p *participant, w *waiter) ([]string, error) {
	l, zc := w.l, p.c.s.Conn()
	_ = zc.Sync(l.path)
	names, err := zc.Children(l.path)
	if err != nil {
		return nil, err
	}
	prefix := l.pol.idPrefix(p.id)
	var ours []string
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			ours = append(ours, name)
		}
	}
	if len(ours) != q.n {
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

func (q queueClaim) forget(p *participant, w *waiter) {
	p.c.s.Discard(session.Job{Parent: w.l.path, Prefix: w.l.pol.idPrefix(p.id), Except: w.nodes, Session: p.session})
}

func (q queueClaim) survey(p *participant, w *waiter, epoch uint64) (view, error) {
	return p.surveyQueue(w, epoch)
}

// discardNames hands children of l named names to the janitor.
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

// placeClaim is one plain ephemeral node, node, on l's path, with the
// protected id id, in session sid only, made only while guard exists: the
// node of the lease the caller holds (a downgrade's write lease; kazoo's
// semaphore lock). It holds from its create.
//
// Why: the caller's lease excludes every conflicting holder for as long as
// its node exists: a holder only holds once no conflicting node is ahead
// of it, and the guard is ahead of every node made after it. The create
// is one transaction with a check that guard exists
// (PrepRequestProcessor checks every op of a multi against one state, and
// applies all or none), so at the node's zxid the guard was there and
// nobody conflicting held; from then on the node itself excludes them (a
// downgrade's read node sorts at its writer's place; kazoo's lease is
// counted by every acquirer). Without the check, a guard deleted from
// outside while the caller's lease still looked live (its Lease learns of
// it a notification later) let a writer hold beside the new reader, or
// kazoo's K+1st lease be made: both found by the randomized schedules on
// the fake (TestSchedules). The engine only reads the node back: its
// owner proves it is ours, and its czxid is its token, a zxid after the
// caller's own grant and before the node's delete (docs/design.md,
// "Tokens").
type placeClaim struct {
	l               *Lock
	node, id, guard string
	sid             int64
}

// errGuardGone: a place's guard was gone at its create; nothing was made.
var errGuardGone = fmt.Errorf("the lease it rests on is gone: %w", ErrNodeDeleted)

func (c placeClaim) locks() []*Lock         { return []*Lock{c.l} }
func (c placeClaim) newID() (string, error) { return c.id, nil }
func (c placeClaim) session() int64         { return c.sid }
func (c placeClaim) queues() bool           { return false }
func (c placeClaim) names(string) []string  { return []string{c.node} }

// forget hands over our node if abandon did not: a place's node has no
// grant watch to fire first, and a second delete finds it gone.
func (c placeClaim) forget(p *participant, _ *waiter) {
	p.c.s.Discard(session.Job{Nodes: []string{c.node}, Session: p.session})
}

// create makes the node. One that exists already was made by a create of
// ours whose reply was lost, since only we know its name; survey checks
// that our session owns it.
func (c placeClaim) create(p *participant, zc session.Conn, _ []string) ([]string, error) {
	err := zc.CreateEphemeralIf(c.guard, c.node, p.ws[0].l.data, p.c.s.ACL(c.node))
	switch {
	case session.GoneAt(err, c.guard):
		err = errGuardGone
	case session.NodeExists(err):
		err = nil
	}
	return []string{c.node}, err
}

// find: the node's name is known; survey checks its owner.
func (c placeClaim) find(p *participant, _ *waiter) ([]string, error) {
	_, _, err := p.c.s.Conn().Get(c.node)
	if err != nil {
		return nil, nil
	}
	return []string{c.node}, nil
}

func (c placeClaim) survey(p *participant, w *waiter, epoch uint64) (v view, err error) {
	w.looked = true
	v.d.Holds = true
	if w.own == nil {
		var st session.Stat
		if st, err = p.watchOwn(w, epoch); err == nil {
			w.token = st.Czxid
		}
	}
	return v, err
}
