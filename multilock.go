package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// MultiLock holds exclusive locks on several paths at once, all or nothing,
// and cannot deadlock whatever order callers list the paths in. It is the
// counterpart of Apache Curator's InterProcessMultiLock, which takes its
// locks one after another: it holds some while it waits for the rest, so
// two callers that list the same paths in different orders can deadlock,
// and its timeout applies to each lock in turn.
//
// Each Acquire creates, in one multi-operation, one node on every path:
// `_c_<uuid>-lock-<seq>`, with one uuid, the exclusive node of a [Mutex] and
// of Curator's InterProcessMutex. On each path it is one participant among
// the others, so it excludes [Mutex] holders, both sides of an [RWMutex]
// (a reader counts every node that is not a reader as a writer), other
// MultiLocks, and Curator's and kazoo's locks, and they exclude it. Acquire
// returns when its node holds on every path, and the one [Lease] covers
// them all: Release deletes every node, in one multi-operation.
//
// While it waits, a MultiLock holds nothing (no lease, and no guarantee on
// any path), but it is queued on every path at once, first come, first
// served: on a path where it has reached the front, participants that came
// after it wait for it, as they would for any waiter ahead of them. It
// never makes anyone wait who came before it.
//
// Why it cannot deadlock: every participant, on every path, waits only for
// nodes created before its own, and ZooKeeper creates all the nodes of one
// MultiLock in one transaction, so creation order is one total order across
// all paths and a cycle of waits would have to go back in it. The proof, and
// the ZooKeeper behaviour it relies on, is in multilock.go, next to the code
// that depends on it. It covers participants that wait for one acquire at a time: MultiLocks, and
// ordinary locks on one path. A holder that acquires another lock while it
// holds (Curator's InterProcessMultiLock does, and so does nesting two
// Mutex acquires) waits with a node created earlier than the one it waits
// behind, and can deadlock against anyone, a MultiLock too.
//
// A MultiLock is safe for concurrent use; each Acquire is an independent
// participant. The zero value is not usable: use [NewMultiLock].
type MultiLock struct {
	c     *Client
	paths []string
	locks []*Lock // a mutex's engine on each path, in the order of paths
}

// NewMultiLock returns a lock on every one of paths. The order of paths
// does not matter for safety or liveness; the lease's [Lease.Node] is the
// node on paths[0]. It validates its arguments and makes no ZooKeeper
// call: a nil client, no paths, a bad path, a path listed twice, a path
// inside another path of the set, or node data that would make the one
// multi-operation exceed 512 KiB in all ([WithNodeData] on each path) fail
// with an error wrapping ErrInvalidArgument.
func NewMultiLock(c *Client, paths []string, opts ...LockOption) (*MultiLock, error) {
	m, err := newMultiLock(c, paths, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: new multilock: %w", err)
	}
	return m, nil
}

func newMultiLock(c *Client, paths []string, opts []LockOption) (*MultiLock, error) {
	if c == nil {
		return nil, invalidf("nil client")
	}
	if len(paths) == 0 {
		return nil, invalidf("no paths")
	}
	m := &MultiLock{c: c, paths: append([]string(nil), paths...), locks: make([]*Lock, len(paths))}
	for i, p := range m.paths {
		l, err := newLock(c, p, exclusiveDriver{KindMutex}, opts)
		if err != nil {
			return nil, err
		}
		for _, q := range m.paths[:i] {
			switch {
			case q == p:
				return nil, invalidf("lock path %q is listed twice", p)
			case strings.HasPrefix(p, q+"/"):
				return nil, invalidf("lock path %q is inside lock path %q", p, q)
			case strings.HasPrefix(q, p+"/"):
				return nil, invalidf("lock path %q is inside lock path %q", q, p)
			}
		}
		m.locks[i] = l
	}
	if all := len(m.locks[0].data) * len(paths); all > maxNodeData {
		return nil, invalidf("node data of %d bytes on each of %d paths, %d in all, exceeds %d",
			len(m.locks[0].data), len(paths), all, maxNodeData)
	}
	return m, nil
}

// Paths returns the lock's paths, in the order NewMultiLock was given them.
func (m *MultiLock) Paths() []string { return append([]string(nil), m.paths...) }

// Acquire waits until the lock is held on every path and returns the one
// lease that covers them all, or returns when ctx is done with an error for
// which errors.Is(err, ctx.Err()) holds: ctx bounds the whole wait, not each
// path's. A done ctx returns at once. On failure no node is left on any
// path: they are deleted by a cleanup that does not depend on ctx, retried
// until it succeeds or the session ends. If the session expires while
// waiting, or one of our nodes is deleted by someone else, the participant
// queues again (at the back, on every path) while ctx allows. Errors wrap
// ErrClientClosed, ErrUnknownNode or ZooKeeper's own.
func (m *MultiLock) Acquire(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "acquire", false)
}

// TryAcquire takes the lock if it holds at once on every path, without
// waiting for anyone, and otherwise returns an error wrapping ErrLocked. It
// leaves no node on any path when it fails. It still waits for ZooKeeper
// itself (bounded by ctx).
func (m *MultiLock) TryAcquire(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try acquire", true)
}

func (m *MultiLock) acquire(ctx context.Context, op string, try bool) (*Lease, error) {
	fail := func(err error) (*Lease, error) {
		return nil, fmt.Errorf("zklock: %s %s: %w", op, strings.Join(m.paths, ","), err)
	}
	if err := m.c.usable(ctx); err != nil {
		return fail(err)
	}
	mp := &multiParticipant{m: m, c: m.c, parts: make([]*participant, len(m.locks))}
	for i, l := range m.locks {
		mp.parts[i] = &participant{l: l, c: m.c, n: 1}
	}
	lease, err := mp.run(ctx, try)
	if err != nil {
		return fail(err)
	}
	return lease, nil
}

// multiParticipant is one Acquire of a MultiLock: a participant of the
// engine on each path, all of them with one protected id, in one session,
// their nodes made by one transaction. The engine's per-path steps (read,
// locate, decide, wait, find) run on each part; what is the MultiLock's own
// is the create, the decision to grant, and the cleanup.
type multiParticipant struct {
	m     *MultiLock
	c     *Client
	parts []*participant // in the order of m.paths
}

// run queues the participant on every path and waits until it holds on
// all of them. As in [participant.run], the deferred abandon is the one
// place that cleans up a failed, cancelled or refused acquire.
func (mp *multiParticipant) run(ctx context.Context, try bool) (lease *Lease, err error) {
	defer func() {
		if lease == nil {
			mp.abandon()
		}
	}()
	for {
		if err := mp.enqueue(ctx); err != nil {
			return nil, err
		}
		first := mp.parts[0]
		done := mp.c.await(first.nodes[0], first.session)
		lease, err = mp.await(ctx, try)
		done()
		if !errors.Is(err, errRequeue) {
			return lease, err
		}
		mp.abandon()
		mp.c.log.Debug("zklock: queueing again", "paths", mp.m.paths)
	}
}

// abandon hands whatever nodes of ours may exist, on every path, to the
// janitor, and forgets them. After a create whose fate was unknown, it
// deletes by protected id, which also catches a node a retried create may
// have left beside the one we know.
func (mp *multiParticipant) abandon() {
	for _, p := range mp.parts {
		switch {
		case p.unsure:
			p.c.janitor.discard(job{parent: p.l.path, prefix: protectedPrefix + p.id + "-", session: p.session})
		case p.nodes != nil:
			p.c.janitor.discard(job{nodes: p.nodes, session: p.session})
		}
		p.nodes, p.unsure, p.own = nil, false, nil
	}
}

// enqueue creates our node on every path, in one multi-operation (see
// [multiParticipant.await] for why that one transaction is what makes a
// MultiLock deadlock-free). As in [participant.enqueue], a create that
// fails with a connection error may still have happened: we look for our
// nodes by their protected id, in the session that sent it.
func (mp *multiParticipant) enqueue(ctx context.Context) error {
	c := mp.c
	id, err := newID()
	if err != nil {
		return err
	}
	prefixes := make([]string, len(mp.parts))
	for i, p := range mp.parts {
		p.id = id
		prefixes[i] = p.l.path + "/" + nodePrefix(id, KindMutex)
	}
	data := mp.parts[0].l.data
	var b backoff.BackOff
	for {
		session, err := c.awaitSession(ctx)
		if err != nil {
			return err
		}
		zc := c.conn()
		sent := time.Now()
		nodes, err := zc.createEach(prefixes, data, c.acl)
		switch c.classify(err) {
		case done:
			c.confirm(sent, session) // a write the quorum acknowledged
			if now := zc.sessionID(); now != session {
				// As in participant.enqueue: the nodes may be the new
				// session's; delete them, and create again.
				c.janitor.discard(job{nodes: nodes, session: now})
				continue
			}
			for i, p := range mp.parts {
				p.nodes, p.session = nodes[i:i+1], session
			}
			return nil
		case gone:
			// Some path or ancestor is missing; the multi made nothing.
			for _, p := range mp.parts {
				if err := p.l.ensureParents(ctx); err != nil {
					return err
				}
			}
			continue
		case closing:
			return ErrClientClosed
		case permanent:
			return err
		}
		for _, p := range mp.parts {
			p.unsure, p.session = true, session
		}
		s, err := c.awaitSession(ctx)
		if err != nil {
			return err
		}
		if s == session {
			// The multi is one transaction: all our nodes exist, or none.
			if found := mp.find(); found != nil {
				for i, p := range mp.parts {
					p.nodes = found[i]
				}
				return nil
			}
		} else {
			for _, p := range mp.parts {
				p.unsure = false // gone with the session, if made at all
			}
		}
		if b == nil {
			b = c.newBackOff()
		}
		if err := sleep(ctx, b.NextBackOff()); err != nil {
			return err
		}
	}
}

// find looks for our node on every path after a create whose outcome is
// unknown; nil unless it finds them all. Any it finds are kept unsure (the
// abandon deletes them by id) until a create succeeds.
func (mp *multiParticipant) find() [][]string {
	found := make([][]string, len(mp.parts))
	for i, p := range mp.parts {
		nodes, err := p.find()
		if err != nil || nodes == nil {
			return nil
		}
		found[i] = nodes
	}
	return found
}

// await waits until our node holds on every path, deciding each path with
// the engine's exclusive driver.
//
// Why a MultiLock cannot deadlock. Order the participants by the zxid of
// the transaction that created their nodes (all of a MultiLock's are made
// by one multi-operation, whose ops ZooKeeper prepares with one zxid:
// PrepRequestProcessor.pRequest, case OpCode.multi, "Each op in a multi-op
// must have the same zxid!", and applies together, all or none:
// DataTree.processTxn, case OpCode.multi; a single-path participant's
// create is a transaction with a zxid too). Zxids are a total order,
// assigned in increasing order by the leader's one PrepRequestProcessor
// thread (ZooKeeperServer.getNextZxid). Each path orders its queue by
// sequence number, and each parent has its own counter, so sequence
// numbers of different paths cannot be compared; but on each path the
// order agrees with the zxids: the sequence is the parent's cversion as
// prepared so far, pending transactions included
// (PrepRequestProcessor.pRequest2TxnCreate reads it through
// getRecordForPath, which sees outstanding changes), and every create bumps
// it, in the order transactions are prepared. So on every path a node sorts
// ahead of ours exactly when its transaction came before ours. Every driver
// waits only for nodes ahead of its own (Decision.Watch must point before
// first: [participant.check]), so each wait goes from a participant to one
// with a smaller zxid. A cycle of waits would need a zxid smaller than
// itself: there is none, whatever order anyone listed the paths in. And
// the participant with the smallest zxid has nothing ahead of it on any of
// its paths, so it holds on all of them (every zklock driver holds at the
// front of a queue): someone always makes progress.
// Requeueing (after a session expiry) makes a new transaction, later than
// all, so the order stays strict. This is TestMultiLockNoDeadlock; creating
// the nodes one by one, in the caller's order, breaks the argument (two
// callers' nodes then stand in opposite orders on two paths), and that test
// then stalls.
//
// Why it holds when it grants. Holding on a path is monotone (see
// [Driver]): once the children we read show nothing ahead of our node,
// nothing can come ahead of it later. So paths are decided one at a time;
// a path that holds keeps holding while we wait for the next, and the total
// wait is that of the slowest path, not the sum. A path counts as holding
// only if it was decided, and its own-node watch set, in the Client's
// current epoch: on one connection, in one session (a watch set before a
// reconnect may not have survived it, and go-zookeeper only logs that). At
// the grant, every own-node watch is checked once more: ZooKeeper sends a
// client's notifications in order with its replies, and go-zookeeper hands
// each one to its watcher before reading the next off the connection (see
// [participant.intact]), so quiet watches mean that every node of ours was
// there at the latest state we saw, each with nothing ahead of it: we hold
// on every path at once. The grant itself checks that the epoch has not
// moved since. TestMultiLockNodeDeletedWhileWaiting fails without the
// check of the watches; TestMultiLockMixed and TestMultiLockAllOrNothing
// when a path is counted as holding before it was decided.
func (mp *multiParticipant) await(ctx context.Context, try bool) (*Lease, error) {
	n := len(mp.parts)
	held := make([]bool, n)     // path i was seen to hold...
	heldAt := make([]uint64, n) // ...in this epoch
	ownAt := make([]uint64, n)  // the epoch in which path i's own-node watch was set
	var b backoff.BackOff
	for {
		st, err := mp.parts[0].ready(ctx)
		if err != nil {
			return nil, err
		}
		i := 0
		for i < n && held[i] && heldAt[i] == st.epoch {
			i++
		}
		if i == n {
			quiet, err := mp.quiet(held)
			if err != nil {
				return nil, err
			}
			if !quiet {
				continue
			}
			lease, err := mp.grant(ctx, st)
			if err != nil || lease != nil {
				return lease, err
			}
			continue // the session changed since: decide again
		}
		p := mp.parts[i]
		held[i] = false
		if ownAt[i] != st.epoch {
			p.own = nil // read sets a watch on our node again, in this epoch
		}
		kids, err := p.read()
		switch classify(err) {
		case done:
			b = nil
		case gone:
			return nil, errRequeue // the path or our node is gone, so is our node
		case retry:
			if b == nil {
				b = mp.c.newBackOff()
			}
			if err := sleep(ctx, b.NextBackOff()); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, err
		}
		ownAt[i] = st.epoch
		first, last, ok := p.locate(kids)
		if !ok {
			return nil, errRequeue
		}
		d := decide(p.l.driver, kids, first, last)
		if err := p.check(d, first); err != nil {
			return nil, err
		}
		if d.Holds {
			held[i], heldAt[i] = true, st.epoch
			continue
		}
		if try {
			return nil, ErrLocked
		}
		fast, _, err := p.wait(ctx, st, p.plan(kids, first, last, d))
		if err != nil {
			return nil, err
		}
		if fast {
			held[i], heldAt[i] = true, st.epoch
		}
	}
}

// quiet reports whether no own-node watch has fired. One that has fired
// makes its path undecided (read again); a deletion means queue again.
func (mp *multiParticipant) quiet(held []bool) (bool, error) {
	quiet := true
	for i, p := range mp.parts {
		select {
		case ev := <-p.own:
			p.own, held[i], quiet = nil, false, false
			if deleted(ev) {
				return false, errRequeue
			}
		default:
		}
	}
	return quiet, nil
}

// grant turns our nodes into one lease, if the Client's epoch is still
// st's; see [participant.grant]. All our nodes were made by one
// transaction, so each part read the same czxid: the lease's token.
func (mp *multiParticipant) grant(ctx context.Context, st clientState) (*Lease, error) {
	nodes := make([]string, len(mp.parts))
	for i, p := range mp.parts {
		nodes[i] = p.nodes[0]
	}
	first := mp.parts[0]
	leases, err := mp.c.grantGroups(st.epoch, first.session, [][]string{nodes}, first.token)
	if errors.Is(err, errUnconfirmed) {
		return nil, mp.c.awaitConfirmed(ctx, st)
	}
	if err != nil || leases == nil {
		return nil, err
	}
	return leases[0], nil
}
