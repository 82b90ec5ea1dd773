package zklock_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock/zktest"
)

// The PEM files zktest writes for a TLS server are what the zklock
// command's -tls-ca, -tls-cert and -tls-key flags take: the command gets a
// session (the server requires the client certificate) and runs under the
// lock.
func TestCommandWithZktestTLSFiles(t *testing.T) {
	if zktest.External() {
		t.Skip("TLS files: ZKLOCK_TEST_SERVERS is set: no containers")
	}
	t.Parallel()
	srv := zktest.Start(t, zktest.WithTLS())
	bin := buildCommand(t)
	files, err := srv.TLSFiles(t.TempDir(), "cli")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctxT(t), long)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "lock", "-servers", srv.ClientEndpoint(),
		"-tls-ca", files.CA, "-tls-cert", files.Cert, "-tls-key", files.Key, lockPath(t),
		"--", "true").CombinedOutput()
	require.NoError(t, err, "zklock lock with zktest's TLS files: %s", out)
}
