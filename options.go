package zklock

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
)

// Option configures a [Client].
type Option func(*clientOptions) error

type clientOptions struct {
	servers        []string // the names given to Connect, with ports (connectstring.go)
	chroot         string   // "" for none
	lookup         session.Lookup
	sessionTimeout time.Duration
	acl            []zk.ACL
	aclProvider    func(path string) []zk.ACL
	auth           []authInfo
	dialer         zk.Dialer
	tls            *tls.Config
	logger         *slog.Logger
	newBackOff     func() backoff.BackOff
	lossOnDrop     bool
	trace          *Trace
	// connect, if set, replaces the dial: tests run a Client on
	// internal/zkfake through it (export_test.go's WithFakeForTest).
	connect func(timeout time.Duration, events func(zk.Event)) (session.Conn, error)
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

// WithACLProvider sets the ACL of each node the Client creates, by the
// node's path, as Apache Curator's ACLProvider.getAclForPath does: lock
// nodes (named by the path they are created with, before ZooKeeper's
// sequence) and the container parents the Client creates for them. Where
// it returns an empty ACL, the node gets [WithACL]'s. Under a chroot (see
// [Connect]) it is asked with the paths as the user wrote them, relative
// to the chroot; a missing chroot's own nodes get WithACL's ACL, not the
// provider's. Default: none, every
// node gets WithACL's. A nil function makes [Connect] fail with
// ErrInvalidArgument. It is called on the goroutine of the call that
// creates the node, and must be safe for concurrent use.
func WithACLProvider(acl func(path string) []zk.ACL) Option {
	return func(o *clientOptions) error {
		if acl == nil {
			return invalidf("nil ACL provider")
		}
		o.aclProvider = acl
		return nil
	}
}

// aclFor returns the ACL of a node to create at a path.
func (o clientOptions) aclFor() func(path string) []zk.ACL {
	acl, provider := o.acl, o.aclProvider
	if provider == nil {
		return func(string) []zk.ACL { return acl }
	}
	return func(path string) []zk.ACL {
		if a := provider(path); len(a) > 0 {
			return a
		}
		return acl
	}
}

// WithAuth adds authentication, sent on every connection with its connect
// request, as ZooKeeper's Java client sends it, so that no request is made
// without it (also on the connection that replaces one no server took);
// for example "digest" with []byte("user:pass"). [Connect] fails with an
// error wrapping zk.ErrAuthFailed if the server refuses it (a scheme it
// has no provider for). Default: none. An empty scheme makes [Connect]
// fail with ErrInvalidArgument.
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

// WithHostResolver sets the lookup that resolves the servers' names, at
// every connection attempt (see [Connect]): it is called with a name of
// the connect string ("zk1", never an IP address) and returns its
// addresses (IP addresses, as net.Resolver.LookupHost does); an error, or
// no address, skips the name for that attempt. Users with their own
// discovery supply one, and so do tests that move a server without
// touching /etc/hosts. Its ctx ends after 3 s, or when the Client closes.
// It is called on the connection's goroutine, one name at a time, and must
// be safe to call again at any time. Default: net.DefaultResolver.LookupHost.
// A nil lookup makes [Connect] fail with ErrInvalidArgument.
func WithHostResolver(lookup func(ctx context.Context, host string) ([]string, error)) Option {
	return func(o *clientOptions) error {
		if lookup == nil {
			return invalidf("nil host resolver")
		}
		o.lookup = lookup
		return nil
	}
}

// WithTLS makes the Client connect over TLS, to ZooKeeper's
// secureClientPort, with cfg: its RootCAs to trust the servers and, if the
// servers ask for one, a client certificate in Certificates, which
// ZooKeeper's X509AuthenticationProvider takes as the Client's identity
// (an ACL names it with Scheme "x509" and the certificate's subject as
// ZooKeeper writes it: RFC 2253, most specific first, no spaces, such as
// "CN=billing,O=example"). cfg is cloned at each connection, never
// changed; an empty ServerName is the host of the server dialed, as given
// to [Connect]. It composes with [WithDialer]: the dialer's connection is
// wrapped in TLS. The handshake's bound (the session timeout over the
// number of servers, at least a second) covers the TLS handshake and
// ZooKeeper's together.
//
// A TLS handshake that fails (a server not trusted, a client certificate
// refused, a plaintext port) is named in Connect's error, which wraps
// crypto/tls's or crypto/x509's; once every server has failed one,
// Connect returns at once rather than when ctx is done. Default: no TLS. A
// nil cfg makes [Connect] fail with ErrInvalidArgument.
func WithTLS(cfg *tls.Config) Option {
	return func(o *clientOptions) error {
		if cfg == nil {
			return invalidf("nil TLS config")
		}
		o.tls = cfg
		return nil
	}
}

// WithLogger sets the logger for state transitions (Debug), retries,
// failed cleanups, lost leases and server names that do not resolve
// (Warn), leases ended by [Client.Close] and names that resolve to new
// addresses (Info), and go-zookeeper's own messages (Debug). Default:
// silent. A nil logger means silent.
func WithLogger(l *slog.Logger) Option {
	return func(o *clientOptions) error {
		o.logger = l
		return nil
	}
}

// WithLossOnDisconnect ends every lease at the first disconnect, with
// ErrConnectionSuspended, as Apache Curator's "standard" connection-state
// policy does. Default: a lease rides out a disconnect and ends only at its
// deadline ([Lease.ValidUntil]), so that a leader election or a rolling
// restart of the servers, which drop connections but keep sessions, costs no
// lock; choose this option when a holder must stop at the first sign of
// trouble.
func WithLossOnDisconnect() Option {
	return func(o *clientOptions) error {
		o.lossOnDrop = true
		return nil
	}
}

// LockOption configures a lock ([NewMutex], [NewRWMutex], [NewSemaphore],
// [NewLock]).
type LockOption func(*lockOptions) error

type lockOptions struct {
	data   []byte
	set    bool
	sem    *semOptions // WithSemaphoreLayout, WithSharedCount (semaphore_layout.go)
	shared bool        // WithSharedReads (rwlock_shared.go)
}

// only refuses the options of recipes other than the caller's: semaphore
// and rwmutex say whether the caller is a Semaphore or an RWMutex.
func (o lockOptions) only(semaphore, rwmutex bool) error {
	if o.sem != nil && !semaphore {
		return invalidf("WithSemaphoreLayout and WithSharedCount apply to a Semaphore only")
	}
	if o.shared && !rwmutex {
		return invalidf("WithSharedReads applies to an RWMutex only")
	}
	return nil
}

// maxNodeData bounds node data well below ZooKeeper's default 1 MiB packet
// limit.
const maxNodeData = 512 << 10

// WithNodeData sets the data stored in each of the lock's nodes, which
// Participants reports. The slice is copied: changing it afterwards changes
// nothing. Default: a short owner identity, "<hostname>/<pid>". More than
// 512 KiB fails with ErrInvalidArgument.
func WithNodeData(data []byte) LockOption {
	data = bytes.Clone(data)
	return func(o *lockOptions) error {
		if len(data) > maxNodeData {
			return invalidf("node data of %d bytes exceeds %d", len(data), maxNodeData)
		}
		o.data, o.set = data, true
		return nil
	}
}
