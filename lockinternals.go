package zklock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
)

// LockOption configures a lock ([NewMutex], [NewRWMutex], [NewSemaphore],
// [NewLock]).
type LockOption func(*lockOptions) error

type lockOptions struct {
	data []byte
	set  bool
}

// maxNodeData bounds node data well below ZooKeeper's default 1 MiB packet
// limit.
const maxNodeData = 512 << 10

// WithNodeData sets the data stored in each of the lock's nodes, which
// [Mutex.Participants] and friends report. Default: a short owner identity,
// "<hostname>/<pid>". More than 512 KiB fails with ErrInvalidArgument.
func WithNodeData(data []byte) LockOption {
	return func(o *lockOptions) error {
		if len(data) > maxNodeData {
			return invalidf("node data of %d bytes exceeds %d", len(data), maxNodeData)
		}
		o.data, o.set = data, true
		return nil
	}
}

// Lock is the engine under every recipe: Curator's LockInternals with a
// pluggable [Driver]. Each Acquire creates a protected ephemeral-sequential
// node `_c_<uuid>-<lockname><seq>` under the lock path (whose missing
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
}

// NewLock returns a lock on path with the policy d. It validates its
// arguments (errors wrap ErrInvalidArgument) and makes no ZooKeeper call.
func NewLock(c *Client, path string, d Driver, opts ...LockOption) (*Lock, error) {
	return newLock(c, path, d, opts)
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
	switch d.LockName() {
	case lockNameMutex, lockNameRead, lockNameWrite, lockNameLease:
	default:
		return nil, invalidf("driver lock name %q is none of %q, %q, %q, %q",
			d.LockName(), lockNameMutex, lockNameRead, lockNameWrite, lockNameLease)
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
// succeeds or the session ends. If the session expires while waiting, the
// participant queues again in the new session (at the back) while ctx
// allows. Errors wrap ErrClientClosed, ErrUnknownNode or ZooKeeper's own.
func (l *Lock) Acquire(ctx context.Context) (*Lease, error) {
	leases, err := l.acquire(ctx, 1, false)
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
	leases, err := l.acquire(ctx, 1, true)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// errRequeue: our nodes are gone (their session ended, or someone deleted
// them); queue again.
var errRequeue = errors.New("zklock: requeue")

func (l *Lock) acquire(ctx context.Context, n int, try bool) ([]*Lease, error) {
	op := "acquire"
	if try {
		op = "try acquire"
	}
	if ctx == nil {
		return nil, fmt.Errorf("zklock: %s %s: %w", op, l.path, invalidf("nil context"))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("zklock: %s %s: %w", op, l.path, err)
	}
	if l.c.state().closed {
		return nil, fmt.Errorf("zklock: %s %s: %w", op, l.path, ErrClientClosed)
	}
	p := &participant{l: l, n: n}
	for {
		p.id = uuid.NewString()
		err := p.enqueue(ctx)
		if err == nil {
			var leases []*Lease
			leases, err = p.await(ctx, try)
			if err == nil {
				return leases, nil
			}
		}
		if errors.Is(err, errRequeue) {
			l.c.log.Debug("zklock: queueing again", "path", l.path)
			continue
		}
		return nil, fmt.Errorf("zklock: %s %s: %w", op, l.path, err)
	}
}

// participant is one Acquire: its nodes, in queue order, and the session
// that owns them.
type participant struct {
	l       *Lock
	n       int
	id      string   // protected id shared by our nodes
	nodes   []string // full paths
	session int64
	token   int64
}

// enqueue creates our nodes. A create that fails with a connection error
// may still have happened: we look for our nodes by their protected id,
// and accept them only in the session that made them.
func (p *participant) enqueue(ctx context.Context) error {
	l, c := p.l, p.l.c
	prefix := l.path + "/" + nodePrefix(p.id, l.driver.LockName())
	var b backoff.BackOff
	for {
		session, err := c.awaitSessionID(ctx)
		if err != nil {
			return err
		}
		nodes, err := p.create(prefix)
		switch {
		case err == nil:
			if now := c.conn.SessionID(); now != session {
				// The session changed while the create was in flight, so
				// the nodes may belong to the new one: delete them if so
				// (an orphan there would block the queue until that session
				// ends), and create again.
				c.discard(nodes, now)
				continue
			}
			p.nodes, p.session = nodes, session
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := l.ensureParents(ctx); err != nil {
				return err
			}
			continue
		case errors.Is(err, zk.ErrClosing):
			return ErrClientClosed
		case !isRetryable(err) && !errors.Is(err, zk.ErrSessionExpired):
			return err
		}
		// The create's fate is unknown. Only the session that sent it can
		// own a node it made; another session means the node (if any)
		// went with the old one. Giving up now must not leave that node
		// behind: only its protected id names it.
		giveUp := func(err error) error {
			c.discardPrefix(l.path, protectedPrefix+p.id+"-", session)
			return err
		}
		if s, err := c.awaitSessionID(ctx); err != nil {
			return giveUp(err)
		} else if s == session {
			found, err := p.find(session)
			if err == nil && found != nil {
				p.nodes, p.session = found, session
				return nil
			}
		}
		if b == nil {
			b = c.newBackOff()
		}
		if err := sleep(ctx, b.NextBackOff()); err != nil {
			return giveUp(err)
		}
	}
}

func (p *participant) create(prefix string) ([]string, error) {
	l, conn := p.l, p.l.c.conn
	if p.n == 1 {
		n, err := conn.Create(prefix, l.data, zk.FlagEphemeralSequential, l.c.acl)
		if err != nil {
			return nil, err
		}
		return []string{n}, nil
	}
	// One multi: the n nodes exist all together or not at all, with
	// consecutive sequence numbers, so a participant never holds part of
	// its request while it waits for the rest.
	ops := make([]any, p.n)
	for i := range ops {
		ops[i] = &zk.CreateRequest{Path: prefix, Data: l.data, Acl: l.c.acl, Flags: zk.FlagEphemeralSequential}
	}
	res, err := conn.Multi(ops...)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, len(res))
	for i, r := range res {
		if r.Error != nil {
			return nil, r.Error
		}
		nodes[i] = r.String
	}
	return nodes, nil
}

// find looks for our nodes after a create whose outcome is unknown. The
// sync first lets the server we now talk to catch up with the leader.
func (p *participant) find(session int64) ([]string, error) {
	l, conn := p.l, p.l.c.conn
	_, _ = conn.Sync(l.path)
	names, _, err := conn.Children(l.path)
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
		if len(ours) > 0 {
			p.discardNames(ours, session)
		}
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
	_, stat, err := conn.Get(nodes[len(nodes)-1])
	if err != nil {
		return nil, err
	}
	if stat.EphemeralOwner != session {
		return nil, nil // not ours: never counts
	}
	return nodes, nil
}

func (p *participant) discardNames(names []string, session int64) {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = p.l.path + "/" + n
	}
	p.l.c.discard(paths, session)
}

// ensureParents creates the lock path and its missing ancestors as
// container nodes, which the server deletes once they are empty again.
func (l *Lock) ensureParents(ctx context.Context) error {
	c := l.c
	for _, dir := range parents(l.path) {
		err := c.retry(ctx, func() error {
			_, err := c.conn.CreateContainer(dir, nil, zk.FlagContainer, c.acl)
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("create parent %s: %w", dir, err)
		}
	}
	return nil
}

// await waits until our nodes hold, deciding again after every change of
// a watched sibling and every change of the session's state.
func (p *participant) await(ctx context.Context, try bool) ([]*Lease, error) {
	l, c := p.l, p.l.c
	haveToken, waited := false, false
	var b backoff.BackOff
	for {
		st := c.state()
		switch {
		case st.closed:
			return nil, ErrClientClosed
		case !st.connected:
			select {
			case <-ctx.Done():
				p.abandon()
				return nil, ctx.Err()
			case <-st.changed:
			}
			continue
		case c.conn.SessionID() != p.session:
			return nil, errRequeue // our nodes went with the old session
		}

		names, stat, err := p.read(!haveToken)
		if err != nil {
			switch {
			case errors.Is(err, zk.ErrNoNode):
				return nil, errRequeue // the path or our node is gone, so is our node
			case errors.Is(err, zk.ErrClosing):
				return nil, ErrClientClosed
			case isRetryable(err) || errors.Is(err, zk.ErrSessionExpired):
				if b == nil {
					b = c.newBackOff()
				}
				if err := sleep(ctx, b.NextBackOff()); err != nil {
					p.abandon()
					return nil, err
				}
				continue
			default:
				p.abandon()
				return nil, err
			}
		}
		b = nil
		if !haveToken {
			if stat.EphemeralOwner != p.session {
				// Never count a node of another session; if it is the
				// current one's, it must not stay in the queue either.
				c.discard(p.nodes, stat.EphemeralOwner)
				return nil, errRequeue
			}
			p.token, haveToken = stat.Czxid, true
		}
		kids, err := sortChildren(names, l.refuse)
		if err != nil {
			p.abandon()
			return nil, err
		}
		kids = p.dropStrays(kids)
		first, last, ok := p.locate(kids)
		if !ok {
			return nil, errRequeue
		}
		d := l.driver.GetsTheLock(kids, first, last)
		if d.Holds {
			leases, err := p.grant(st.epoch, waited && d.Announce)
			if err != nil || leases != nil {
				return leases, err
			}
			continue // the session changed since the read: decide again
		}
		if try {
			p.abandon()
			return nil, ErrLocked
		}
		if len(d.Watch) == 0 {
			p.abandon()
			return nil, fmt.Errorf("driver %T neither holds nor names a node to watch", l.driver)
		}
		waited = true
		plan := p.plan(kids, first, last, d)
		fast, announce, err := p.wait(ctx, st, plan)
		if err != nil {
			p.abandon()
			return nil, err
		}
		if fast {
			leases, err := p.grant(st.epoch, announce)
			if err != nil || leases != nil {
				return leases, err
			}
		}
	}
}

// read gets the children of the lock path and, the first time, the stat of
// our last node (its czxid is the token, its owner proves it is ours). The
// two requests are pipelined on the connection, so the token costs no
// extra round trip.
func (p *participant) read(withStat bool) ([]string, *zk.Stat, error) {
	conn := p.l.c.conn
	if !withStat {
		names, _, err := conn.Children(p.l.path)
		return names, nil, err
	}
	type result struct {
		stat *zk.Stat
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		_, stat, err := conn.Get(p.nodes[len(p.nodes)-1])
		ch <- result{stat, err}
	}()
	names, _, err := conn.Children(p.l.path)
	r := <-ch
	if err != nil {
		return nil, nil, err
	}
	return names, r.stat, r.err
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
	if len(strays) > 0 {
		p.discardNames(strays, p.session)
	}
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

func (p *participant) grant(epoch uint64, announce bool) ([]*Lease, error) {
	leases, err := p.l.c.grant(epoch, p.session, p.nodes, p.token)
	if leases != nil && announce {
		// Successors waiting with AwaitHold watch our last node: bumping
		// its version tells them we hold.
		if _, err := p.l.c.conn.Set(p.nodes[len(p.nodes)-1], p.l.data, -1); err != nil {
			p.l.c.log.Debug("zklock: announce hold", "node", p.nodes[len(p.nodes)-1], "err", err)
		}
	}
	return leases, err
}

// abandon deletes our nodes after a failed or cancelled acquire.
func (p *participant) abandon() {
	p.l.c.discard(p.nodes, p.session)
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

// plan prepares the wait. The fast path is safe because sequence numbers
// only grow: once queued, no node can appear ahead of ours, so if the
// driver holds on the snapshot without the watched node, it holds on
// whatever is left once that node is deleted (drivers are monotone).
func (p *participant) plan(kids []Child, first, last int, d Decision) watchPlan {
	w := watchPlan{
		paths:     make([]string, len(d.Watch)),
		fast:      make([]bool, len(d.Watch)),
		announce:  make([]bool, len(d.Watch)),
		awaitHold: d.AwaitHold,
	}
	without := make([]Child, 0, len(kids)-1)
	for i, idx := range d.Watch {
		w.paths[i] = p.l.path + "/" + kids[idx].Name
		if idx >= first {
			continue // a driver watching behind us gets no fast path
		}
		without = append(append(without[:0], kids[:idx]...), kids[idx+1:]...)
		d2 := p.l.driver.GetsTheLock(without, first-1, last-1)
		w.fast[i], w.announce[i] = d2.Holds, d2.Holds && d2.Announce
	}
	return w
}

// wait sets the watches of plan and sleeps until one fires, the session
// state changes or ctx is done. fast reports that a watched node was
// deleted and that alone makes us hold.
func (p *participant) wait(ctx context.Context, st clientState, w watchPlan) (fast, announce bool, err error) {
	conn := p.l.c.conn
	chans := make([]<-chan zk.Event, 0, len(w.paths))
	for i, path := range w.paths {
		_, stat, ch, err := conn.GetW(path)
		switch {
		case err == nil:
			if w.awaitHold && stat.Version != 0 {
				return false, false, nil // it announced before we watched
			}
			chans = append(chans, ch)
		case errors.Is(err, zk.ErrNoNode):
			return w.fast[i], w.announce[i], nil // gone already
		case isRetryable(err), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
			return false, false, nil // the loop sorts out the session
		default:
			return false, false, err
		}
	}
	var i int
	var ev zk.Event
	if len(chans) == 1 {
		select {
		case <-ctx.Done():
			return false, false, ctx.Err()
		case <-st.changed:
			return false, false, nil
		case ev = <-chans[0]:
		}
	} else {
		cases := make([]reflect.SelectCase, 0, len(chans)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.changed)})
		for _, ch := range chans {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		chosen, v, _ := reflect.Select(cases)
		switch chosen {
		case 0:
			return false, false, ctx.Err()
		case 1:
			return false, false, nil
		}
		i = chosen - 2
		ev, _ = v.Interface().(zk.Event)
	}
	if ev.Type == zk.EventNodeDeleted {
		return w.fast[i], w.announce[i], nil
	}
	return false, false, nil
}

// awaitSessionID waits for a live session and returns its id.
func (c *Client) awaitSessionID(ctx context.Context) (int64, error) {
	for {
		st := c.state()
		if st.closed {
			return 0, ErrClientClosed
		}
		if st.connected {
			if id := c.conn.SessionID(); id != 0 {
				return id, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-st.changed:
		}
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d == backoff.Stop {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// participants lists the lock's participants: holders first, then waiters,
// each in queue order. pick chooses the driver that applies to a child.
func (l *Lock) participants(ctx context.Context, pick func(Child) Driver) ([]Participant, error) {
	c := l.c
	var names []string
	err := c.retry(ctx, func() error {
		var err error
		names, _, err = c.conn.Children(l.path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zklock: participants %s: %w", l.path, err)
	}
	kids, err := sortChildren(names, l.refuse)
	if err != nil {
		return nil, fmt.Errorf("zklock: participants %s: %w", l.path, err)
	}
	held := holders(kids, pick)
	var hold, wait []Participant
	for i, k := range kids {
		node := l.path + "/" + k.Name
		var data []byte
		err := c.retry(ctx, func() error {
			var err error
			data, _, err = c.conn.Get(node)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since we listed it
		}
		if err != nil {
			return nil, fmt.Errorf("zklock: participants %s: %w", l.path, err)
		}
		pt := Participant{Node: node, Data: data, Holder: held[i], Read: k.Kind == KindRead}
		if held[i] {
			hold = append(hold, pt)
		} else {
			wait = append(wait, pt)
		}
	}
	return append(hold, wait...), nil
}

// Participant is one node queued on a lock.
type Participant struct {
	Node   string // full znode path
	Data   []byte // the holder's node data (owner identity by default)
	Holder bool   // holds the lock now (false: queued)
	Read   bool   // a read-side participant of an RWMutex
}
