package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// Client is one ZooKeeper connection and its session, watched. Locks made
// with a Client share its session: when the session expires, or the Client
// is closed, every lease taken through it is lost.
//
// A Client follows the session's state through a non-blocking callback and is
// the only holder of the connection: every ZooKeeper call of the library goes
// through it, and it may replace the connection (see [Connect]). It owns two
// goroutines: its janitor, which deletes the nodes of abandoned acquires and
// lost leases, and its keeper, which has the quorum confirm the session while
// leases are held or awaited and ends leases at their deadline. [Client.Close]
// stops both and waits for them. A Client is safe for concurrent use.
type Client struct {
	acl        []zk.ACL
	log        *slog.Logger
	newBackOff func() backoff.BackOff
	identity   []byte
	janitor    *janitor
	keeper     *keeper
	wire       *wire
	dial       dialOptions // to open a new connection
	lossOnDrop bool
	trace      *Trace // never nil (noTrace)

	mu          sync.Mutex
	zc          conn             // the connection; only the Client sets it
	gen         uint64           // the connection's generation: events of older ones are stale
	connected   bool             // the connection has a live session
	closed      bool             // Close was called
	epoch       uint64           // bumped on every change of the above
	changed     chan struct{}    // closed and replaced at every bump
	held        register         // held leases, and what watches their nodes
	waiting     map[string]int64 // the last node of each acquire under way, and its session
	session     int64            // the session that confirmed and deadline belong to
	confirmed   time.Time        // when the latest write the quorum acknowledged went out
	deadline    time.Time        // the leases' deadline (see confirm); zero: none
	downSince   time.Time        // when the session was last lost; zero while connected
	confirmedCh chan struct{}    // closed and replaced when the deadline moves

	// The keeper's schedule, so that acquires wake it only when they must
	// (see [Client.kickLocked]).
	keeperSeq    uint64    // bumped whenever leases or waiting grow
	keeperAsleep bool      // the keeper sleeps, until keeperWake
	keeperWake   time.Time // zero: no timer
}

// Connect opens a session with the ZooKeeper ensemble at servers
// ("host:port") and returns once the session is established (and any
// [WithAuth] credentials are accepted), or when ctx is done, with an error
// for which errors.Is(err, ctx.Err()) holds. Bad arguments fail with an
// error wrapping ErrInvalidArgument before any network I/O. On failure
// nothing is left open.
//
// If the Client then finds no server that takes its session for twice the
// session timeout (the session is surely gone by then, or every server has
// forgotten it, as a rebuilt ensemble does), it opens a new connection, and
// so a new session: waiting acquires queue again there.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	o, err := connectOptions(ctx, servers, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	c := &Client{
		acl:         o.acl,
		log:         o.logger,
		newBackOff:  o.newBackOff,
		identity:    defaultIdentity(),
		wire:        &wire{dial: o.dialer},
		lossOnDrop:  o.lossOnDrop,
		trace:       o.trace,
		changed:     make(chan struct{}),
		confirmedCh: make(chan struct{}),
		held:        newRegister(),
		waiting:     make(map[string]int64),
	}
	c.dial = dialOptions{
		servers:        o.servers,
		sessionTimeout: o.sessionTimeout,
		dialer:         c.wire.dialer,
		log:            o.logger,
	}
	if c.trace == nil {
		c.trace = noTrace
	}
	c.janitor = newJanitor(c)
	c.keeper = newKeeper(c)
	// The connection's state callback takes c.mu, so it sees c.zc set.
	c.mu.Lock()
	zc, err := c.open(0)
	c.zc = zc
	c.mu.Unlock()
	if err != nil {
		c.keeper.close()
		c.janitor.close()
		return nil, fmt.Errorf("zklock: connect %v: %w", o.servers, err)
	}

	fail := func(err error) (*Client, error) {
		_ = c.Close()
		return nil, fmt.Errorf("zklock: connect %v: %w", o.servers, err)
	}
	if _, err := c.awaitSession(ctx); err != nil {
		if derr := c.wire.lastDialError(); derr != nil && !errors.Is(err, ErrClientClosed) {
			// Say why no session came: "connection refused" is what the
			// user needs to read, not only the context's deadline.
			err = fmt.Errorf("%w; last dial error: %w", err, derr)
		}
		return fail(err)
	}
	for _, a := range o.auth {
		if err := zc.addAuth(a.scheme, a.auth); err != nil {
			return fail(fmt.Errorf("auth %s: %w", a.scheme, err))
		}
	}
	return c, nil
}

// open dials a connection of generation gen.
func (c *Client) open(gen uint64) (conn, error) {
	o := c.dial
	o.onState = func(s sessionState, server string) { c.onState(gen, s, server) }
	o.onWatch = func(ev event) { c.onWatch(gen, ev) }
	return dial(o)
}

// connectOptions validates Connect's arguments and applies the options over
// the defaults.
func connectOptions(ctx context.Context, servers []string, opts []Option) (clientOptions, error) {
	o := clientOptions{
		sessionTimeout: 10 * time.Second,
		acl:            zk.WorldACL(zk.PermAll),
		newBackOff:     defaultBackOff,
		dialer:         net.DialTimeout,
	}
	switch {
	case ctx == nil:
		return o, invalidf("nil context")
	case len(servers) == 0:
		return o, invalidf("no servers")
	}
	for _, s := range servers {
		if strings.TrimSpace(s) == "" {
			return o, invalidf("empty server address in %q", servers)
		}
	}
	o.servers = withPorts(servers)
	for _, opt := range opts {
		if opt == nil {
			return o, invalidf("nil option")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o, nil
}

// defaultPort is ZooKeeper's client port, for a server given without one.
const defaultPort = "2181"

// withPorts returns servers with ZooKeeper's port added where none is
// given ("zk1" is "zk1:2181", "::1" is "[::1]:2181"), so that errors name
// the address dialled. go-zookeeper would add it too, but reads any colon
// as a port.
func withPorts(servers []string) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		s = strings.TrimSpace(s)
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(strings.Trim(s, "[]"), defaultPort)
		}
		out[i] = s
	}
	return out
}

// conn returns the connection every ZooKeeper call goes through.
func (c *Client) conn() conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zc
}

// Conn returns the underlying go-zookeeper connection, an escape hatch.
// Closing it directly leaves the Client's leases to find out through
// session events. The Client may replace it (see [Connect]).
func (c *Client) Conn() *zk.Conn { return c.conn().raw() }

// SessionID returns the id of the current session (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn().sessionID() }

// Close ends the session: the server deletes every node of it, and every
// live lease is lost with ErrClientClosed. Acquires under way return
// ErrClientClosed. Close waits for the Client's goroutines to exit. Calling
// Close again returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed, c.connected = true, false
	for l := range c.held.leases {
		c.loseLocked(l, ErrClientClosed)
	}
	c.sessionLocked(SessionClosed, "")
	c.bumpLocked()
	zc := c.zc
	c.mu.Unlock()

	// Closing the connection first fails any request the goroutines are
	// waiting on, so they see the stop promptly.
	zc.close()
	c.keeper.close()
	c.janitor.close()
	return nil
}

// classify is [classify], except that a closed connection means "closing"
// only if the Client itself is closed: the Client may have put a new
// connection in its place.
func (c *Client) classify(err error) outcome {
	o := classify(err)
	if o == closing && !c.state().closed {
		return retry
	}
	return o
}

// onState follows the session of the connection of generation gen. The
// connection calls it from its own goroutine, so it must never block: it
// only flips state under a short mutex, closes channels and queues work for
// the janitor.
func (c *Client) onState(gen uint64, s sessionState, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != c.gen {
		return
	}
	switch s {
	case stateHasSession:
		c.connected, c.downSince = true, time.Time{}
		c.log.Debug("zklock: session established", "server", server)
		c.sessionLocked(SessionConnected, server)
	case stateDisconnected:
		if !c.connected {
			return
		}
		c.connected, c.downSince = false, time.Now()
		c.log.Debug("zklock: connection lost", "server", server)
		c.sessionLocked(SessionDisconnected, "")
		if c.lossOnDrop {
			// WithLossOnDisconnect: a holder that cannot reach the server
			// gives up at once. The node is the janitor's to delete once
			// the session is back; if it ends first, the server deletes it.
			for l := range c.held.leases {
				c.loseLocked(l, ErrConnectionSuspended)
			}
		}
		// Otherwise leases ride out the drop until their deadline: the
		// keeper ends them then if the session has not been confirmed again.
	case stateExpired:
		c.connected = false
		if c.downSince.IsZero() {
			c.downSince = time.Now()
		}
		c.log.Debug("zklock: session expired")
		c.sessionLocked(SessionExpired, "")
		c.newSessionLocked()
	default:
		return
	}
	c.bumpLocked()
}

// newSessionLocked forgets the session that was: its leases are lost, and
// nothing confirmed in it counts any more. c.mu is held.
func (c *Client) newSessionLocked() {
	for l := range c.held.leases {
		c.loseLocked(l, ErrSessionExpired)
	}
	c.session, c.confirmed, c.deadline = 0, time.Time{}, time.Time{}
}

// replace closes the connection and opens a new one, with a new session:
// what go-zookeeper never does by itself when no server will take its
// session (a rebuilt ensemble refuses the old session and the zxid it has
// seen, forever). The keeper calls it.
func (c *Client) replace() {
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
	old.close()

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
func (c *Client) bumpLocked() {
	c.epoch++
	close(c.changed)
	c.changed = make(chan struct{})
	c.janitor.wake()
	c.keeper.wake()
}

// clientState is a consistent snapshot of the session's state.
type clientState struct {
	connected bool
	closed    bool
	epoch     uint64
	changed   <-chan struct{} // closed at the next state change
}

func (c *Client) state() clientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clientState{c.connected, c.closed, c.epoch, c.changed}
}

// usable checks what every acquire needs before it makes a ZooKeeper call:
// a context that is set and not done, and a Client that is not closed.
func (c *Client) usable(ctx context.Context) error {
	switch {
	case ctx == nil:
		return invalidf("nil context")
	case ctx.Err() != nil:
		return ctx.Err()
	case c.state().closed:
		return ErrClientClosed
	}
	return nil
}

// awaitSession waits for a live session and returns its id.
func (c *Client) awaitSession(ctx context.Context) (int64, error) {
	for {
		st := c.state()
		if st.closed {
			return 0, ErrClientClosed
		}
		if st.connected {
			if id := c.conn().sessionID(); id != 0 {
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

// grantGroups turns a participant's nodes into leases, one per group of
// nodes (the group's first node is the lease's Node, the others its nodes
// on other paths: a [MultiLock]'s lease), if nothing changed in the
// session since epoch (when the children that decided it were read), and
// if the session's deadline is still ahead: a lease is only handed out for
// a decision made in the connection it was read on, in a session the
// quorum has confirmed for a while yet. It returns nil if the decision
// must be made again, and errUnconfirmed if the deadline is behind.
//
// covers says, for each node in the order of groups, what watch tells the
// Client if someone deletes it (see held.go).
func (c *Client) grantGroups(epoch uint64, session int64, groups [][]string, token int64, meta leaseMeta, covers []cover) ([]*Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if !c.connected || c.epoch != epoch || c.zc.sessionID() != session {
		return nil, nil
	}
	if c.session != session || !time.Now().Before(c.deadline) {
		c.keeperSeq++
		c.keeper.wake()
		return nil, errUnconfirmed
	}
	leases := make([]*Lease, len(groups))
	now := time.Now()
	for i, g := range groups {
		l := &Lease{c: c, node: g[0], others: g[1:], token: token, session: session, done: make(chan struct{}), meta: meta, granted: now}
		c.held.add(l, covers[:len(g)])
		covers = covers[len(g):]
		leases[i] = l
	}
	if len(c.held.arm) > 0 {
		c.keeper.wake()
	}
	c.kickLocked() // its deadline timer now matters
	return leases, nil
}

// errUnconfirmed: a grant found the session's deadline behind it.
var errUnconfirmed = errors.New("session not confirmed")

// awaitConfirmed waits until the quorum confirms the session again, its
// state changes, or ctx is done.
func (c *Client) awaitConfirmed(ctx context.Context, st clientState) error {
	c.mu.Lock()
	ch := c.confirmedCh
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-st.changed:
	case <-ch:
	}
	return nil
}

// forget drops a lease that was released.
func (c *Client) forget(l *Lease) {
	c.mu.Lock()
	c.held.remove(l)
	c.mu.Unlock()
}

// lose ends a held lease with err and takes care of its node.
func (c *Client) lose(l *Lease, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseLocked(l, err)
}

// loseLocked ends a held lease with err. If the lease was live, its node is
// handed to the janitor, unless the session is gone (and the node with it).
// c.mu is held.
func (c *Client) loseLocked(l *Lease, err error) {
	if !l.end(err, c.deadline) {
		return
	}
	c.held.remove(l)
	c.lostLocked(l, err)
	if err != ErrSessionExpired && err != ErrClientClosed {
		c.janitor.enqueue(job{nodes: l.nodes(), session: l.session})
	}
}

// valid reports whether a lease of session is within its deadline at now,
// and the deadline.
func (c *Client) valid(session int64, now time.Time) (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != session {
		return false, time.Time{}
	}
	return now.Before(c.deadline), c.deadline
}

// await records that an acquire waits with node, its last, in session: the
// keeper confirms the session while anyone waits, so that a grant finds a
// deadline ahead. done undoes it.
func (c *Client) await(node string, session int64) (done func()) {
	c.mu.Lock()
	c.waiting[node] = session
	c.kickLocked()
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.waiting, node)
		c.mu.Unlock()
	}
}

// lookStart records a first look about to be sent on path (see held.go).
func (c *Client) lookStart(path string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held.lookStart(path)
}

// lookEnd drops a look recorded by lookStart.
func (c *Client) lookEnd(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held.lookEnd(path)
}

// kickLocked tells the keeper that leases or waiting grew, waking it only
// if its schedule does not already cover them. An acquire and release in a
// loop would otherwise wake it twice a cycle, for nothing.
//
// Why skipping the wake is safe: with anything held or awaited, the keeper
// must wake by the next confirmation ([nextConfirmation]), which is
// before the deadline, so also in time to end the leases at it
// (keeper.run). If it sleeps with a timer no later than that, it will look
// in time. If it is awake, it compares keeperSeq, under c.mu, before it
// goes to sleep, and looks again if it changed: so a change it did not see
// never goes unscheduled. c.mu is held.
func (c *Client) kickLocked() {
	c.keeperSeq++
	if c.keeperAsleep && !c.keeperWake.IsZero() && c.connected && c.zc != nil && c.session == c.zc.sessionID() {
		if t := c.wire.sessionTimeout(); t > 0 && !c.keeperWake.After(nextConfirmation(c.confirmed, c.deadline, t)) {
			return
		}
	}
	c.keeper.wake()
}

// defaultIdentity is the default node data: a short owner identity.
func defaultIdentity() []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return []byte(fmt.Sprintf("%s/%d", host, os.Getpid()))
}
