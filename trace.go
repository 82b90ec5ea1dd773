package zklock

import "time"

// Trace is a set of hooks that a [Client] calls as its locks and its session
// change state, after [net/http/httptrace.ClientTrace]: the library depends
// on no metrics or tracing package, and a program connects whichever it
// uses (the module github.com/zkrecipes/zklock/zklockotel connects
// OpenTelemetry). Every field is optional; a nil field costs nothing.
//
// The hooks run synchronously on the goroutine that caused the event (an
// Acquire's caller, a Release's caller, the Client's own goroutines for
// losses and session changes). They must return quickly and must not call
// into zklock. A Trace must not be changed after it is passed to
// [WithTrace].
type Trace struct {
	// Queued is called when an acquire has created its node and must wait:
	// Ahead > 0 participants hold or are queued before it.
	Queued func(AcquireInfo)
	// Acquired is called when an acquire returns a lease: Acquire,
	// TryAcquire, Campaign, Downgrade, and AcquireN once per lease.
	Acquired func(AcquireInfo)
	// Failed is called when an acquire returns an error (Err: the context's,
	// ErrLocked, ...).
	Failed func(AcquireInfo)
	// Released is called when [Lease.Release] ends a held lease.
	Released func(LeaseInfo)
	// Lost is called when a lease ends without Release; Err is the cause, as
	// [Lease.Err] reports it.
	Lost func(LeaseInfo)
	// Session is called when the connection or the session changes state.
	Session func(SessionInfo)
}

// AcquireInfo describes one acquire, for [Trace.Queued], [Trace.Acquired]
// and [Trace.Failed].
type AcquireInfo struct {
	Path   string        // the lock path
	Node   string        // the node the acquire created ("" if none)
	Kind   Kind          // KindMutex, KindRead, KindWrite, KindLease, KindLatch
	Ahead  int           // participants ahead of it when its node was created (0: held at once)
	Waited time.Duration // from the call until it returned (Queued: until the node was created)
	Token  int64         // Acquired only
	Err    error         // Failed only
}

// LeaseInfo describes a lease that ended, for [Trace.Released] and
// [Trace.Lost].
type LeaseInfo struct {
	Path  string
	Node  string
	Kind  Kind
	Token int64
	Held  time.Duration // from the grant until the lease ended
	Err   error         // ErrReleased for Released; the cause for Lost
}

// SessionState is the state of a Client's connection and session, as
// [Trace.Session] reports it.
type SessionState int

const (
	// SessionConnected: a session is established on a server.
	SessionConnected SessionState = iota
	// SessionDisconnected: the connection was lost; the session may live on.
	SessionDisconnected
	// SessionExpired: the server expired the session; its nodes are gone.
	SessionExpired
	// SessionClosed: the Client was closed.
	SessionClosed
)

func (s SessionState) String() string {
	switch s {
	case SessionConnected:
		return "connected"
	case SessionDisconnected:
		return "disconnected"
	case SessionExpired:
		return "expired"
	case SessionClosed:
		return "closed"
	}
	return "unknown"
}

// SessionInfo describes a change of a Client's session, for
// [Trace.Session].
type SessionInfo struct {
	State     SessionState
	SessionID int64  // the session's id (a new one after SessionExpired and a reconnect)
	Server    string // host:port of the server, "" when disconnected
}

// WithTrace sets the hooks the Client calls on lock and session events.
// Default: none. A nil Trace means none.
func WithTrace(t *Trace) Option {
	return func(o *clientOptions) error {
		o.trace = t
		return nil
	}
}
