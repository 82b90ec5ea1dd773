package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// TLSFiles writes a CA and a key pair that load as the zklock command
// loads them and chain to the container's authority, whatever the cn
// (one named like the CA's file does not replace it); an empty cn fails.
func TestTLSFilesWithoutDocker(t *testing.T) {
	a, err := newAuthority()
	if err != nil {
		t.Fatal(err)
	}
	c := &Container{tls: a}
	dir := t.TempDir()
	if _, err := c.TLSFiles(dir, ""); err == nil {
		t.Fatal("an empty cn was accepted")
	}
	for _, cn := range []string{"ca", "ops/billing", ".."} {
		f, err := c.TLSFiles(dir, cn)
		if err != nil {
			t.Fatalf("%s: %v", cn, err)
		}
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatalf("%s: %v", cn, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName != cn {
			t.Fatalf("subject %v; want CN=%s", leaf.Subject, cn)
		}
		caPEM, err := os.ReadFile(f.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatalf("%s: no certificate in %s", cn, f.CA)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("%s: the certificate does not chain to ca.pem: %v", cn, err)
		}
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"alice":       "alice",
		"ops/billing": "ops_billing",
		"a b,c=d":     "a_b_c_d",
		"x.y-z_1":     "x.y-z_1",
		"é":           "_",
	} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q; want %q", in, got, want)
		}
	}
}
