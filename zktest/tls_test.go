package zktest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A container WithTLS serves TLS only, with client certificates required,
// and takes each client's certificate subject as its x509 identity: a node
// whose ACL names CN=alice is hers alone.
func TestWithTLS(t *testing.T) {
	t.Parallel()
	c := zktest.Start(t, zktest.WithTLS())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// zktest's own probe speaks TLS.
	out, err := c.FourLetter(ctx, "srvr")
	require.NoError(t, err)
	require.Contains(t, out, "Mode: standalone")
	// No plaintext: the port does not answer a four-letter word in clear.
	probe, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
	out, err = zktest.FourLetter(probe, c.ClientEndpoint(), "ruok")
	cancelProbe()
	require.False(t, err == nil && out == "imok", "the TLS port answered in plaintext")

	connect := func(cn string) *zklock.Client {
		cfg := c.TLSConfig(cn)
		require.NotNil(t, cfg)
		require.Empty(t, cfg.ServerName, "left to the dialer")
		cl, err := zklock.Connect(ctx, c.Servers(), zklock.WithTLS(cfg))
		require.NoError(t, err, "connect as CN=%s", cn)
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	alice, bob := connect("alice"), connect("bob")
	_, err = alice.Conn().Create("/alice", []byte("hers"), 0,
		[]zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: "CN=alice"}})
	require.NoError(t, err)
	data, _, err := alice.Conn().Get("/alice")
	require.NoError(t, err, "the owner reads her node: ZooKeeper took her certificate as CN=alice")
	require.Equal(t, "hers", string(data))
	_, _, err = bob.Conn().Get("/alice")
	require.ErrorIs(t, err, zk.ErrNoAuth, "CN=bob is not named by the ACL")

	// The same from PEM files, as the zklock command's -tls-* flags load
	// them: a certificate of CN=alice from the files reads her node.
	files, err := c.TLSFiles(filepath.Join(t.TempDir(), "new"), "alice")
	require.NoError(t, err)
	fromFiles := loadTLSFiles(t, files)
	cl, err := zklock.Connect(ctx, c.Servers(), zklock.WithTLS(fromFiles))
	require.NoError(t, err, "connect with the PEM files")
	t.Cleanup(func() { _ = cl.Close() })
	data, _, err = cl.Conn().Get("/alice")
	require.NoError(t, err, "the files' certificate is CN=alice's")
	require.Equal(t, "hers", string(data))
	st, err := os.Stat(files.Key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the key is the owner's alone")

	// Stop and Start keep the certificates: the readiness check, and
	// clients, speak TLS to the restarted server.
	require.NoError(t, c.Stop(ctx, nil))
	require.NoError(t, c.Start(ctx))
	data, _, err = connect("alice").Conn().Get("/alice")
	require.NoError(t, err, "after a restart")
	require.Equal(t, "hers", string(data))
}

// loadTLSFiles loads files as the zklock command loads its -tls-* flags.
func loadTLSFiles(t *testing.T, files zktest.TLSFiles) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	require.NoError(t, err)
	ca, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca), "a certificate in %s", files.CA)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// TLSConfig is nil, and TLSFiles fails, for a container not started
// WithTLS, and an Ensemble refuses WithTLS before it starts anything.
func TestTLSConfigWithoutTLS(t *testing.T) {
	t.Parallel()
	require.Nil(t, (&zktest.Container{}).TLSConfig("alice"))
	require.Nil(t, (*zktest.Container)(nil).TLSConfig("alice"))
	dir := t.TempDir()
	_, err := (&zktest.Container{}).TLSFiles(dir, "alice")
	require.ErrorContains(t, err, "not started WithTLS")
	_, err = (*zktest.Container)(nil).TLSFiles(dir, "alice")
	require.ErrorContains(t, err, "not started WithTLS")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written")
	e, err := zktest.RunEnsemble(t.Context(), zktest.Image(), zktest.WithTLS())
	require.Error(t, err)
	require.Nil(t, e)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
	require.Contains(t, err.Error(), "WithTLS")
}
