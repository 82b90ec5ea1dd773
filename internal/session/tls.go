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

// TLSError is a failed TLS handshake with one server: the server was not
// trusted, it refused the client's certificate, or it does not speak TLS
// (a plaintext port). It wraps crypto/tls's (or crypto/x509's) error.
type TLSError struct {
	Addr string // the server dialed, as named in the connect string
	Err  error
}

func (e *TLSError) Error() string {
	msg := "tls handshake with " + e.Addr + ": " + e.Err.Error()
	if errors.Is(e.Err, io.EOF) {
		// What a plaintext ZooKeeper does with a ClientHello: it reads a
		// length far above its jute.maxbuffer and closes the connection.
		msg += " (the server closed the connection: is it a plaintext port?)"
	}
	return msg
}
func (e *TLSError) Unwrap() error { return e.Err }

// tlsState is the wire's TLS: the user's configuration (nil: plaintext),
// and under mu the servers whose TLS handshake failed since a connect
// response was last read, the failure that made it every server, until
// reported, and what to call with it (set while Open waits).
type tlsState struct {
	cfg *tls.Config

	mu      sync.Mutex
	fails   map[string]bool
	verdict *TLSError
	onFail  func(error)
}

// secure runs the TLS handshake on raw, a connection just dialed to addr,
// by the handshake's bound (see handshakes.bound; by zero: none, and then
// the dial's own timeout bounds it) and ctx, and returns the TLS
// connection. On failure raw is closed. The configuration is cloned:
// ServerName, when the user left it empty, is the host of addr, the server
// as the user named it (the dialer is handed names: hosts.go), not the
// address it resolved to.
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

// tlsConn is a TLS connection whose Close closes the socket at once: TLS's
// own would first send a close_notify alert, which can block (up to five
// seconds) on a server that reads nothing, a paused one, and the wire
// closes connections from the keeper (drop). go-zookeeper has sent its
// close request already when it closes a connection for good.
type tlsConn struct {
	*tls.Conn
	sock net.Conn
}

func (c tlsConn) Close() error { return c.sock.Close() }

// refusedTLS reports a read or write error, before the connect response,
// that is the server's TLS alert: with TLS 1.3 the client's handshake ends
// before the server has checked the client's certificate, and a refusal
// comes as an alert on the first read ("remote error: tls: bad
// certificate", "certificate required"). crypto/tls returns it as a
// net.OpError whose Op is "remote error" (Conn.readRecordOrCCS).
func refusedTLS(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// failed records a failed TLS handshake with err.Addr, and if every server
// (names of them) has now failed one since a connect response was last read,
// makes it the verdict that ends Open's wait for a session (see [Open] and
// nextServer): a server that is not trusted, or that refuses the client's
// certificate, will not change its mind on the next try. A timeout does not
// count: a slow or paused server may answer next time.
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

// setOnFail sets what nextServer reports a verdict to (nil: nothing).
func (t *tlsState) setOnFail(f func(error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onFail = f
}

// nextServer reports the verdict of failed, if any, to Open. It runs when
// go-zookeeper asks for the next server (Conn.connect, first thing), not when
// the failure is seen: Open then closes the connection, and go-zookeeper's
// Close waits up to a second for its close request to be answered, which
// happens only once the loop is in connect, where requests queued without a
// connection are failed (flushUnsentRequests). Told from inside authenticate,
// as a TLS 1.3 refusal is, Open's Close would wait that second every time.
func (t *tlsState) nextServer() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.verdict; v != nil && t.onFail != nil {
		t.verdict = nil
		t.onFail(v)
	}
}

// isTimeout reports an error of a deadline, ours or the handshake's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
