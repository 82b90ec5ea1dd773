package session

import (
	"errors"
	"fmt"
	"time"
)

// The lease deadline. A lease is only as good as the server's promise not
// to expire its session, which the client cannot ask for. [Session.Confirm]
// derives a time before which no ZooKeeper leader can have expired it:
// w + T - T/20, T the granted timeout, w the latest packet sent no later
// than T/3 before a write the quorum acknowledged. Leases are granted only
// before it; past it, Err reports the loss and the keeper ends them all.
// The keeper has the quorum acknowledge a write at least every T/3 while
// leases are held or awaited. The proof, step by step with the ZooKeeper
// source it relies on, and its assumptions: docs/design.md, "The lease
// deadline"; model/ checks it with spin.

// maxChecked bounds the nodes one confirmation checks. Map order picks
// them, so with more leases than this, each round checks another sample.
const maxChecked = 64

// horizon is what the deadline keeps in hand of the bound w + T.
func horizon(t time.Duration) time.Duration { return t - t/20 }

// Confirm records that the quorum acknowledged a write of ours sent at sent,
// in session, and moves the deadline forward accordingly.
func (c *Session) Confirm(sent time.Time, session int64) {
	t := c.wire.hs.timeout()
	if t <= 0 || session == 0 {
		return
	}
	w := c.wire.sentByOn(sent, sent.Add(-t/3))
	if w.IsZero() {
		return
	}
	until := w.Add(horizon(t))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.zc.SessionID() != session {
		return
	}
	if c.session != session {
		c.session, c.confirmed, c.deadline = session, time.Time{}, time.Time{}
	}
	if sent.After(c.confirmed) {
		c.confirmed = sent
	}
	if until.After(c.deadline) {
		c.deadline = until
		close(c.confirmedCh)
		c.confirmedCh = make(chan struct{})
	}
}

// keeper is the Session's goroutine for the session's health; its duties
// are the tasks of [keeper.turn].
type keeper struct {
	c                *Session
	retryAt          time.Time // after a failed confirmation or arming; the keeper's goroutine's own
	checked          time.Time // when it last checked nodes; the keeper's goroutine's own
	swept            uint64    // the sweep last done (sweep.go); likewise
	kick, stop, done chan struct{}
	// timer wakes the keeper from sleep; set only under c.mu, by the keeper
	// going to sleep and by [Session.wakeByLocked] while it sleeps.
	timer *time.Timer
}

func newKeeper(c *Session) *keeper {
	k := &keeper{c: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), timer: time.NewTimer(time.Hour)}
	k.timer.Stop()
	go k.run()
	return k
}

// wake makes the keeper look again. It never blocks.
func (k *keeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *keeper) close() {
	close(k.stop)
	<-k.done
}

// keeperView is what the keeper reads of the Session at each turn.
type keeperView struct {
	seq                            uint64 // Session.keeperSeq when read
	connected, closed              bool
	holding, waiting               bool
	session                        int64
	confirmed, deadline, downSince time.Time
	changed                        <-chan struct{}
	waitSince                      time.Time // when the longest waiter of the session began
	nodes                          []string  // nodes of ours to confirm the session with
	arm                            time.Time // when held nodes need a watch (see held.go); zero: none
	sweep                          uint64    // Session.sweepWant (sweep.go)
}

func (c *Session) keeperView() keeperView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := keeperView{
		connected: c.connected, closed: c.closed,
		holding: len(c.held.leases) > 0, waiting: len(c.waiting) > 0,
		confirmed: c.confirmed, deadline: c.deadline, downSince: c.downSince,
		changed: c.changed, seq: c.keeperSeq, arm: c.held.nextArm(),
		sweep: c.sweepWant,
	}
	if c.zc != nil {
		v.session = c.zc.SessionID()
	}
	if v.session != c.session {
		v.confirmed, v.deadline = time.Time{}, time.Time{}
	}
	// Waiters' nodes first: no watch tells a waiter its node was deleted
	// ([Session.Waiting]). Then held nodes, which their watches cover: a
	// check is the backstop. nodeGone ends what a node found gone was for.
	for n, w := range c.waiting {
		if w.session != v.session {
			continue
		}
		if v.waitSince.IsZero() || w.since.Before(v.waitSince) {
			v.waitSince = w.since
		}
		if len(v.nodes) < maxChecked {
			v.nodes = append(v.nodes, n)
		}
	}
	for l := range c.held.leases {
		if l.session == v.session && len(v.nodes) < maxChecked {
			v.nodes = append(v.nodes, l.nodes[0])
		}
	}
	return v
}

func (k *keeper) run() {
	defer close(k.done)
	defer k.timer.Stop() // nobody sets it once the keeper is awake for good (sleep's defer)
	for {
		v := k.c.keeperView()
		if v.closed {
			return
		}
		if wake, acted := k.turn(v, time.Now()); !acted && !k.sleep(wake, v) {
			return
		}
	}
}

// task is one of the keeper's duties as v shows them: when it is due and
// what to do then, or a nil act if it has nothing to do.
type task func(v keeperView, t time.Duration) (due time.Time, act func())

// turn does the first task that is due, in order of urgency, and reports that
// it acted; otherwise it returns when the next one is due (zero: none).
func (k *keeper) turn(v keeperView, now time.Time) (wake time.Time, acted bool) {
	t := k.c.wire.hs.timeout()
	for _, tk := range [...]task{k.expiry, k.sweeping, k.arming, k.confirmation, k.rejoin} {
		due, act := tk(v, t)
		switch {
		case act == nil:
		case !now.Before(due):
			act()
			return time.Time{}, true
		case wake.IsZero() || due.Before(wake):
			wake = due
		}
	}
	return wake, false
}

func (k *keeper) expiry(v keeperView, _ time.Duration) (time.Time, func()) {
	if !v.holding {
		return time.Time{}, nil
	}
	return v.deadline, func() { k.c.expireLeases(time.Now()) }
}

// arming gives held nodes a watch of their own (see held.go).
func (k *keeper) arming(v keeperView, t time.Duration) (time.Time, func()) {
	if v.arm.IsZero() || !v.connected {
		return time.Time{}, nil
	}
	return laterOf(v.arm, k.retryAt), func() {
		if !k.arm() {
			k.retryAt = time.Now().Add(t / 12)
		}
	}
}

// confirmation has the quorum confirm the session while leases are held or
// awaited ([nextConfirmation]) and, while anyone waits, checks the waiters'
// nodes at least every T/3, even if the engine's writes keep it confirmed.
func (k *keeper) confirmation(v keeperView, t time.Duration) (time.Time, func()) {
	if t <= 0 || !v.connected || !v.holding && !v.waiting || len(v.nodes) == 0 {
		return time.Time{}, nil
	}
	next := nextConfirmation(v.confirmed, v.deadline, t)
	if !v.waitSince.IsZero() {
		if c := laterOf(k.checked, v.waitSince).Add(t / 3); c.Before(next) {
			next = c
		}
	}
	return laterOf(next, k.retryAt), func() {
		k.checked = time.Now()
		if k.confirm(v.nodes, v.session, t, v.holding, v.deadline, v.changed) != nil {
			k.retryAt = time.Now().Add(t / 12)
		}
	}
}

// rejoin opens a new connection, and so a new session, when no server has
// taken the session for twice its timeout.
func (k *keeper) rejoin(v keeperView, t time.Duration) (time.Time, func()) {
	if t <= 0 || v.connected || v.downSince.IsZero() {
		return time.Time{}, nil
	}
	return v.downSince.Add(2 * t), k.c.replace
}

func laterOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// nextConfirmation is when the keeper next has the session confirmed while
// leases are held or awaited: t/3 after the last, or t/4 before the
// deadline (left for the answer) if sooner, as after an idle spell, when
// the first confirmations reach back to old packets (see the bound above).
// Once they come every t/3, the deadline is 0.62t after the latest and t/3
// is the sooner. It is always before the deadline.
func nextConfirmation(confirmed, deadline time.Time, t time.Duration) time.Time {
	next := confirmed.Add(t / 3)
	if d := deadline.Add(-t / 4); d.Before(next) {
		next = d
	}
	return next
}

// sleep waits until wake (zero: forever, unless [Session.wakeByLocked]
// sets the timer), a kick or a state change; not at all if leases or
// waiting grew since v was read ([Session.kickLocked]). It reports false
// once the keeper must stop.
func (k *keeper) sleep(wake time.Time, v keeperView) bool {
	c := k.c
	c.mu.Lock()
	if c.keeperSeq != v.seq {
		c.mu.Unlock()
		return true
	}
	c.keeperAsleep, c.keeperWake = true, wake
	// A tick left from before is dropped (a timer's channel holds one with
	// go.mod's go below 1.23); at worst one would only wake us early.
	if !k.timer.Stop() {
		select {
		case <-k.timer.C:
		default:
		}
	}
	if !wake.IsZero() {
		k.timer.Reset(time.Until(wake))
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.keeperAsleep, c.keeperWake = false, time.Time{}
		c.mu.Unlock()
	}()
	select {
	case <-k.stop:
		return false
	case <-k.kick:
	case <-v.changed:
	case <-k.timer.C:
	}
	return true
}

var errStateChanged = errors.New("zklock: the connection's state changed during the check")

// confirm has the quorum acknowledge a check of nodes, a write that changes
// nothing: nil once that confirmed the session (moving the deadline), else
// why not (a *goneNode for a node gone, whose lease or wait it ends:
// [Session.nodeGone]). With no answer within T/3 while the connection stays
// up (a follower cut off from the quorum answers pings, not writes), it
// drops the connection so go-zookeeper moves to another server, before the
// deadline if it can (with one server address a reconnect cannot help). It
// gives up once changed is closed (the state changed). The sweep uses it.
func (k *keeper) confirm(nodes []string, session int64, t time.Duration, holding bool, deadline time.Time, changed <-chan struct{}) error {
	c := k.c
	zc := c.Conn()
	sent := time.Now()
	res := make(chan error, 1)
	go func() { res <- zc.Check(nodes) }() // ends with the request, which the connection's end fails
	stall := time.NewTimer(t / 3)
	defer stall.Stop()
	// Leases end at their deadline even while the check hangs (a cut-off
	// follower holds our pings behind it: the connection fails at 2T/3).
	var expire <-chan time.Time
	var dl *time.Timer
	if holding {
		dl = time.NewTimer(time.Until(deadline))
		defer dl.Stop()
		expire = dl.C
	}
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-res:
			waiting = false
		case <-expire:
			c.expireLeases(time.Now())
			expire = nil
			// Other writes (claim.go) may have moved the deadline: the
			// leases end at the new one, also while the check hangs. Without
			// this, TestLeasesEndAtTheDeadlineWhileTheCheckHangs sees a
			// lease outlive its deadline, Done open.
			if ok, next := c.valid(session, time.Now()); ok {
				dl.Reset(time.Until(next))
				expire = dl.C
			}
		case <-stall.C:
			if c.wire.res.servers() < 2 {
				continue // nowhere else to go: dropping would only cost the reconnect
			}
			c.log.Warn("zklock: the quorum has not confirmed the session for a third of its timeout; moving to another server")
			c.wire.drop()
		case <-changed:
			// The state changed since the keeper saw the connection up. A
			// check made while it was down waits in go-zookeeper's queue for
			// the next one (Conn.queueRequest; a connection's end fails only
			// requests sent on it, Conn.flushRequests), perhaps for ever if
			// no server takes the session: waiting with it, the keeper would
			// never open a new one (rejoin). An answer on a later connection
			// confirms nothing anyway (wire.sentByOn). Without this,
			// TestKeeperRejoinsAfterTwiceTheTimeoutDown hangs.
			return errStateChanged
		}
	}
	if c.Classify(err) == Done {
		c.Confirm(sent, session)
		return nil
	}
	if g := (*goneNode)(nil); errors.As(err, &g) {
		c.nodeGone(g.path)
	}
	c.log.Debug("zklock: confirm session", "err", err)
	return err
}

// arm sets a data watch on each held node that needs one (see held.go),
// pipelined: a node found gone ends its lease. Nodes it could not reach
// are handed back for the next turn. It reports success.
func (k *keeper) arm() bool {
	c := k.c
	c.mu.Lock()
	nodes := c.held.takeArm(time.Now())
	c.mu.Unlock()
	zc := c.Conn()
	failed := make(chan string, len(nodes))
	sem := make(chan struct{}, armInFlight)
	for _, node := range nodes {
		sem <- struct{}{}
		go func(node string) {
			defer func() { <-sem }()
			_, _, err := zc.GetW(node)
			switch c.Classify(err) {
			case Done:
			case Gone:
				c.nodeGone(node)
			default:
				failed <- node
			}
		}(node)
	}
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	close(failed)
	c.mu.Lock()
	defer c.mu.Unlock()
	now, ok := time.Now(), true
	for node := range failed {
		if c.held.byNode[node] != nil {
			c.held.arm[node] = now
			ok = false
		}
	}
	return ok
}

// armInFlight bounds the watches [keeper.arm] has in flight at once.
const armInFlight = 64

func (c *Session) expireLeases(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Before(c.deadline) {
		return
	}
	for l := range c.held.leases {
		c.loseLocked(l, errLeaseExpired(c.deadline))
	}
}

func errLeaseExpired(deadline time.Time) error {
	if deadline.IsZero() {
		return fmt.Errorf("%w: the session was never confirmed", ErrLeaseExpired)
	}
	return fmt.Errorf("%w: the quorum last confirmed it until %s", ErrLeaseExpired, deadline.Format(time.RFC3339Nano))
}
