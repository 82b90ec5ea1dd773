//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// tlsFlags are -tls-ca, -tls-cert and -tls-key: any of them makes zklock
// connect over TLS.
type tlsFlags struct {
	ca, cert, key string
}

func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "connect over TLS, trusting the CA certificates in PEM `FILE` (default with -tls-cert: the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "connect over TLS with the client certificate in PEM `FILE`: zklock's x509 identity for ACLs (needs -tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "the client certificate's private key, in PEM `FILE` (unencrypted)")
}

// config reads the files and returns the TLS configuration, or nil if no
// TLS flag was given. Its errors name the flag and the file.
func (f *tlsFlags) config() (*tls.Config, error) {
	if f.ca == "" && f.cert == "" && f.key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.cert != "" && f.key == "":
		return nil, errors.New("-tls-cert needs -tls-key: the client certificate's private key")
	case f.key != "" && f.cert == "":
		return nil, errors.New("-tls-key needs -tls-cert: the client certificate it is the key of")
	case f.cert != "":
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", f.cert, f.key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", f.ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
