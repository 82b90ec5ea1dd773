package zklock_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log"
	"os"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// A service that connects over TLS with its own certificate, whose
// subject, CN=billing,O=example, is its identity for ZooKeeper's x509 ACLs:
// the lock's nodes let billing do everything and others only read, so no
// other service can take the lock or delete billing's node.
func ExampleWithTLS() {
	ctx := context.Background()
	caPEM, err := os.ReadFile("/etc/zookeeper/ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		log.Fatal("no CA certificate in /etc/zookeeper/ca.pem")
	}
	cert, err := tls.LoadX509KeyPair("/etc/billing/zk-cert.pem", "/etc/billing/zk-key.pem")
	if err != nil {
		log.Fatal(err)
	}

	c, err := zklock.Connect(ctx, []string{"zk1:2281", "zk2:2281", "zk3:2281"},
		// ServerName is left empty: each server's own host name (zk1, ...).
		zklock.WithTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}),
		zklock.WithACL([]zk.ACL{
			{Perms: zk.PermAll, Scheme: "x509", ID: "CN=billing,O=example"},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}))
	if err != nil {
		log.Fatal(err) // a TLS failure is named: "tls handshake with ...: x509: ..."
	}
	defer c.Close()

	m, err := zklock.NewMutex(c, "/locks/billing")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if errors.Is(err, zk.ErrNoAuth) {
		log.Fatal("the lock path's ACL does not name this service") // at once, nothing left behind
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
}
