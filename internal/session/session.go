// Package session is the layer under zklock's recipes: one ZooKeeper
// connection and its session, watched, with its wire reader, keeper, lease
// deadline, janitor, retries and the one table of ZooKeeper errors. The
// recipes see a narrow [Session]; every ZooKeeper call goes through [Conn].
package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// Options configures [Open]. The zklock package validates them.
type Options struct {
	Servers        []string // "host:port" each, as the user named them; resolved at each dial (hosts.go)
	Lookup         Lookup   // resolves a name; nil: net.DefaultResolver.LookupHost
	Root           string   // the chroot every path is under, "" for none (chroot.go)
	RootACL        []zk.ACL // the ACL of the chroot's own nodes, when they are missing
	SessionTimeout time.Duration
	ACL            func(path string) []zk.ACL // the ACL of each node created
	Auth           []Auth
	Dialer         zk.Dialer
	TLS            *tls.Config // nil: plaintext; else the Dialer's connections are wrapped in TLS
	Logger         *slog.Logger
	NewBackOff     func() backoff.BackOff
	LossOnDrop     bool  // a lease ends at the first disconnect
	Hooks          Hooks // never nil functions
	// Connect, if set, opens each connection instead of dialing Servers: a
	// Conn with no socket under it (internal/zkfake, for tests), with a
	// session of SessionTimeout, reporting its events as go-zookeeper's
	// event callback does. See [Session.openConnect].
	Connect func(timeout time.Duration, events func(zk.Event)) (Conn, error)
}

// Auth is one set of credentials.
type Auth struct {
	Scheme string
	Auth   []byte
}

// Hooks are what the recipes' layer hears of the session. Each runs under
// the Session's mutex, on whatever goroutine caused the event (the
// connection's own too): it must return at once and not call the Session.
type Hooks struct {
	Lost     func(h *Hold, err error)
	Released func(h *Hold)
	State    func(s State, id int64, server string)
}

// State is what a session event reports.
type State int

const (
	Connected    State = iota // a session is established on a server
	Disconnected              // the connection was lost; the session may live on
	Expired                   // the session is gone
	Closed                    // the Session was closed
)

// Session is one ZooKeeper connection and its session, watched through a
// non-blocking callback. It alone holds the connection, which it may
// replace ([Open]); [Session.Close] stops its goroutines, [janitor] and
// [keeper], and waits for them. A Session is safe for concurrent use.
type Session struct {
	acl        func(path string) []zk.ACL
	log        *slog.Logger
	newBackOff func() backoff.BackOff
	janitor    *janitor
	keeper     *keeper
	wire       *wire
	dial       dialOptions // to open a new connection
	root       rooted      // the chroot, if root.root is set
	lossOnDrop bool
	hooks      Hooks
	connect    func(time.Duration, func(zk.Event)) (Conn, error) // Options.Connect
	releases   releases                                          // deletes of released leases, sent together under load (hold.go)
	endLife    context.CancelFunc                                // gives up a TLS handshake under way (tls.go)

	mu          sync.Mutex
	zc          Conn               // the connection; only the Session sets it
	gen         uint64             // the connection's generation: events of older ones are stale
	connected   bool               // the connection has a live session
	closed      bool               // Close was called
	opening     bool               // Open has not returned: session events are not reported yet
	server      string             // the server of the last session established
	epoch       uint64             // bumped on every change of the above
	changed     chan struct{}      // closed and replaced at every bump
	held        register           // held leases, and what watches their nodes
	waiting     map[string]*waiter // the last node of each acquire under way (see held.go)
	session     int64              // the session that confirmed and deadline belong to
	confirmed   time.Time          // when the latest write the quorum acknowledged went out
	deadline    time.Time          // the leases' deadline (see [Session.Confirm]); zero: none
	downSince   time.Time          // when the session was last lost; zero while connected
	confirmedCh chan struct{}      // closed and replaced when the deadline moves
	swaps       swaps              // the sessions had, to tell one swapped on reconnect (replaced.go)

	// The keeper's schedule, so acquires wake it only when they must
	// ([Session.kickLocked]).
	keeperSeq    uint64    // bumped whenever leases or waiting grow
	sweepWant    uint64    // bumped when the session comes back on a new connection (sweep.go)
	keeperAsleep bool      // the keeper sleeps, until keeperWake
	keeperWake   time.Time // zero: no timer
}

// Open opens a session and returns once it is established and any
// credentials are accepted; or when ctx is done, with an error that
// errors.Is ctx.Err() and wraps the last dial error, if any; or, with TLS,
// at once with a *[TLSError] once every server has failed its TLS
// handshake (not by timing out). On failure nothing is left open. If no
// server takes the session for twice the session timeout (it is surely
// gone, or forgotten, as by a rebuilt ensemble), the Session opens a new
// connection, and so a new session.
func Open(ctx context.Context, o Options) (*Session, error) {
	w := newWire(o)
	var endLife context.CancelFunc
	w.life, endLife = context.WithCancel(context.Background())
	// Every server failed its TLS handshake (tls.go): no session will come.
	awaitCtx, failTLS := context.WithCancelCause(ctx)
	defer failTLS(nil)
	w.tls.setOnFail(failTLS)
	c := &Session{
		acl:         o.ACL,
		log:         o.Logger,
		newBackOff:  o.NewBackOff,
		wire:        w,
		endLife:     endLife,
		lossOnDrop:  o.LossOnDrop,
		hooks:       o.Hooks,
		connect:     o.Connect,
		changed:     make(chan struct{}),
		confirmedCh: make(chan struct{}),
		held:        newRegister(),
		waiting:     make(map[string]*waiter),
		dial:        dialOptions{servers: o.Servers, sessionTimeout: o.SessionTimeout, dialer: w.dialer, log: o.Logger},
		root:        rooted{root: o.Root, acl: o.RootACL},
	}
	c.janitor = newJanitor(c)
	c.keeper = newKeeper(c)
	// The connection's state callback takes c.mu, so it sees c.zc set.
	c.mu.Lock()
	zc, err := c.open(0)
	c.zc, c.opening = zc, true
	c.mu.Unlock()
	if err != nil {
		endLife()
		c.keeper.close()
		c.janitor.close()
		return nil, err
	}
	_, err = c.AwaitSession(awaitCtx)
	c.wire.tls.setOnFail(nil)
	var te *TLSError
	switch {
	case err == nil:
		err = c.credentials(ctx, zc, o.Auth)
	case ctx.Err() == nil && errors.As(context.Cause(awaitCtx), &te):
		// Not worth waiting out ctx for: a server that does not trust our
		// certificate, or that we do not trust, will not change its mind.
		err = te
	case !errors.Is(err, ErrClientClosed):
		err = c.wire.whyNoSession(err)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.mu.Lock()
	c.opening = false
	c.hooks.State(Connected, c.zc.SessionID(), c.server)
	if !c.connected { // lost again since
		c.hooks.State(Disconnected, c.zc.SessionID(), "")
	}
	c.mu.Unlock()
	return c, nil
}

// credentials awaits the server's acceptance of auths, which the wire sends
// (auth.go); a Connect'ed connection has no wire: it adds them to zc.
func (c *Session) credentials(ctx context.Context, zc Conn, auths []Auth) error {
	if c.connect == nil {
		return c.wire.creds.await(ctx)
	}
	for _, a := range auths {
		if err := zc.AddAuth(a.Scheme, a.Auth); err != nil {
			return fmt.Errorf("auth %s: %w", a.Scheme, err)
		}
	}
	return nil
}

// open dials a connection of generation gen: under the chroot, if there
// is one, and its watch events' paths relative to it (chroot.go).
func (c *Session) open(gen uint64) (Conn, error) {
	o := c.dial
	o.onState = func(s zk.State, server string) { c.onState(gen, s, server) }
	o.onWatch = func(ev Event) { c.onWatch(gen, c.root.relEvent(ev)) } // no root: as it is
	openConn := c.openConnect
	if c.connect == nil {
		var next func()
		if c.wire.tls.cfg != nil {
			next = c.wire.tls.nextServer
		}
		o.hosts, openConn = c.wire.res.newHosts(next), dial
	}
	zc, err := openConn(o)
	if err != nil || c.root.root == "" {
		return zc, err
	}
	return NewConn(c.root.over(zc.b)), nil
}

// Conn returns the connection every ZooKeeper call goes through.
func (c *Session) Conn() Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zc
}

// Raw returns the go-zookeeper connection under the Session and its
// chroot, for zklock's Client.Conn; nil if there is none.
func (c *Session) Raw() *zk.Conn {
	b := c.Conn().b
	if r, ok := b.(rooted); ok {
		b = r.Backend
	}
	z, _ := b.(zkBackend) // zero, with a nil c, if b is not one
	return z.c
}

// Root is the chroot every path is under, "" for none.
func (c *Session) Root() string { return c.root.root }

// ID returns the id of the current session (0 while there is none).
func (c *Session) ID() int64 { return c.Conn().SessionID() }

// Log is the Session's logger.
func (c *Session) Log() *slog.Logger { return c.log }

// ACL returns the ACL for a node to create at path.
func (c *Session) ACL(path string) []zk.ACL { return c.acl(path) }

// NewBackOff returns a fresh backoff for a retried operation.
func (c *Session) NewBackOff() backoff.BackOff { return c.newBackOff() }

// Sent returns a channel that is closed once a request that carries
// marker (a create's path) has been written to the connection, so that a
// read can follow it at once (see [markers]); stop forgets it.
func (c *Session) Sent(marker string) (sent <-chan struct{}, stop func()) {
	return c.wire.marks.expect(marker)
}

// Close ends the session: the server deletes every node of it, and every
// live lease is lost with ErrClientClosed. Close waits for the Session's
// goroutines to exit. Calling Close again returns nil.
func (c *Session) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed, c.connected = true, false
	for l := range c.held.leases {
		c.loseLocked(l, ErrClientClosed)
	}
	c.hooks.State(Closed, 0, "")
	c.bumpLocked()
	zc := c.zc
	c.mu.Unlock()

	// Closing the connection first fails the goroutines' pending requests.
	c.endLife()
	zc.Close()
	c.keeper.close()
	c.janitor.close()
	return nil
}

// Classify is the one classifier of ZooKeeper errors for every call site:
// [classify], but Closing only if the Session itself is closed. When the
// Session replaces its connection, go-zookeeper fails the old one's
// requests in flight with zk.ErrConnectionClosed or zk.ErrClosing
// (Conn.request, Conn.loop's flushRequests): those are to be retried on
// the new one (TestRetryAfterErrClosingOnReplace).
func (c *Session) Classify(err error) Outcome {
	o := classify(err)
	if o == Closing && !c.State().Closed {
		return Retry
	}
	return o
}

// onState follows the session of the connection of generation gen. It
// must never block (dialOptions.onState): it only flips state under c.mu,
// closes channels and queues work for the janitor.
func (c *Session) onState(gen uint64, s zk.State, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != c.gen {
		return
	}
	switch s {
	case zk.StateHasSession:
		if !c.downSince.IsZero() {
			c.sweepWant++ // back on a new connection: sweep the held nodes (sweep.go)
		}
		c.connected, c.downSince, c.server = true, time.Time{}, server
		c.log.Debug("zklock: session established", "server", server)
		c.hasSessionLocked(c.zc.SessionID())
		c.stateLocked(Connected, c.zc.SessionID(), server)
	case zk.StateDisconnected, zk.StateAuthFailed:
		if !c.connected {
			return
		}
		c.connected, c.downSince = false, time.Now()
		c.log.Debug("zklock: connection lost", "server", server)
		c.stateLocked(Disconnected, c.zc.SessionID(), "")
		// Leases ride out a drop until their deadline, when the keeper ends
		// them unless the session was confirmed again. WithLossOnDisconnect:
		// a holder that cannot reach the server gives up at once; the node
		// is the janitor's to delete once the session is back, or the
		// server's if the session ends first.
		if c.lossOnDrop {
			for l := range c.held.leases {
				c.loseLocked(l, ErrConnectionSuspended)
			}
		}
	case zk.StateExpired:
		c.connected = false
		if c.downSince.IsZero() {
			c.downSince = time.Now()
		}
		c.log.Debug("zklock: session expired")
		c.stateLocked(Expired, 0, "")
		c.newSessionLocked()
	default:
		return
	}
	c.bumpLocked()
}

// stateLocked reports a session event once Open, which reports its session
// as one event, has returned: none before concerns a lease.
func (c *Session) stateLocked(s State, id int64, server string) {
	if !c.opening {
		c.hooks.State(s, id, server)
	}
}

// newSessionLocked forgets the session that was: its leases are lost, and
// nothing confirmed in it counts any more. c.mu is held.
func (c *Session) newSessionLocked() {
	for l := range c.held.leases {
		c.loseLocked(l, ErrSessionExpired)
	}
	c.session, c.confirmed, c.deadline = 0, time.Time{}, time.Time{}
	c.swaps.had = 0 // the next session is a new one, not a swap
}

// replace, called by the keeper, opens a new connection, so a new session:
// go-zookeeper never does when no server takes its session (a rebuilt
// ensemble refuses the old session and the zxid it has seen, forever).
func (c *Session) replace() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	old := c.zc
	c.gen++
	gen := c.gen
	c.mu.Unlock()

	c.log.Warn("zklock: no server took the session; opening a new connection")
	old.Close()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != c.gen {
		return
	}
	zc, err := c.open(gen) // under c.mu, so that its state callback sees it in c.zc
	if err != nil {
		c.log.Warn("zklock: open a new connection", "err", err)
		c.downSince = time.Now() // try again in a while
		return
	}
	c.zc, c.connected, c.downSince = zc, false, time.Now()
	c.newSessionLocked()
	c.bumpLocked()
}

// bumpLocked wakes everyone waiting for a state change. c.mu is held.
func (c *Session) bumpLocked() {
	c.epoch++
	close(c.changed)
	c.changed = make(chan struct{})
	c.janitor.wake()
	c.keeper.wake()
}

// Snapshot is a consistent snapshot of the session's state.
type Snapshot struct {
	Connected bool
	Closed    bool
	Epoch     uint64
	Changed   <-chan struct{} // closed at the next state change
}

// State returns a snapshot of the session's state.
func (c *Session) State() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{c.connected, c.closed, c.epoch, c.changed}
}

// AwaitConnected, the recipes' one wait for a connection, waits for a live
// session and returns the state then; or fails with ErrClientClosed once
// the Session is closed, or with ctx's error.
func (c *Session) AwaitConnected(ctx context.Context) (Snapshot, error) {
	for {
		st := c.State()
		switch {
		case st.Closed:
			return st, ErrClientClosed
		case st.Connected:
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-st.Changed:
		}
	}
}

// AwaitSession waits for a live session and returns its id.
func (c *Session) AwaitSession(ctx context.Context) (int64, error) {
	for {
		st, err := c.AwaitConnected(ctx)
		if err != nil {
			return 0, err
		}
		if id := c.ID(); id != 0 {
			return id, nil
		}
		select { // connected, but the id not known yet: the next change
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-st.Changed:
		}
	}
}

// kickLocked tells the keeper that leases or waiting grew, only moving its
// timer when that will do: an acquire and release in a loop would
// otherwise wake it twice a cycle (wait, grant) for nothing, about two
// goroutine wakes per handoff with 8 clients on one mutex.
//
// That is safe: with anything held or awaited, the keeper must wake by the
// next confirmation ([nextConfirmation]), which is before the deadline (in
// time to end the leases at it: keeper.run) and before a new waiter's node
// is due for its check (keeper.confirmation: a third of the timeout after
// the wait began, itself after the latest confirmed write). A sleeping
// keeper's timer is moved no later than that ([Session.wakeByLocked]); an
// awake one compares keeperSeq under c.mu before it sleeps, and looks again
// if it changed ([keeper.sleep]): no change goes unscheduled. c.mu is held.
func (c *Session) kickLocked() {
	c.keeperSeq++
	if c.connected && c.zc != nil && c.session == c.zc.SessionID() {
		if t := c.wire.hs.timeout(); t > 0 && c.wakeByLocked(nextConfirmation(c.confirmed, c.deadline, t)) {
			return
		}
	}
	c.keeper.wake()
}

// wakeByLocked moves a sleeping keeper's timer to at if it is set later or
// not at all, without waking it, and reports false if the keeper is not
// asleep (the caller wakes it). Waking by the time something is due is
// enough: it does all that is due when it wakes (keeper.turn). Without it,
// a lease granted while the keeper sleeps with no timer is never
// confirmed: TestLeaseOutlivesSessionTimeouts fails. c.mu is held.
func (c *Session) wakeByLocked(at time.Time) bool {
	if !c.keeperAsleep {
		return false
	}
	if c.keeperWake.IsZero() || c.keeperWake.After(at) {
		c.keeperWake = at
		c.keeper.timer.Reset(time.Until(at))
	}
	return true
}

// Discard deletes job's nodes now if it can, and otherwise has the
// janitor delete them while their session lasts.
func (c *Session) Discard(job Job) { c.janitor.discard(job) }
