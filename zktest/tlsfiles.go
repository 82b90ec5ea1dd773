package zktest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TLSFiles are the paths of the PEM files [Container.TLSFiles] writes, for
// a client of a container started [WithTLS]: what the zklock command's
// -tls-ca, -tls-cert and -tls-key flags take, or tls.LoadX509KeyPair and
// x509.CertPool.AppendCertsFromPEM.
type TLSFiles struct {
	CA   string // the container's certificate authority's certificate
	Cert string // a client certificate from it, of subject CN=<cn>
	Key  string // that certificate's key: unencrypted PKCS#8 ("PRIVATE KEY"), mode 0600
}

// errNoTLS is TLSFiles' error for a container not started WithTLS.
var errNoTLS = errors.New("the container was not started WithTLS")

// TLSFiles writes into dir (made, mode 0700, if missing) the container's
// certificate authority as ca.pem, and a new client certificate of subject
// CN=cn and its key, from that authority, as <cn>-cert.pem and <cn>-key.pem
// (characters of cn other than letters, digits, '.', '-' and '_' written
// '_'), and returns their paths. The server accepts the certificate, and
// ZooKeeper's X509AuthenticationProvider reports it as the id "CN=<cn>",
// as for [Container.TLSConfig]. Files of the same names are replaced. It
// fails for a container not started WithTLS, an empty cn, or a file that
// cannot be written.
//
//	f, err := zkc.TLSFiles(t.TempDir(), "ops")
//	// zklock -servers <endpoint> -tls-ca f.CA -tls-cert f.Cert -tls-key f.Key ls /
func (c *Container) TLSFiles(dir, cn string) (TLSFiles, error) {
	fail := func(err error) (TLSFiles, error) {
		return TLSFiles{}, fmt.Errorf("zktest: TLS files for CN=%s in %s: %w", cn, dir, err)
	}
	switch {
	case c == nil || c.tls == nil:
		return fail(errNoTLS)
	case cn == "":
		return fail(errors.New("empty common name"))
	}
	cfg, err := c.tls.clientConfig(cn)
	if err != nil {
		return fail(err)
	}
	cert := cfg.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	name := fileName(cn)
	f := TLSFiles{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, name+"-cert.pem"),
		Key:  filepath.Join(dir, name+"-key.pem"),
	}
	for _, w := range []struct {
		path string
		data []byte
	}{
		{f.CA, c.tls.caPEM},
		{f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})},
		{f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})},
	} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return fail(err)
		}
		if err := os.Chmod(w.path, 0o600); err != nil { // a file replaced keeps its mode
			return fail(err)
		}
	}
	return f, nil
}

// fileName is cn as the start of a file name: letters, digits, '.', '-'
// and '_' kept, anything else '_'.
func fileName(cn string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, cn)
}
