package zktest

import (
	"bytes"
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
	"net"
	"time"
)

// WithTLS makes the container serve TLS only, on its client port
// ([Container.ClientEndpoint] as ever): no plaintext port is open. When
// [Run] starts the container it makes a certificate authority (an ECDSA
// key, in memory) and a server certificate from it, valid for localhost,
// 127.0.0.1 and ::1, and copies them into the container. Clients must
// show a certificate from that authority, which [Container.TLSConfig]
// makes; ZooKeeper's X509AuthenticationProvider takes its subject as the
// client's identity, so an ACL can name it (Scheme "x509", ID "CN=<cn>").
//
// These zoo.cfg entries come before [WithConfig]'s, which can change them:
//
//	serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
//	secureClientPort=2181       # and no clientPort
//	ssl.keyStore.location=/conf/zktest-server.pem   # key, certificate, CA
//	ssl.keyStore.type=PEM
//	ssl.trustStore.location=/conf/zktest-ca.pem
//	ssl.trustStore.type=PEM
//	ssl.clientAuth=need         # a client without a certificate is refused
//	authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
//
// The readiness check and [Container.FourLetter] speak TLS to it, with a
// certificate of subject CN=zktest; the package function [FourLetter]
// does not. The image must have ZooKeeper's Netty jars on its class path:
// the official image has; zklock's offline image (scripts/setup.sh) puts
// Debian's there. [RunEnsemble] refuses WithTLS: its servers would each
// have their own authority.
func WithTLS() Option {
	return func(o *options) error {
		o.tls = true
		return nil
	}
}

// Paths of the TLS files in the container, next to zoo.cfg.
const (
	tlsServerPath = "/conf/zktest-server.pem"
	tlsCAPath     = "/conf/zktest-ca.pem"
)

// tlsConfigEntries are the zoo.cfg entries of a TLS-only server (see
// WithTLS), in order.
var tlsConfigEntries = [][2]string{
	{"serverCnxnFactory", "org.apache.zookeeper.server.NettyServerCnxnFactory"},
	{"secureClientPort", "2181"},
	{"ssl.keyStore.location", tlsServerPath},
	{"ssl.keyStore.type", "PEM"},
	{"ssl.trustStore.location", tlsCAPath},
	{"ssl.trustStore.type", "PEM"},
	{"ssl.clientAuth", "need"},
	{"authProvider.x509", "org.apache.zookeeper.server.auth.X509AuthenticationProvider"},
}

// authority is a container's certificate authority and what it made for
// the server: kept for the container's life, across Stop and Start.
type authority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caPEM  []byte // the CA's certificate
	server []byte // the server's key (PKCS#8), certificate and the CA's, in PEM
	pool   *x509.CertPool
	probe  *tls.Config // CN=zktest, for the readiness check and FourLetter
}

// certValidity is how long zktest's certificates are valid: far beyond
// any test run.
const certValidity = 365 * 24 * time.Hour

// newAuthority makes a certificate authority and a server certificate
// from it.
func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "zktest CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, cert, err := issue(tmpl, &key.PublicKey, nil, key)
	if err != nil {
		return nil, err
	}
	a := &authority{cert: cert, key: key, pool: x509.NewCertPool()}
	a.pool.AddCert(cert)
	a.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})

	skey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sder, _, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "zktest"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &skey.PublicKey, a.cert, a.key)
	if err != nil {
		return nil, err
	}
	// ZooKeeper's PEM key store reads an unencrypted PKCS#8 key ("PRIVATE
	// KEY") and the certificate chain from one file.
	pkcs8, err := x509.MarshalPKCS8PrivateKey(skey)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: sder})
	b.Write(a.caPEM)
	a.server = b.Bytes()

	if a.probe, err = a.clientConfig("zktest"); err != nil {
		return nil, err
	}
	return a, nil
}

// issue signs a certificate from tmpl for pub with the parent's key (self
// signed if parent is nil), with a random serial number and zktest's
// validity.
func issue(tmpl *x509.Certificate, pub *ecdsa.PublicKey, parent *x509.Certificate, key *ecdsa.PrivateKey) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	// An hour back: a clock a little behind the host's still accepts it.
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = tmpl.NotBefore.Add(certValidity)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

// clientConfig returns a client configuration that trusts the authority
// and carries a new certificate of subject CN=cn from it.
func (a *authority) clientConfig(cn string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, cert, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &key.PublicKey, a.cert, a.key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		RootCAs:      a.pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// TLSConfig returns a client configuration for a container started
// [WithTLS]: it trusts the container's certificate authority and carries
// a certificate from it of subject CN=cn, which the server accepts and
// ZooKeeper's X509AuthenticationProvider reports as the id "CN=<cn>" (in
// RFC 2253 form: a cn holding a comma or the like comes escaped). Each
// call makes a new key and certificate. ServerName is empty:
// zklock.WithTLS and tls.Dial fill it in with the host dialed, which the
// server's certificate covers (127.0.0.1). It returns nil if the container
// was not started WithTLS.
func (c *Container) TLSConfig(cn string) *tls.Config {
	if c == nil || c.tls == nil {
		return nil
	}
	cfg, err := c.tls.clientConfig(cn)
	if err != nil {
		// Only crypto/rand failing, or a cn x509 cannot encode, brings
		// this here.
		return nil
	}
	return cfg
}

// fourLetterTLS is [FourLetter] over TLS with cfg.
func fourLetterTLS(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	d := tls.Dialer{Config: cfg}
	return fourLetter(ctx, addr, cmd, d.DialContext)
}

// errEnsembleTLS is RunEnsemble's answer to WithTLS.
var errEnsembleTLS = errors.New("zktest: WithTLS is for a single server (Run, Start): an Ensemble's servers would each have an authority of their own")
