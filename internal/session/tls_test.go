package session

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// localhostTLS returns a server configuration whose certificate is valid
// for the name "localhost" only (no IP address), and a client
// configuration that trusts it, with ServerName unset.
func localhostTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// listen accepts connections on 127.0.0.1 and hands each to serve, until
// the test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	return ln.Addr().String()
}

// tlsWire is a wire with TLS cfg over a dialer that counts its dials, and
// its server list, from servers.
func tlsWire(t *testing.T, cfg *tls.Config, requested time.Duration, servers ...string) (*wire, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	w := testWire(Options{SessionTimeout: requested, TLS: cfg,
		Dialer: func(network, addr string, timeout time.Duration) (net.Conn, error) {
			dials.Add(1)
			return net.DialTimeout(network, addr, timeout)
		},
		// "localhost" may also resolve to ::1, where nothing listens.
		Lookup: func(_ context.Context, host string) ([]string, error) {
			if host == "localhost" {
				return []string{"127.0.0.1"}, nil
			}
			return net.DefaultResolver.LookupHost(context.Background(), host)
		}})
	if err := w.res.newHosts(w.tls.nextServer).Init(servers); err != nil {
		t.Fatal(err)
	}
	return w, &dials
}

// dialLoopback dials the server list's next name, as go-zookeeper does.
func dialLoopback(t *testing.T, w *wire) (net.Conn, error) {
	t.Helper()
	name, _ := w.res.hosts.Next()
	return w.dialer("tcp", name, time.Second)
}

// The TLS handshake verifies the server's certificate against the host
// the user named ("localhost"), not the address it resolved to, over the
// user's dialer, without changing the user's configuration.
func TestTLSServerNameIsTheHostNamed(t *testing.T) {
	server, client := localhostTLS(t)
	addr := listen(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			_ = tls.Server(c, server).Handshake()
			var b [1]byte
			_, _ = c.Read(b[:]) // until the client closes
		}()
	})
	_, port, _ := net.SplitHostPort(addr)

	w, dials := tlsWire(t, client, 2*time.Second, "localhost:"+port)
	c, err := dialLoopback(t, w)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	tc, ok := c.(*wireConn).Conn.(tlsConn)
	if !ok {
		t.Fatalf("the wire's connection is %T, not TLS", c.(*wireConn).Conn)
	}
	if got := tc.ConnectionState().ServerName; got != "localhost" {
		t.Fatalf("ServerName %q, want the host named, localhost", got)
	}
	if client.ServerName != "" {
		t.Fatalf("the user's configuration was changed: ServerName %q", client.ServerName)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials through the user's dialer, want 1", n)
	}

	// A ServerName the certificate does not name fails, as a *TLSError
	// that is the last dial error, and that every server (one) failed
	// ends Open's wait.
	other := client.Clone()
	other.ServerName = "zk.example"
	w, _ = tlsWire(t, other, 2*time.Second, addr) // one address: every server
	var fatal error
	w.tls.onFail = func(err error) { fatal = err }
	_, err = dialLoopback(t, w)
	var te *TLSError
	var invalid x509.HostnameError
	if !errors.As(err, &te) || !errors.As(err, &invalid) {
		t.Fatalf("dial: %v, want a *TLSError wrapping x509.HostnameError", err)
	}
	if _, derr := w.res.errs(); !errors.Is(derr, te) {
		t.Fatalf("last dial error %v, want %v", derr, te)
	}
	if fatal != nil {
		t.Fatalf("onTLSFail called before go-zookeeper asked for the next server: %v", fatal)
	}
	w.res.hosts.Next()
	if !errors.Is(fatal, te) {
		t.Fatalf("onTLSFail got %v, want %v", fatal, te)
	}
}

// The handshake's bound covers TLS's: a server that accepts but never
// answers the ClientHello fails the dial by then, with a timeout that
// does not end Open's wait (the server may answer next time).
func TestTLSHandshakeBounded(t *testing.T) {
	_, client := localhostTLS(t)
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		close(held)
		for c := range held {
			c.Close()
		}
	})
	addr := listen(t, func(c net.Conn) { held <- c }) // never reads
	w, _ := tlsWire(t, client, time.Second, addr)     // bound: minHandshake
	w.tls.onFail = func(err error) { t.Errorf("a timed-out handshake ended Open's wait: %v", err) }
	began := time.Now()
	_, err := dialLoopback(t, w)
	took := time.Since(began)
	w.res.hosts.Next()
	var te *TLSError
	if !errors.As(err, &te) || !isTimeout(err) {
		t.Fatalf("dial: %v, want a *TLSError that timed out", err)
	}
	if took > 10*minHandshake {
		t.Fatalf("gave up after %v: the bound is %v", took, minHandshake)
	}
}

// A ServerName the user set is kept: the handshake verifies the server
// against it, not against the host dialed (here an address, which the
// certificate does not name).
func TestTLSUsersServerNameKept(t *testing.T) {
	server, client := localhostTLS(t)
	addr := listen(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			_ = tls.Server(c, server).Handshake()
			var b [1]byte
			_, _ = c.Read(b[:])
		}()
	})
	named := client.Clone()
	named.ServerName = "localhost"
	w, _ := tlsWire(t, named, 2*time.Second, addr) // 127.0.0.1:port
	c, err := dialLoopback(t, w)
	if err != nil {
		t.Fatalf("dial %s with ServerName localhost: %v", addr, err)
	}
	defer c.Close()
	if got := c.(*wireConn).Conn.(tlsConn).ConnectionState().ServerName; got != "localhost" {
		t.Fatalf("ServerName %q, want the user's, localhost", got)
	}
}

// A handshake that timed out is told apart from a refusal: by the
// context's deadline or by a connection's own (a net.Error that times
// out); a refusal is not a timeout.
func TestTLSTimeoutsTold(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		timeout bool
	}{
		{"the context's deadline", &TLSError{Addr: "a:1", Err: context.DeadlineExceeded}, true},
		{"the connection's deadline", &TLSError{Addr: "a:1", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}, true},
		{"a refusal", &TLSError{Addr: "a:1", Err: errors.New("remote error: tls: bad certificate")}, false},
		{"the server closed", &TLSError{Addr: "a:1", Err: io.EOF}, false},
	} {
		if got := isTimeout(c.err); got != c.timeout {
			t.Errorf("%s: isTimeout %v, want %v", c.name, got, c.timeout)
		}
	}
}

// A handshake that the server ended with EOF says what that most often
// means (a plaintext port); any other failure says only what it is.
func TestTLSErrorSaysPlaintextPortOnEOF(t *testing.T) {
	const hint = "is it a plaintext port?"
	if msg := (&TLSError{Addr: "zk1:2181", Err: fmt.Errorf("read: %w", io.EOF)}).Error(); !strings.Contains(msg, hint) || !strings.Contains(msg, "zk1:2181") {
		t.Errorf("EOF: %q, want the server and %q", msg, hint)
	}
	if msg := (&TLSError{Addr: "zk1:2181", Err: errors.New("x509: unknown authority")}).Error(); strings.Contains(msg, hint) {
		t.Errorf("a certificate error: %q, want no %q", msg, hint)
	}
}

// Open against servers that all fail the TLS handshake for a reason that
// will not pass (here: a certificate for another name) returns that
// *TLSError as soon as every server has failed, not when ctx ends, and
// not as a context error (its own wait for a session was cut short, the
// caller's ctx was not).
func TestOpenEndsOnTLSVerdict(t *testing.T) {
	server, client := localhostTLS(t)
	addr := listen(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			_ = tls.Server(c, server).Handshake()
		}()
	})
	other := client.Clone()
	other.ServerName = "zk.example" // the certificate names localhost only
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, Options{
		Servers:        []string{addr},
		SessionTimeout: 4 * time.Second,
		TLS:            other,
		Dialer:         net.DialTimeout,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) },
		Hooks:          Hooks{Lost: func(*Hold, error) {}, Released: func(*Hold) {}, State: func(State, int64, string) {}},
	})
	if s != nil {
		_ = s.Close()
	}
	var te *TLSError
	if !errors.As(err, &te) {
		t.Fatalf("Open: %v, want a *TLSError", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Open returned only when its ctx ended: %v", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open: %v: a context error, though the caller's ctx is live", err)
	}
}
