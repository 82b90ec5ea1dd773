package zklock

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
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

	// zxidless: the latest grant came without its zxid (ZooKeeper before
	// 3.9), for a connection whose wire has read no notification yet
	// ([participant.zxidless]).
	zxidless atomic.Bool
}

// Connect opens a session with the ZooKeeper ensemble at servers and
// returns once the session is established (and any [WithAuth] credentials
// are accepted), or when ctx is done, with an error for which
// errors.Is(err, ctx.Err()) holds and which also names the last failed
// lookup of a name and the last failed dial, if any ("no such host",
// "connection refused"). With [WithTLS], once every server has failed its
// TLS handshake, it returns at once with an error that names the TLS
// failure. Bad arguments fail with an error wrapping ErrInvalidArgument
// before any network I/O. On failure nothing is left open.
//
// servers is a connect string as ZooKeeper's Java client takes it, whole
// or split across elements: []string{"zk1:2181,zk2:2181,zk3:2181/apps/billing"}
// is []string{"zk1:2181", "zk2:2181", "zk3:2181/apps/billing"}. A server
// without a port is on ZooKeeper's 2181; IPv6 addresses are bracketed
// ("[::1]:2181"). The suffix from the first "/", after the last server,
// is the chroot: every path the Client uses is under it, and every path it
// returns ([Lease.Node], [Participant], [OpError], [Trace] events) is
// relative to it, as the Java client's are; "/" is none. A chroot that
// does not exist is created when a lock first needs it, its missing nodes
// as container nodes (as a lock path's ancestors are) with [WithACL]'s
// ACL. A chroot ZooKeeper would refuse (a trailing "/", an empty, "." or
// ".." element, a character it rejects), or a chroot after any server but
// the last, fails with ErrInvalidArgument.
//
// Names are resolved at every connection attempt, not once (see
// [WithHostResolver]): a name that does not resolve is logged at Warn and
// skipped while the others are tried (Connect waits, for ctx, until one
// answers), and a name whose addresses change (a server moved) is dialed
// at its new addresses at the next attempt, so a Client follows an
// ensemble whose servers move one by one without losing its session.
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
		Lookup:         o.lookup,
		Root:           o.chroot,
		RootACL:        o.acl,
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
		return nil, opError("connect", strings.Join(o.servers, ",")+o.chroot, err)
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
	if ctx == nil {
		return o, invalidf("nil context")
	}
	cs, err := parseConnectString(servers)
	if err != nil {
		return o, err
	}
	o.servers, o.chroot = cs.servers, cs.chroot
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

// Conn returns the underlying go-zookeeper connection, an escape hatch. It
// is not chrooted: its paths are the server's, so a path of the Client's
// is [Client.Chroot] + path there. Closing it directly leaves the Client's
// leases to find out through session events. The Client may replace it
// (see [Connect]); what was set on it (credentials added with its AddAuth,
// for one) does not carry over to the new one: give credentials with
// [WithAuth], which go out on every connection.
func (c *Client) Conn() *zk.Conn { return c.s.Raw() }

// Chroot returns the chroot of the connect string given to [Connect]
// ("/apps/billing"), under which every path the Client uses lies, or ""
// for none.
func (c *Client) Chroot() string { return c.s.Root() }

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
