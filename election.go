package zklock

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zklock/internal/session"
)

// Election chooses one leader among the candidates on a ZooKeeper path, in
// the order they campaigned. It is wire-compatible with Apache Curator's
// LeaderLatch: each candidate writes a protected ephemeral-sequential node
// `_c_<uuid>-latch-<seq>` holding its identity, and the lowest node leads,
// so Go and Java replicas on one path elect one leader between them. (Do
// not add kazoo's Election: zklock counts its nodes, but kazoo ignores
// latch nodes, so a kazoo candidate would lead beside a zklock one.)
//
// Leadership is a [Lease] from the same engine as the locks, with the same
// guarantees: a leader learns that it may have lost leadership, through
// [Lease.Done] and [Lease.Err], no later than its deadline
// ([Lease.ValidUntil]), and so before any other candidate can lead; a
// connection blip does not end leadership while the quorum confirms the
// session in time; a leader whose node someone deletes hears of it;
// [Lease.Token] strictly increases from one leader to the next, so a
// resource can refuse a deposed leader's writes.
//
// An Election is safe for concurrent use. Each Campaign is a candidate of
// its own.
type Election struct {
	lock *Lock
}

// NewElection returns an election on path. The candidates' identity, which
// [Election.Leader] and [Election.Observe] report and Curator reads as the
// participant id, is the node data: by default the Client's ("<host>/<pid>"),
// or [WithNodeData]'s, which must not be empty. It validates its arguments
// (errors wrap ErrInvalidArgument) and makes no ZooKeeper call.
func NewElection(c *Client, path string, opts ...LockOption) (*Election, error) {
	l, err := newLock(c, path, exclusiveDriver{KindLatch}, opts)
	if err == nil && len(l.data) == 0 {
		err = invalidf("empty identity: a leader must say who it is (WithNodeData)")
	}
	if err != nil {
		return nil, opError("new election", path, err)
	}
	return &Election{l}, nil
}

// Path returns the election's path.
func (e *Election) Path() string { return e.lock.path }

// Campaign makes this a candidate and waits until it leads; it returns its
// leadership as a [Lease]. [Lease.Release] resigns: it deletes the node
// (retried until its ctx ends, then by the Client in the background), and
// the next candidate in line leads. If ctx ends first, Campaign returns an
// error for which errors.Is(err, ctx.Err()) holds and leaves no node
// behind. A candidate whose session expires while it waits campaigns again,
// at the back of the line. Like [Lock.Acquire] otherwise.
func (e *Election) Campaign(ctx context.Context) (*Lease, error) {
	leases, err := e.lock.acquire(ctx, "campaign", 1, false)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// Lead campaigns, waiting until this candidate leads or ctx is done, then
// runs fn while it leads, as [Do] runs fn under a lock. fn's ctx is
// cancelled the moment leadership may be lost (the lease's [Lease.Done]),
// with the loss as its cause (context.Cause: the lease's [Lease.Err]), and
// with ctx. When fn returns, or panics, Lead resigns: it ends leadership
// and deletes its node with a context of its own, not ctx (ctx may be why
// fn returned), for at most 30 s; the Client's janitor deletes the node
// later if that was not enough. A panic then goes on.
//
// Lead returns nil when fn returned nil while leading and the resignation
// went through. Otherwise it returns an *OpError (op "lead") wrapping:
// fn's error; the loss, if leadership was lost before Lead resigned
// (ErrSessionExpired, ErrLeaseExpired, ErrNodeDeleted, ErrClientClosed,
// ErrConnectionSuspended), both if both; or, if it never led, the
// campaign's error (errors.Is(err, ctx.Err()) when ctx ended first: no
// node is left behind; ErrClientClosed; ErrInvalidArgument for a nil ctx or
// fn, before any ZooKeeper call).
//
// Lead leads once. A replica that should lead again after losing or
// resigning calls it in a loop, as Curator's LeaderSelector does with
// autoRequeue, at the back of the line each time. It stops when its own
// ctx is done or the Client is closed (ErrClientClosed). fn's own error
// may be ctx.Err() after a loss, so the loop tests ctx.Err(), not the
// error, for context.Canceled:
//
//	for ctx.Err() == nil {
//		err := e.Lead(ctx, work)
//		if errors.Is(err, zklock.ErrClientClosed) {
//			return
//		}
//		// log err; wait a moment before campaigning again
//	}
//
// A leader that passes its fencing token ([Lease.Token]) to what it writes
// reaches its lease from fn's ctx with [LeaseFrom].
func (e *Election) Lead(ctx context.Context, fn func(ctx context.Context) error) error {
	path := e.lock.path
	if ctx == nil || fn == nil {
		return opError("lead", path, invalidf("nil context or function"))
	}
	lease, err := e.Campaign(ctx)
	if err != nil {
		return &OpError{Op: "lead", Path: path, Err: fmt.Errorf("campaign: %w", causeOf(err))}
	}
	ferr, rerr := runHeld(ctx, lease, fn)
	rerr = causeOf(rerr) // it names the node, and says "zklock: " no more
	switch {
	case ferr == nil && rerr == nil:
		return nil
	case ferr == nil:
		err = rerr
	case rerr == nil:
		err = ferr
	default:
		err = fmt.Errorf("%w; %w", ferr, rerr)
	}
	return &OpError{Op: "lead", Path: path, Node: lease.Node(), Err: err}
}

// Participants lists the candidates: the leader first, then the others in
// the order in which they will lead.
func (e *Election) Participants(ctx context.Context) ([]Participant, error) {
	return e.lock.Participants(ctx)
}

// Leader returns the candidate that leads now: the lowest node on the path,
// with its identity (its data). It returns an error wrapping ErrNoLeader
// when there is no candidate. It syncs before it reads, so it reports the
// leader as of the call or later, never one whose successor had taken over
// before the call; a leader that has just lost its session may be reported
// until the server deletes its node.
func (e *Election) Leader(ctx context.Context) (Participant, error) {
	fail := func(err error) (Participant, error) {
		return Participant{}, opError("leader", e.lock.path, err)
	}
	if ctx == nil {
		return fail(invalidf("nil context"))
	}
	var p Participant
	err := e.lock.c.s.Retry(ctx, func(zc session.Conn) error {
		if err := e.sync(zc); err != nil {
			return err
		}
		var err error
		p, _, err = e.leader(zc, false)
		return err
	})
	if err != nil {
		return fail(err)
	}
	if p.Node == "" {
		return fail(ErrNoLeader)
	}
	return p, nil
}

// sync has the server catch up with the ZooKeeper leader (a path that
// does not exist is no error).
func (e *Election) sync(zc session.Conn) error {
	if err := zc.Sync(e.lock.path); err != nil && e.lock.c.s.Classify(err) != session.Gone {
		return err
	}
	return nil
}

// leader reads the leader: the first child, and its data. With watch, it
// also returns a watch that fires when that may change: on the leader's
// node, or, with nobody leading, on the path's children (or on the path
// itself if it does not exist). The children are read without a watch
// first, so that while someone leads, candidates coming and going wake no
// observer. A leader whose node goes between the two reads is read again.
func (e *Election) leader(zc session.Conn, watch bool) (Participant, <-chan session.Event, error) {
	for {
		kids, ch, again, err := e.candidates(zc, watch)
		if again {
			continue
		}
		if err != nil || len(kids) == 0 {
			return Participant{}, ch, err
		}
		p, ch, err := e.head(zc, kids[0], watch)
		if e.lock.c.s.Classify(err) == session.Gone {
			continue // it resigned meanwhile: read again
		}
		return p, ch, err
	}
}

// candidates reads the candidates in order. With watch, and nobody there,
// ch watches for the first (the path's creation, or its first child);
// again says to read again.
func (e *Election) candidates(zc session.Conn, watch bool) (kids []Child, ch <-chan session.Event, again bool, err error) {
	path := e.lock.path
	names, err := zc.Children(path)
	switch gone := e.lock.c.s.Classify(err) == session.Gone; {
	case gone && watch:
		exists, ch, err := zc.ExistsW(path)
		if err != nil || exists {
			return nil, nil, false, err // retry, or read the children again
		}
		return nil, ch, false, nil
	case gone:
		return nil, nil, false, nil
	case err != nil:
		return nil, nil, false, err
	}
	kids, err = sortChildren(names, nil)
	if err != nil || len(kids) > 0 || !watch {
		return kids, nil, false, err
	}
	// Nobody leads: wait for the first candidate. (If one came meanwhile,
	// this watch wakes us once more, for nothing.)
	names, ch, err = zc.ChildrenW(path)
	if e.lock.c.s.Classify(err) == session.Gone {
		return nil, nil, true, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	kids, err = sortChildren(names, nil)
	return kids, ch, false, err
}

// head reads the leader's node, with a watch if watch.
func (e *Election) head(zc session.Conn, k Child, watch bool) (Participant, <-chan session.Event, error) {
	node := e.lock.path + "/" + k.Name
	var (
		data []byte
		st   session.Stat
		ch   <-chan session.Event
		err  error
	)
	if watch {
		data, st, ch, err = zc.GetDataW(node)
	} else {
		data, st, err = zc.Get(node)
	}
	if err != nil {
		return Participant{}, nil, err
	}
	return Participant{Node: node, Data: data, Holder: true, Kind: k.Kind, Created: time.UnixMilli(st.Ctime)}, ch, nil
}

// Observe reports the leader, then every change of leader, in order, on the
// channel it returns, until ctx is done or the Client is closed; then it
// closes the channel. The zero Participant (an empty Node) means that
// nobody leads. A change is one leader handing over to another, or to
// nobody; the same leader is never reported twice in a row.
//
// Observers do not herd: each watches the leader's node (only while nobody
// leads, the path's children), so a candidate joining or leaving the line
// wakes no observer, and a change of leader wakes each observer once.
//
// What it reports is ZooKeeper's view: leaders come in the order in which
// they led, never one after its successor. Within a session the state a
// client sees never goes back, even across servers (a server refuses a
// client that has seen a later zxid than its own); in a new session,
// Observe syncs before it reads again. ZooKeeper
// keeps no history, so a leader that resigns before the observer has read
// the path again after its predecessor left (a round trip) is not reported;
// its successor is. While the connection is down the last report stands;
// the observer reads again once it is back. Errors that may pass are
// retried with backoff; the Client's logger tells of them.
//
// A receiver must keep reading until the channel closes, or cancel ctx:
// Observe waits for each report to be received.
func (e *Election) Observe(ctx context.Context) <-chan Participant {
	out := make(chan Participant)
	if ctx == nil {
		close(out)
		return out
	}
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Participant) {
	defer close(out)
	o := &observer{e: e, out: out}
	for o.step(ctx) {
	}
}

// observer is one Observe: what it reported last, and how far its server
// is known to have caught up.
type observer struct {
	e        *Election
	out      chan<- Participant
	last     Participant
	reported bool
	b        backoff.BackOff
	synced   int64 // the session whose server has caught up with our reports
}

// step reads the leader, reports it if it changed, and waits for the next
// change. It reports false once observing must stop: ctx is done or the
// Client closed.
func (o *observer) step(ctx context.Context) bool {
	st, ok := o.connected(ctx)
	if !ok {
		return false
	}
	p, ch, err := o.read()
	if err != nil {
		return o.failed(ctx, err)
	}
	if ch == nil {
		return true // the path appeared between two reads: read it again
	}
	o.b = nil
	if !o.reported || p.Node != o.last.Node {
		select {
		case o.out <- p:
		case <-ctx.Done():
			return false
		}
		o.last, o.reported = p, true
	}
	select {
	case <-ctx.Done():
		return false
	case <-ch:
	case <-st.Changed:
		// Reconnected, a new session or the Client closed: read again
		// (go-zookeeper keeps watches across reconnects, but not across
		// sessions).
	}
	return true
}

// connected waits until the session is connected; false if the Client
// closed or ctx ended first.
func (o *observer) connected(ctx context.Context) (session.Snapshot, bool) {
	st, err := o.e.lock.c.s.AwaitConnected(ctx)
	return st, err == nil
}

// read reads the leader with a watch. A new session may be served by a
// follower behind the one that served the last: a sync first has it catch
// up with the leader, so no report goes back in time.
func (o *observer) read() (Participant, <-chan session.Event, error) {
	zc := o.e.lock.c.s.Conn()
	if s := zc.SessionID(); s != o.synced {
		if err := o.e.sync(zc); err != nil {
			return Participant{}, nil, err
		}
		o.synced = s
	}
	return o.e.leader(zc, true)
}

// failed logs err and backs off; false if observing must stop.
func (o *observer) failed(ctx context.Context, err error) bool {
	s := o.e.lock.c.s
	switch s.Classify(err) {
	case session.Closing:
		return false
	case session.Permanent:
		s.Log().Warn("zklock: observe", "path", o.e.lock.path, "err", err)
	default:
		s.Log().Debug("zklock: observe", "path", o.e.lock.path, "err", err)
	}
	if o.b == nil {
		o.b = s.NewBackOff()
	}
	return session.Sleep(ctx, o.b.NextBackOff()) == nil
}
