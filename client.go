package zklock

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
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
// leases are held or awaited, ends leases at their deadline and watches held
// nodes. [Client.Close] stops both and waits for them. A Client is safe for
// concurrent use.
type Client struct {
	s        *session.Session
	identity []byte
	trace    *Trace // never nil (noTrace)
}

// Connect opens a session with the ZooKeeper ensemble at servers
// ("host:port"; a server without a port means ZooKeeper's 2181) and returns
// once the session is established (and any [WithAuth] credentials are
// accepted), or when ctx is done, with an error for which
// errors.Is(err, ctx.Err()) holds and which also names the last failed
// dial, if any ("connection refused"). With [WithTLS], once every server
// has failed its TLS handshake, it returns at once with an error that
// names the TLS failure. Bad arguments fail with an error wrapping
// ErrInvalidArgument before any network I/O. On failure nothing is left
// open.
//
// If the Client then finds no server that takes its session for twice the
// session timeout (the session is surely gone by then, or every server has
// forgotten it, as a rebuilt ensemble does), it opens a new connection, and
// so a new session: waiting acquires queue again there.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	o, err := connectOptions(ctx, servers, opts)
	if err != nil {
		return nil, opError("connect", "", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, opError("connect", "", err)
	}
	c := &Client{identity: defaultIdentity(), trace: o.trace}
	if c.trace == nil {
		c.trace = noTrace
	}
	auth := make([]session.Auth, len(o.auth))
	for i, a := range o.auth {
		auth[i] = session.Auth{Scheme: a.scheme, Auth: a.auth}
	}
	c.s, err = session.Open(ctx, session.Options{
		Servers:        o.servers,
		SessionTimeout: o.sessionTimeout,
		ACL:            o.aclFor(),
		Auth:           auth,
		Dialer:         o.dialer,
		TLS:            o.tls,
		Logger:         o.logger,
		NewBackOff:     o.newBackOff,
		LossOnDrop:     o.lossOnDrop,
		Hooks:          c.hooks(o.logger),
		Connect:        o.connect,
	})
	if err != nil {
		return nil, opError("connect", strings.Join(o.servers, ","), err)
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

// Conn returns the underlying go-zookeeper connection, an escape hatch.
// Closing it directly leaves the Client's leases to find out through
// session events. The Client may replace it (see [Connect]).
func (c *Client) Conn() *zk.Conn { return c.s.Raw() }

// SessionID returns the id of the current session (0 while there is none).
func (c *Client) SessionID() int64 { return c.s.ID() }

// Close ends the session: the server deletes every node of it, and every
// live lease is lost with ErrClientClosed. Acquires under way return
// ErrClientClosed. Close waits for the Client's goroutines to exit. Calling
// Close again returns nil.
func (c *Client) Close() error { return opError("close", "", c.s.Close()) }

// usable checks what every acquire needs before it makes a ZooKeeper call:
// a context that is set and not done, and a Client that is not closed.
func (c *Client) usable(ctx context.Context) error {
	switch {
	case ctx == nil:
		return invalidf("nil context")
	case ctx.Err() != nil:
		return ctx.Err()
	case c.s.State().Closed:
		return ErrClientClosed
	}
	return nil
}

// defaultIdentity is the default node data: a short owner identity.
func defaultIdentity() []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return []byte(fmt.Sprintf("%s/%d", host, os.Getpid()))
}
