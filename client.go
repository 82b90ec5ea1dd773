package zklock

import (
	"context"
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
// A Client follows the session's state through a non-blocking callback, is
// the only holder of the connection (every ZooKeeper call of the library
// goes through it), and owns exactly one goroutine, its janitor, which
// deletes the nodes of abandoned acquires and lost leases; [Client.Close]
// stops it and waits for it. A Client is safe for concurrent use.
type Client struct {
	acl        []zk.ACL
	log        *slog.Logger
	newBackOff func() backoff.BackOff
	identity   []byte
	janitor    *janitor

	mu        sync.Mutex
	zc        conn                // the connection; only the Client sets it
	connected bool                // the connection has a live session
	closed    bool                // Close was called
	epoch     uint64              // bumped on every change of the above
	changed   chan struct{}       // closed and replaced at every bump
	leases    map[*Lease]struct{} // held
}

// Connect opens a session with the ZooKeeper ensemble at servers
// ("host:port") and returns once the session is established (and any
// [WithAuth] credentials are accepted), or when ctx is done, with an error
// for which errors.Is(err, ctx.Err()) holds. Bad arguments fail with an
// error wrapping ErrInvalidArgument before any network I/O. On failure
// nothing is left open.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	o, err := connectOptions(ctx, servers, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	c := &Client{
		acl:        o.acl,
		log:        o.logger,
		newBackOff: o.newBackOff,
		identity:   defaultIdentity(),
		changed:    make(chan struct{}),
		leases:     make(map[*Lease]struct{}),
	}
	c.janitor = newJanitor(c)
	zc, err := dial(dialOptions{
		servers:        servers,
		sessionTimeout: o.sessionTimeout,
		dialer:         o.dialer,
		log:            o.logger,
		onState:        c.onState,
	})
	if err != nil {
		c.janitor.close()
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	c.mu.Lock()
	c.zc = zc
	c.mu.Unlock()

	fail := func(err error) (*Client, error) {
		_ = c.Close()
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	if _, err := c.awaitSession(ctx); err != nil {
		return fail(err)
	}
	for _, a := range o.auth {
		if err := zc.addAuth(a.scheme, a.auth); err != nil {
			return fail(fmt.Errorf("auth %s: %w", a.scheme, err))
		}
	}
	return c, nil
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

// conn returns the connection every ZooKeeper call goes through.
func (c *Client) conn() conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zc
}

// Conn returns the underlying go-zookeeper connection, an escape hatch.
// Closing it directly leaves the Client's leases to find out through
// session events.
func (c *Client) Conn() *zk.Conn { return c.conn().raw() }

// SessionID returns the id of the current session (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn().sessionID() }

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
	c.closed, c.connected = true, false
	for l := range c.leases {
		l.end(ErrClientClosed)
	}
	clear(c.leases)
	c.bumpLocked()
	zc := c.zc
	c.mu.Unlock()

	// Closing the connection first fails any request the janitor is
	// waiting on, so it sees the stop promptly.
	zc.close()
	c.janitor.close()
	return nil
}

// onState follows the session. The connection calls it from its own
// goroutine, so it must never block: it only flips state under a short
// mutex, closes channels and queues work for the janitor.
func (c *Client) onState(s sessionState, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	switch s {
	case stateHasSession:
		c.connected = true
		c.log.Debug("zklock: session established", "server", server)
	case stateDisconnected:
		if !c.connected {
			return
		}
		c.connected = false
		c.log.Debug("zklock: connection lost", "server", server)
		// A holder that cannot reach the server cannot prove it still
		// holds: its lease ends now, well before the server could expire
		// the session and let another client in. Its node is the
		// janitor's to delete once the session is back; if the session
		// ends first, the server deletes it.
		for l := range c.leases {
			if l.end(ErrConnectionSuspended) {
				c.janitor.enqueue(job{nodes: []string{l.node}, session: l.session})
			}
		}
		clear(c.leases)
	case stateExpired:
		c.connected = false
		c.log.Debug("zklock: session expired")
		for l := range c.leases {
			l.end(ErrSessionExpired)
		}
		clear(c.leases)
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
	c.janitor.wake()
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
	if !c.connected || c.epoch != epoch || c.zc.sessionID() != session {
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

// forget drops a lease that was released.
func (c *Client) forget(l *Lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}

// defaultIdentity is the default node data: a short owner identity.
func defaultIdentity() []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return []byte(fmt.Sprintf("%s/%d", host, os.Getpid()))
}
