package zklock

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zklock/internal/session"
)

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
	Ahead  int           // participants ahead of it when its node was created (0: nobody ahead)
	Waited time.Duration // from the call until it returned (Queued: until the node was created)
	Token  int64         // Acquired only
	Err    error         // Failed only
	// Queued, on Acquired and Failed: Queued was called for this acquire
	// (once, however often it queued again). An AcquireN's Acquired says so
	// on its first lease only, so that each Queued has exactly one end.
	Queued bool
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
	SessionConnected = SessionState(session.Connected)
	// SessionDisconnected: the connection was lost; the session may live on.
	SessionDisconnected = SessionState(session.Disconnected)
	// SessionExpired: the server expired the session; its nodes are gone.
	SessionExpired = SessionState(session.Expired)
	// SessionClosed: the Client was closed.
	SessionClosed = SessionState(session.Closed)
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

// noTrace is the Trace of a Client made without [WithTrace]: every hook
// nil, so that the engine never checks the Trace itself.
var noTrace = &Trace{}

// leaseMeta is what a lease keeps for its traces.
type leaseMeta struct {
	path     string // the lock path (a MultiLock's paths, joined by commas)
	kind     Kind
	untraced bool // a shared read node's lease: its sub-leases are traced instead
	// tokens: the lock's record that its leases' tokens are asked for
	// (Lease.Token sets it): a handed-over lease then reads its token
	// before it is granted, rather than when asked (handoff.go).
	tokens *atomic.Bool
}

func (p *participant) leaseMeta() leaseMeta {
	return leaseMeta{path: p.what, kind: p.ws[0].l.pol.kind(), untraced: !p.ws[0].l.pol.traced(), tokens: &p.ws[0].l.tokens}
}

// info is the AcquireInfo of the participant as it stands.
func (p *participant) info(node string, now time.Time) AcquireInfo {
	return AcquireInfo{Path: p.what, Node: node, Kind: p.ws[0].l.pol.kind(), Ahead: p.ahead, Waited: now.Sub(p.start)}
}

// queued reports, once, that the participant must wait.
func (p *participant) queued() {
	if p.waited {
		return
	}
	p.waited = true
	if f := p.c.trace.Queued; f != nil && p.ws[0].l.pol.traced() {
		info := p.info(p.node, p.created)
		f(info)
	}
}

// acquired reports each lease granted.
func (p *participant) acquired(leases []*Lease) {
	f := p.c.trace.Acquired
	if f == nil || !p.ws[0].l.pol.traced() {
		return
	}
	now := time.Now()
	for i, l := range leases {
		info := p.info(l.node, now)
		info.Token, info.Queued = l.Token(), p.waited && i == 0
		f(info)
	}
}

// failed reports a failed acquire and returns its error, wrapped with
// what failed and where.
func (p *participant) failed(op string, err error) error {
	err = opError(op, p.what, err)
	if f := p.c.trace.Failed; f != nil && p.ws[0].l.pol.traced() {
		info := p.info(p.node, time.Now())
		info.Err, info.Queued = err, p.waited
		f(info)
	}
	return err
}

// leaseInfo is the LeaseInfo of a lease that ended with err at now.
func leaseInfo(h *session.Hold, err error, now time.Time) LeaseInfo {
	m, _ := h.Meta.(leaseMeta)
	return LeaseInfo{Path: m.path, Node: h.Nodes()[0], Kind: m.kind, Token: h.KnownToken(), Held: now.Sub(h.Granted()), Err: err}
}

// hooks connects the session's events to the Client's Trace, and logs a
// lost lease at Warn, or at Info when Close ended it: the caller asked for
// that, so a graceful shutdown warns of nothing. The session calls them
// with its mutex held: they must not call into the Client.
func (c *Client) hooks(log *slog.Logger) session.Hooks {
	t := c.trace
	return session.Hooks{
		Lost: func(h *session.Hold, err error) {
			m, _ := h.Meta.(leaseMeta)
			if errors.Is(err, ErrClientClosed) { // only Close ends a lease with it
				log.Info("zklock: lease ended by Close", "path", m.path, "node", h.Nodes()[0])
			} else {
				log.Warn("zklock: lease lost", "path", m.path, "node", h.Nodes()[0], "cause", err)
			}
			if t.Lost != nil && !m.untraced {
				t.Lost(leaseInfo(h, err, time.Now()))
			}
		},
		Released: func(h *session.Hold) {
			if m, _ := h.Meta.(leaseMeta); t.Released != nil && !m.untraced {
				t.Released(leaseInfo(h, ErrReleased, time.Now()))
			}
		},
		State: func(s session.State, id int64, server string) {
			if t.Session != nil {
				t.Session(SessionInfo{State: SessionState(s), SessionID: id, Server: server})
			}
		},
	}
}
