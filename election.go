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
		return nil, fmt.Errorf("zklock: new election: %w", err)
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
		return Participant{}, fmt.Errorf("zklock: leader %s: %w", e.lock.path, err)
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
	path := e.lock.path
	for {
		names, err := zc.Children(path)
		var ch <-chan session.Event
		switch {
		case e.lock.c.s.Classify(err) == session.Gone && watch:
			exists, ch, err := zc.ExistsW(path)
			if err != nil || exists {
				return Participant{}, nil, err // retry, or read the children again
			}
			return Participant{}, ch, nil
		case e.lock.c.s.Classify(err) == session.Gone:
			return Participant{}, nil, nil
		case err != nil:
			return Participant{}, nil, err
		}
		kids, err := sortChildren(names, nil)
		if err == nil && len(kids) == 0 && watch {
			// Nobody leads: wait for the first candidate. (If one came
			// meanwhile, this watch wakes us once more, for nothing.)
			if names, ch, err = zc.ChildrenW(path); e.lock.c.s.Classify(err) == session.Gone {
				continue
			} else if err == nil {
				kids, err = sortChildren(names, nil)
			}
		}
		if err != nil {
			return Participant{}, nil, err
		}
		if len(kids) == 0 {
			return Participant{}, ch, nil
		}
		node := path + "/" + kids[0].Name
		var (
			data []byte
			st   session.Stat
		)
		if watch {
			data, st, ch, err = zc.GetDataW(node)
		} else {
			data, st, err = zc.Get(node)
		}
		if e.lock.c.s.Classify(err) == session.Gone {
			continue // it resigned meanwhile: read again
		}
		if err != nil {
			return Participant{}, nil, err
		}
		return Participant{Node: node, Data: data, Holder: true, Kind: kids[0].Kind,
			Created: time.UnixMilli(st.Ctime)}, ch, nil
	}
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
	c := e.lock.c
	var (
		last     Participant
		reported bool
		b        backoff.BackOff
		synced   int64 // the session whose server has caught up with our reports
	)
	for {
		st := c.s.State()
		switch {
		case st.Closed:
			return
		case !st.Connected:
			select {
			case <-ctx.Done():
				return
			case <-st.Changed:
			}
			continue
		}
		zc := c.s.Conn()
		var (
			p   Participant
			ch  <-chan session.Event
			err error
		)
		if s := zc.SessionID(); s != synced {
			// A new session may be served by a follower behind the one
			// that served the last: a sync first has it catch up with
			// the leader, so no report goes back in time.
			if err = e.sync(zc); err == nil {
				synced = s
			}
		}
		if err == nil {
			p, ch, err = e.leader(zc, true)
		}
		if err == nil && ch == nil {
			continue // the path appeared between two reads: read it again
		}
		if err != nil {
			if c.s.Classify(err) == session.Closing {
				return
			}
			if e.lock.c.s.Classify(err) == session.Permanent {
				c.s.Log().Warn("zklock: observe", "path", e.lock.path, "err", err)
			} else {
				c.s.Log().Debug("zklock: observe", "path", e.lock.path, "err", err)
			}
			if b == nil {
				b = c.s.NewBackOff()
			}
			if session.Sleep(ctx, b.NextBackOff()) != nil {
				return
			}
			continue
		}
		b = nil
		if !reported || p.Node != last.Node {
			select {
			case out <- p:
			case <-ctx.Done():
				return
			}
			last, reported = p, true
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-st.Changed:
			// Reconnected, a new session or the Client closed: read
			// again (go-zookeeper keeps watches across reconnects, but
			// not across sessions).
		}
	}
}
