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
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// Client is one ZooKeeper connection and its session, watched. Locks made
// with a Client share its session: when the session expires, or the Client
// is closed, every lease taken through it is lost.
//
// A Client follows the connection's state through a non-blocking event
// callback and owns exactly one goroutine, which deletes the nodes of
// abandoned acquires and lost leases; [Client.Close] stops it and waits for
// it. A Client is safe for concurrent use.
type Client struct {
	conn       *zk.Conn
	acl        []zk.ACL
	log        *slog.Logger
	newBackOff func() backoff.BackOff
	identity   []byte

	mu        sync.Mutex
	connected bool                // the connection has a live session
	epoch     uint64              // bumped on every session state change
	changed   chan struct{}       // closed and replaced on every state change
	leases    map[*Lease]struct{} // held
	suspended map[*Lease]struct{} // lost to a disconnect; may yet learn of expiry
	closed    bool
	cleanups  []cleanup // nodes to delete, oldest first
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	connp     atomic.Pointer[zk.Conn]
	sessionID int64 // the session of the last StateHasSession
}

// cleanup is a set of our nodes that must go, and the session that owns
// them: if that session ends, the server has deleted them already.
type cleanup struct {
	nodes   []string
	session int64
	// parent and prefix, when set, name the nodes instead: every child of
	// parent whose name starts with prefix. A create whose reply was lost
	// leaves a node whose name nobody knows but its protected id.
	parent, prefix string
}

// Option configures a [Client].
type Option func(*clientOptions) error

type clientOptions struct {
	sessionTimeout time.Duration
	acl            []zk.ACL
	auth           []authInfo
	dialer         zk.Dialer
	logger         *slog.Logger
	newBackOff     func() backoff.BackOff
}

type authInfo struct {
	scheme string
	auth   []byte
}

// WithSessionTimeout sets the session timeout the Client asks the server for
// (the server clamps it to its own bounds). Default 10s. A non-positive
// value makes [Connect] fail with ErrInvalidArgument.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *clientOptions) error {
		if d <= 0 {
			return invalidf("session timeout %v is not positive", d)
		}
		o.sessionTimeout = d
		return nil
	}
}

// WithACL sets the ACL of the nodes the Client creates. Default
// zk.WorldACL(zk.PermAll). An empty ACL makes [Connect] fail with
// ErrInvalidArgument.
func WithACL(acl []zk.ACL) Option {
	return func(o *clientOptions) error {
		if len(acl) == 0 {
			return invalidf("empty ACL")
		}
		o.acl = acl
		return nil
	}
}

// WithAuth adds authentication, sent when the session is established and
// again on every reconnect; for example "digest" with []byte("user:pass").
// Default: none. An empty scheme makes [Connect] fail with
// ErrInvalidArgument.
func WithAuth(scheme string, auth []byte) Option {
	return func(o *clientOptions) error {
		if scheme == "" {
			return invalidf("empty auth scheme")
		}
		o.auth = append(o.auth, authInfo{scheme, auth})
		return nil
	}
}

// WithDialer sets the transport used to reach the servers (tests use it to
// inject faults). Default: net.DialTimeout. A nil dialer makes [Connect]
// fail with ErrInvalidArgument.
func WithDialer(d zk.Dialer) Option {
	return func(o *clientOptions) error {
		if d == nil {
			return invalidf("nil dialer")
		}
		o.dialer = d
		return nil
	}
}

// WithLogger sets the logger for state transitions (Debug), retries and
// failed cleanups (Warn), and go-zookeeper's own messages (Debug). Default:
// silent. A nil logger means silent.
func WithLogger(l *slog.Logger) Option {
	return func(o *clientOptions) error {
		o.logger = l
		return nil
	}
}

// WithRetry sets the backoff used to retry ZooKeeper errors that may go away
// (connection loss, no server). Each retried operation gets a fresh BackOff
// from newBackOff; the retries are always bounded by the caller's context.
// Default: exponential, 50ms doubling to at most 2s, with ±50% jitter, no
// time limit of its own. A nil function makes [Connect] fail with
// ErrInvalidArgument.
func WithRetry(newBackOff func() backoff.BackOff) Option {
	return func(o *clientOptions) error {
		if newBackOff == nil {
			return invalidf("nil backoff")
		}
		o.newBackOff = newBackOff
		return nil
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 2 * time.Second
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	return b
}

// Connect opens a session with the ZooKeeper ensemble at servers
// ("host:port") and returns once the session is established (and any
// [WithAuth] credentials are accepted), or when ctx is done, with an error
// for which errors.Is(err, ctx.Err()) holds. Bad arguments fail with an
// error wrapping ErrInvalidArgument before any network I/O.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	if ctx == nil {
		return nil, invalidf("nil context")
	}
	if len(servers) == 0 {
		return nil, invalidf("no servers")
	}
	for _, s := range servers {
		if strings.TrimSpace(s) == "" {
			return nil, invalidf("empty server address in %q", servers)
		}
	}
	o := clientOptions{
		sessionTimeout: 10 * time.Second,
		acl:            zk.WorldACL(zk.PermAll),
		newBackOff:     defaultBackOff,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil option")
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("zklock: connect: %w", err)
		}
	}
	log := o.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}

	c := &Client{
		acl:        o.acl,
		log:        log,
		newBackOff: o.newBackOff,
		identity:   defaultIdentity(),
		changed:    make(chan struct{}),
		leases:     make(map[*Lease]struct{}),
		suspended:  make(map[*Lease]struct{}),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	dialer := o.dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	conn, _, err := zk.Connect(servers, o.sessionTimeout,
		zk.WithEventCallback(c.onEvent),
		zk.WithLogger(zkLogger{log}),
		zk.WithLogInfo(false),
		zk.WithDialer(dialer))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	c.conn = conn
	c.connp.Store(conn)
	c.mu.Lock()
	if c.connected {
		c.sessionID = conn.SessionID()
	}
	c.mu.Unlock()
	go c.cleaner()

	if err := c.awaitSession(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	for _, a := range o.auth {
		if err := conn.AddAuth(a.scheme, a.auth); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("zklock: connect %v: auth %s: %w", servers, a.scheme, err)
		}
	}
	return c, nil
}

// awaitSession waits until the connection has a session.
func (c *Client) awaitSession(ctx context.Context) error {
	for {
		st := c.state()
		if st.closed {
			return ErrClientClosed
		}
		if st.connected {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.changed:
		}
	}
}

// Conn returns the underlying go-zookeeper connection, an escape hatch.
// Closing it directly leaves the Client's leases to find out through
// session events.
func (c *Client) Conn() *zk.Conn { return c.conn }

// SessionID returns the id of the current session (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// Close ends the session: the server deletes every node of it, and every
// live lease is lost with ErrClientClosed. Acquires under way return
// ErrClientClosed. Close waits for the Client's goroutine to exit. Calling
// Close again returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.connected = false
	for l := range c.leases {
		l.lose(ErrClientClosed)
	}
	clear(c.leases)
	clear(c.suspended)
	c.cleanups = nil
	c.bumpLocked()
	close(c.stop)
	c.mu.Unlock()

	// Closing the connection first fails any request the cleaner is
	// waiting on, so it sees stop promptly.
	c.conn.Close()
	<-c.done
	return nil
}

// onEvent follows the session's state. go-zookeeper calls it from its
// connection loop, so it must never block: it only flips state under a
// short mutex and closes channels.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		c.connected = true
		if conn := c.connp.Load(); conn != nil {
			c.sessionID = conn.SessionID()
		}
		clear(c.suspended) // the same session is back: they were not expired
		c.log.Debug("zklock: session established", "session", fmt.Sprintf("%#x", c.sessionID), "server", ev.Server)
	case zk.StateDisconnected, zk.StateAuthFailed:
		if !c.connected {
			return
		}
		c.connected = false
		c.log.Debug("zklock: connection lost", "state", ev.State.String(), "server", ev.Server)
		// A holder that cannot reach the server cannot prove it still
		// holds: its lease ends now, well before the server could expire
		// the session and let another client in. Its node is deleted once
		// the session is back, unless the session ends first.
		for l := range c.leases {
			if l.lose(ErrConnectionSuspended) {
				c.suspended[l] = struct{}{}
				c.cleanups = append(c.cleanups, cleanup{nodes: []string{l.node}, session: l.session})
			}
		}
		clear(c.leases)
	case zk.StateExpired:
		c.connected = false
		c.log.Debug("zklock: session expired")
		for l := range c.leases {
			l.lose(ErrSessionExpired)
		}
		clear(c.leases)
		// Leases already lost to the disconnect that came first now know
		// the worse news.
		for l := range c.suspended {
			l.expire()
		}
		clear(c.suspended)
	default:
		return
	}
	c.bumpLocked()
}

// bumpLocked wakes everyone waiting for a state change. c.mu is held.
func (c *Client) bumpLocked() {
	c.epoch++
	close(c.changed)
	c.changed = make(chan struct{})
	select {
	case c.kick <- struct{}{}:
	default:
	}
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

// grant turns a participant's nodes into leases if nothing changed in the
// session since epoch (when the children that decided it were read): a
// lease is only handed out for a decision made in the connection it was read
// on. It returns nil if the decision must be made again.
func (c *Client) grant(epoch uint64, session int64, nodes []string, token int64) ([]*Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if !c.connected || c.epoch != epoch || c.conn.SessionID() != session {
		return nil, nil
	}
	leases := make([]*Lease, len(nodes))
	for i, n := range nodes {
		l := &Lease{c: c, node: n, token: token, session: session, done: make(chan struct{})}
		c.leases[l] = struct{}{}
		leases[i] = l
	}
	return leases, nil
}

// forget drops a lease that ended.
func (c *Client) forget(l *Lease) {
	c.mu.Lock()
	delete(c.leases, l)
	delete(c.suspended, l)
	c.mu.Unlock()
}

// discard deletes nodes of ours that must go (a cancelled or failed
// acquire). It tries at once when the session is up, and hands what it could
// not delete to the Client's cleaner, which retries until the nodes are gone
// or the session that owns them has ended.
func (c *Client) discard(nodes []string, session int64) {
	if len(nodes) == 0 {
		return
	}
	c.discardJob(cleanup{nodes: nodes, session: session})
}

// discardPrefix deletes, as discard does, every child of parent whose name
// starts with prefix, in session: the node, if any, of a create whose
// outcome is unknown.
func (c *Client) discardPrefix(parent, prefix string, session int64) {
	c.discardJob(cleanup{session: session, parent: parent, prefix: prefix})
}

func (c *Client) discardJob(job cleanup) {
	if c.state().connected {
		if err := c.deleteJob(job); err == nil || !isRetryable(err) {
			if err != nil {
				c.log.Warn("zklock: delete abandoned node", "nodes", job.nodes, "prefix", job.prefix, "err", err)
			}
			return
		}
	}
	c.mu.Lock()
	if !c.closed {
		c.cleanups = append(c.cleanups, job)
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

// deleteJob deletes the nodes of job, finding them first if it names them
// by prefix.
func (c *Client) deleteJob(job cleanup) error {
	if job.prefix == "" {
		return c.deleteNodes(job.nodes, job.session)
	}
	if c.conn.SessionID() != job.session {
		return nil // the server deleted them when the session ended
	}
	_, _ = c.conn.Sync(job.parent) // see what the leader has
	names, _, err := c.conn.Children(job.parent)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	var nodes []string
	for _, n := range names {
		if strings.HasPrefix(n, job.prefix) {
			nodes = append(nodes, job.parent+"/"+n)
		}
	}
	return c.deleteNodes(nodes, job.session)
}

// deleteNodes deletes nodes owned by session; nodes already gone, or gone
// with their session, are fine.
func (c *Client) deleteNodes(nodes []string, session int64) error {
	for _, n := range nodes {
		if c.conn.SessionID() != session {
			return nil // the server deleted them when the session ended
		}
		if err := c.conn.Delete(n, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			if errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) {
				return nil
			}
			return err
		}
	}
	return nil
}

// cleaner is the Client's one goroutine: it deletes the nodes handed to it,
// retrying with backoff while the session that owns them lives.
func (c *Client) cleaner() {
	defer close(c.done)
	var b backoff.BackOff
	for {
		c.mu.Lock()
		var job cleanup
		have := len(c.cleanups) > 0 && c.connected
		if have {
			job = c.cleanups[0]
		}
		c.mu.Unlock()
		if !have {
			select {
			case <-c.stop:
				return
			case <-c.kick:
				continue
			}
		}
		err := c.deleteJob(job)
		if err == nil || !isRetryable(err) {
			if err != nil {
				c.log.Warn("zklock: cleanup gave up", "nodes", job.nodes, "err", err)
			}
			c.mu.Lock()
			if len(c.cleanups) > 0 { // only Close empties the queue otherwise
				c.cleanups = c.cleanups[1:]
			}
			c.mu.Unlock()
			b = nil
			continue
		}
		if b == nil {
			b = c.newBackOff()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			d = time.Second
		}
		c.log.Warn("zklock: cleanup will retry", "nodes", job.nodes, "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// defaultIdentity is the default node data: a short owner identity.
func defaultIdentity() []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return []byte(fmt.Sprintf("%s/%d", host, os.Getpid()))
}

// zkLogger sends go-zookeeper's messages to slog at Debug.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zk: " + fmt.Sprintf(format, args...))
}
