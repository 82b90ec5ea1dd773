package session

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// TLSError is a failed TLS handshake with one server: untrusted, refusing
// our certificate, or plaintext. Err is crypto/tls's (or crypto/x509's).
type TLSError struct {
	Addr string // the server dialed, as named in the connect string
	Err  error
}

func (e *TLSError) Error() string {
	msg := "tls handshake with " + e.Addr + ": " + e.Err.Error()
	if errors.Is(e.Err, io.EOF) {
		// A plaintext ZooKeeper reads a ClientHello as a length far
		// above its jute.maxbuffer, and closes the connection.
		msg += " (the server closed the connection: is it a plaintext port?)"
	}
	return msg
}
func (e *TLSError) Unwrap() error { return e.Err }

// tlsState is the wire's TLS, and what [tlsState.failed] counts under mu.
type tlsState struct {
	cfg *tls.Config // the user's; nil: plaintext

	mu      sync.Mutex
	fails   map[string]bool // servers failed since a connect response was read
	verdict *TLSError       // what made it every server, until reported
	onFail  func(error)     // what to report it to, set while Open waits
}

// secure runs the TLS handshake on raw, just dialed to addr, within ctx and
// by (handshakes.bound; zero: the dial's timeout), or closes raw. An empty
// ServerName is set, in a clone of the config, to addr's host as the user
// named it (the dialer is handed names: hosts.go), not its address.
func (t *tlsState) secure(ctx context.Context, raw net.Conn, addr string, by time.Time, timeout time.Duration) (net.Conn, *TLSError) {
	cfg := t.cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = addr
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if by.IsZero() {
		by = time.Now().Add(max(timeout, minHandshake))
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, &TLSError{Addr: addr, Err: err}
	}
	return tlsConn{tc, raw}, nil
}

// tlsConn's Close closes the socket at once: tls.Conn's would first send a
// close_notify alert, which can block (up to five seconds) on a server that
// reads nothing, a paused one, and the keeper closes connections (drop).
// go-zookeeper has sent its close request before it closes one for good.
type tlsConn struct {
	*tls.Conn
	sock net.Conn
}

func (c tlsConn) Close() error { return c.sock.Close() }

// refusedTLS reports whether err, read or written before the connect
// response, is the server's TLS alert: in TLS 1.3 the client's handshake
// ends before the server checks its certificate, so a refusal ("remote
// error: tls: bad certificate", "certificate required") comes on the first
// read, as a net.OpError with Op "remote error" (Conn.readRecordOrCCS).
func refusedTLS(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// failed records a failed handshake with err.Addr; once as many servers as
// names have failed one since a connect response was read, err is the
// verdict that ends Open's wait (see [Open] and nextServer): an untrusted
// or refusing server will not change its mind. A timeout does not count: a
// slow or paused server may answer next time.
func (t *tlsState) failed(err *TLSError, names int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if isTimeout(err) {
		return
	}
	t.fails[err.Addr] = true
	if names > 0 && len(t.fails) >= names {
		t.verdict = err
	}
}

// answered forgets the failures: a server answered a connect request.
func (t *tlsState) answered() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.fails)
	t.verdict = nil
}

func (t *tlsState) setOnFail(f func(error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onFail = f
}

// nextServer reports failed's verdict to Open when go-zookeeper asks for
// the next server (Conn.connect, first thing), not when the failure is seen:
// Open then closes, and go-zookeeper's Close waits up to a second for its
// close request's answer, which comes only once the loop is in connect,
// failing requests queued without a connection (flushUnsentRequests). Told
// in authenticate, as a TLS 1.3 refusal is, Open's Close would always wait.
func (t *tlsState) nextServer() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.verdict; v != nil && t.onFail != nil {
		t.verdict = nil
		t.onFail(v)
	}
}

// isTimeout reports a deadline's error, ours or the handshake's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
