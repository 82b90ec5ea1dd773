package zklock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// TestTLS runs the recipes and the refusals on a ZooKeeper that serves TLS
// only and requires client certificates (zktest.WithTLS), one container
// for all its subtests.
func TestTLS(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	connectAs := func(t *testing.T, cn string, opts ...zklock.Option) *zklock.Client {
		t.Helper()
		c, err := zklock.Connect(ctxT(t), srv.Servers(), append([]zklock.Option{zklock.WithTLS(srv.TLSConfig(cn))}, opts...)...)
		require.NoError(t, err, "connect as CN=%s", cn)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("Mutex", func(t *testing.T) {
		t.Parallel()
		a, b := connectAs(t, "a"), connectAs(t, "b")
		path := lockPath(t)
		ma, err := zklock.NewMutex(a, path)
		require.NoError(t, err)
		mb, err := zklock.NewMutex(b, path)
		require.NoError(t, err)
		la, err := ma.Acquire(ctxT(t))
		require.NoError(t, err)
		got := make(chan *zklock.Lease, 1)
		go func() {
			l, err := mb.Acquire(ctxT(t))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		queued(t, a, path, 2)
		require.False(t, closed(la.Done()))
		release(t, la)
		var lb *zklock.Lease
		select {
		case lb = <-got:
		case <-time.After(long):
			t.Fatal("the waiter did not get the lock after the release")
		}
		require.NotNil(t, lb)
		require.Greater(t, lb.Token(), la.Token(), "fencing tokens increase")
		release(t, lb)
	})

	t.Run("RWMutex", func(t *testing.T) {
		t.Parallel()
		a, b := connectAs(t, "a"), connectAs(t, "b")
		path := lockPath(t)
		rwa, err := zklock.NewRWMutex(a, path)
		require.NoError(t, err)
		rwb, err := zklock.NewRWMutex(b, path)
		require.NoError(t, err)
		r1, err := rwa.ReadLock().Acquire(ctxT(t))
		require.NoError(t, err)
		r2, err := rwb.ReadLock().Acquire(ctxT(t))
		require.NoError(t, err, "readers hold together")
		short, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
		_, err = rwb.WriteLock().TryAcquire(short)
		cancel()
		require.ErrorIs(t, err, zklock.ErrLocked, "a writer waits for the readers")
		release(t, r1)
		release(t, r2)
		w, err := rwb.WriteLock().Acquire(ctxT(t))
		require.NoError(t, err)
		release(t, w)
	})

	t.Run("Election", func(t *testing.T) {
		t.Parallel()
		a, b := connectAs(t, "a"), connectAs(t, "b")
		path := lockPath(t)
		ea, err := zklock.NewElection(a, path, zklock.WithNodeData([]byte("a")))
		require.NoError(t, err)
		eb, err := zklock.NewElection(b, path, zklock.WithNodeData([]byte("b")))
		require.NoError(t, err)
		la, err := ea.Campaign(ctxT(t))
		require.NoError(t, err)
		leader, err := eb.Leader(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, "a", string(leader.Data))
		got := make(chan *zklock.Lease, 1)
		go func() {
			l, err := eb.Campaign(ctxT(t))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		queued(t, a, path, 2)
		release(t, la) // resign
		select {
		case lb := <-got:
			require.NotNil(t, lb)
			release(t, lb)
		case <-time.After(long):
			t.Fatal("the next candidate did not lead after the resignation")
		}
	})

	// A lock path whose x509 ACL names the services that may take it
	// (CN=billing) and lets others read: any other certificate is refused
	// at once, by every recipe, and leaves nothing; the holder's lease is
	// untouched.
	t.Run("X509Refusal", func(t *testing.T) {
		t.Parallel()
		billing := connectAs(t, "billing", zklock.WithACL([]zk.ACL{
			{Perms: zk.PermAll, Scheme: "x509", ID: "CN=billing"},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}))
		intruder := connectAs(t, "intruder")
		checkRefusal(t, billing, intruder)
	})

	// A client that does not trust the server's certificate fails Connect
	// at once, saying why.
	t.Run("UntrustedServer", func(t *testing.T) {
		t.Parallel()
		cfg := srv.TLSConfig("a")
		cfg.RootCAs = x509.NewCertPool() // trusts nobody
		err := connectFails(t, srv.Servers(), cfg)
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
		require.Contains(t, err.Error(), "certificate")
	})

	// The server refuses a client without a certificate, or with one from
	// another authority: with TLS 1.3 the refusal comes after the
	// client's handshake, on the first read, and Connect still names it.
	t.Run("RefusedClientCertificate", func(t *testing.T) {
		t.Parallel()
		none := srv.TLSConfig("a")
		none.Certificates = nil
		err := connectFails(t, srv.Servers(), none)
		require.Contains(t, err.Error(), "remote error: tls: ")

		stranger := srv.TLSConfig("a")
		stranger.Certificates = []tls.Certificate{selfSigned(t, "stranger")}
		err = connectFails(t, srv.Servers(), stranger)
		require.Contains(t, err.Error(), "remote error: tls: ")
	})

	// The command: -tls-ca, -tls-cert and -tls-key from files.
	t.Run("Command", func(t *testing.T) {
		t.Parallel()
		bin := buildCommand(t)
		dir := t.TempDir()
		cfg := srv.TLSConfig("cli")
		ca := serverCA(t, srv)
		cert := cfg.Certificates[0]
		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		require.NoError(t, err)
		write := func(name, typ string, der []byte) string {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
			return p
		}
		caFile := write("ca.pem", "CERTIFICATE", ca.Raw)
		certFile := write("cert.pem", "CERTIFICATE", cert.Certificate[0])
		keyFile := write("key.pem", "PRIVATE KEY", key)
		out := filepath.Join(dir, "token")
		path := lockPath(t)
		ctx, cancel := context.WithTimeout(ctxT(t), long)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "lock", "-servers", srv.ClientEndpoint(),
			"-tls-ca", caFile, "-tls-cert", certFile, "-tls-key", keyFile, path,
			"--", "sh", "-c", `echo "$ZKLOCK_TOKEN" >"$1"`, "sh", out)
		output, err := cmd.CombinedOutput()
		require.NoError(t, err, "zklock lock: %s", output)
		token, err := os.ReadFile(out)
		require.NoError(t, err)
		n, err := strconv.ParseInt(strings.TrimSpace(string(token)), 10, 64)
		require.NoError(t, err, "the command ran under the lock, with its token")
		require.Positive(t, n)

		// Without the client certificate the server refuses the command,
		// which exits on the refusal: its own connect timeout (10m) is
		// far behind ctx's, so a command that retried until it gave up
		// would be killed by ctx instead (no exit code 125).
		cmd = exec.CommandContext(ctx, bin, "lock", "-servers", srv.ClientEndpoint(), "-connect-timeout", "10m",
			"-tls-ca", caFile, path, "--", "true")
		output, err = cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.NoError(t, ctx.Err(), "the command waited until ctx ended: %s", output)
		require.Equal(t, 125, exit.ExitCode(), "%s", output)
		require.Contains(t, string(output), "tls")
	})
}

// With TLS 1.3 (the official 3.9 image's default; Debian's 3.8 speaks 1.2
// unless told), the client's handshake ends before the server has checked
// the client's certificate, and its refusal comes as an alert on the
// first read: Connect must still name it, at once.
func TestTLS13RefusedClientCertificate(t *testing.T) {
	t.Parallel()
	// 3.8's default cipher suites are TLS 1.2's only.
	srv := zktest.Start(t, zktest.WithTLS(),
		zktest.WithConfig("ssl.protocol", "TLSv1.3"), zktest.WithConfig("ssl.enabledProtocols", "TLSv1.3"),
		zktest.WithConfig("ssl.ciphersuites", "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384"))
	cfg := srv.TLSConfig("a")
	cfg.ServerName = "127.0.0.1"
	conn, err := tls.Dial("tcp", srv.ClientEndpoint(), cfg)
	require.NoError(t, err)
	require.Equal(t, uint16(tls.VersionTLS13), conn.ConnectionState().Version)
	_ = conn.Close()

	none := srv.TLSConfig("a")
	none.Certificates = nil
	err = connectFails(t, srv.Servers(), none)
	require.Contains(t, err.Error(), "remote error: tls: certificate required")

	stranger := srv.TLSConfig("a")
	stranger.Certificates = []tls.Certificate{selfSigned(t, "stranger")}
	err = connectFails(t, srv.Servers(), stranger)
	require.Contains(t, err.Error(), "remote error: tls: ")

	// And the recipes work over it.
	c, err := zklock.Connect(ctxT(t), srv.Servers(), zklock.WithTLS(srv.TLSConfig("a")))
	require.NoError(t, err)
	defer c.Close()
	m, err := zklock.NewMutex(c, lockPath(t))
	require.NoError(t, err)
	l, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	release(t, l)
}

// A Client that speaks TLS to a plaintext port fails Connect at once,
// naming TLS.
func TestTLSToPlaintextPort(t *testing.T) {
	t.Parallel()
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	err := connectFails(t, zktest.Servers(t), cfg)
	require.Contains(t, err.Error(), "tls handshake with")
	require.Contains(t, err.Error(), "plaintext port?")
}

// connectFails connects with cfg, which the server refuses or does not
// trust, and checks that Connect fails on the refusal, with its context
// still live (not retrying until it ends), and an error that names TLS.
func connectFails(t *testing.T, servers []string, cfg *tls.Config) error {
	t.Helper()
	ctx := ctxT(t)
	began := time.Now()
	c, err := zklock.Connect(ctx, servers, zklock.WithTLS(cfg))
	if err == nil {
		_ = c.Close()
		t.Fatal("connected")
	}
	t.Logf("Connect failed in %v: %v", time.Since(began).Round(time.Millisecond), err)
	refusedBeforeItsContext(t, ctx, err, "Connect")
	require.Contains(t, err.Error(), "tls")
	return err
}

// checkRefusal checks what a lock path's ACL does to a client it does not
// name: holder, named, holds a lease on a fresh path (its nodes made with
// holder's ACL); intruder's acquires of that path, with every recipe, and
// of a path under it, fail with zk.ErrNoAuth before their context ends, leave
// no node, and the holder's lease lives on and releases.
func checkRefusal(t *testing.T, holder, intruder *zklock.Client) {
	t.Helper()
	path := lockPath(t)
	// The ancestors are everyone's (other tests make paths under them);
	// the lock path and what is under it get the holder's ACL.
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			_, err := holder.Conn().Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, zk.ErrNodeExists) {
				require.NoError(t, err, "create %s", path[:i])
			}
		}
	}
	m, err := zklock.NewMutex(holder, path)
	require.NoError(t, err)
	held, err := m.Acquire(ctxT(t))
	require.NoError(t, err)
	before := children(t, holder, path)
	require.Len(t, before, 1)

	acquires := map[string]func(ctx context.Context) error{
		"Mutex": func(ctx context.Context) error {
			m, err := zklock.NewMutex(intruder, path)
			if err == nil {
				_, err = m.Acquire(ctx)
			}
			return err
		},
		"RWMutex.ReadLock": func(ctx context.Context) error {
			rw, err := zklock.NewRWMutex(intruder, path)
			if err == nil {
				_, err = rw.ReadLock().Acquire(ctx)
			}
			return err
		},
		"Semaphore": func(ctx context.Context) error {
			s, err := zklock.NewSemaphore(intruder, path+"-sem", 2)
			if err == nil {
				_, err = s.Acquire(ctx)
			}
			return err
		},
		"Election": func(ctx context.Context) error {
			e, err := zklock.NewElection(intruder, path)
			if err == nil {
				_, err = e.Campaign(ctx)
			}
			return err
		},
		"Mutex under it": func(ctx context.Context) error {
			m, err := zklock.NewMutex(intruder, path+"/deeper/lock")
			if err == nil {
				_, err = m.Acquire(ctx)
			}
			return err
		},
	}
	// The semaphore's path is made by the holder, so that its ACL is the
	// holder's too.
	_, err = holder.Conn().Create(path+"-sem", nil, 0, holderACL(t, holder, path))
	require.NoError(t, err)

	for name, acquire := range acquires {
		ctx := ctxT(t)
		began := time.Now()
		err := acquire(ctx)
		t.Logf("%s refused in %v: %v", name, time.Since(began).Round(time.Microsecond), err)
		require.ErrorIs(t, err, zk.ErrNoAuth, name)
		refusedBeforeItsContext(t, ctx, err, name)
		require.Contains(t, err.Error(), path, "%s: the error says where", name)
	}
	require.Equal(t, before, children(t, holder, path), "the refused acquires left no node")
	require.Empty(t, children(t, holder, path+"-sem"))
	require.NoError(t, held.Err(), "the holder's lease is untouched")
	require.False(t, closed(held.Done()))
	require.True(t, time.Now().Before(held.ValidUntil()))
	release(t, held)
	require.Empty(t, children(t, holder, path))
}

// holderACL is the ACL of path, which holder made.
func holderACL(t *testing.T, holder *zklock.Client, path string) []zk.ACL {
	t.Helper()
	acl, _, err := holder.Conn().GetACL(path)
	require.NoError(t, err)
	return acl
}

// selfSigned is a client certificate of subject CN=cn that no authority
// the server knows has signed.
func selfSigned(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serverCA is the authority that signed srv's certificate, as the server
// presents it (last in its chain).
func serverCA(t *testing.T, srv *zktest.Container) *x509.Certificate {
	t.Helper()
	cfg := srv.TLSConfig("probe")
	cfg.ServerName = "127.0.0.1"
	conn, err := tls.Dial("tcp", srv.ClientEndpoint(), cfg)
	require.NoError(t, err)
	defer conn.Close()
	chain := conn.ConnectionState().PeerCertificates
	require.GreaterOrEqual(t, len(chain), 2, "the server sends its CA")
	ca := chain[len(chain)-1]
	require.True(t, ca.IsCA)
	return ca
}

// buildCommand builds the zklock command into the test's directory.
func buildCommand(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "zklock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/zkrecipes/zklock/cmd/zklock").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// A Connect that fails its TLS handshakes, each way, and a Client over TLS
// that is closed leave no goroutine behind: the handshake under way is
// given up, go-zookeeper's loop ends. Not parallel, so no other test's
// goroutines are about.
func TestTLSNoGoroutineLeaks(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTLS())
	plain := zktest.Servers(t) // the shared server, started before the snapshot
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	func() {
		untrusted := srv.TLSConfig("a")
		untrusted.RootCAs = x509.NewCertPool()
		noCert := srv.TLSConfig("a")
		noCert.Certificates = nil
		connectFails(t, srv.Servers(), untrusted)
		connectFails(t, srv.Servers(), noCert)
		connectFails(t, plain, srv.TLSConfig("a"))

		c, err := zklock.Connect(ctxT(t), srv.Servers(), zklock.WithTLS(srv.TLSConfig("a")))
		require.NoError(t, err)
		defer c.Close()
		m, err := zklock.NewMutex(c, lockPath(t))
		require.NoError(t, err)
		require.NoError(t, zklock.Do(ctxT(t), m, func(context.Context) error { return nil }))
	}()
	goleak.VerifyNone(t, opts...)
}

// refusedBeforeItsContext checks that a refused call returned of its own
// accord: with its context still live and no deadline in its error. A
// refusal retried until the context ends fails it, whatever the machine's
// speed; how soon the refusal came is only logged.
func refusedBeforeItsContext(t *testing.T, ctx context.Context, err error, what string) {
	t.Helper()
	require.NoError(t, ctx.Err(), "%s returned only as its context ended: %v", what, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded, what)
	require.NotErrorIs(t, err, context.Canceled, what)
}
