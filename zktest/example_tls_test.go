package zktest_test

import (
	"context"
	"errors"
	"log"

	"github.com/go-zookeeper/zk"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A server that speaks TLS only and requires client certificates, and two
// clients with certificates of their own: an x509 ACL that names one
// refuses the other. In a test, zktest.Start(t, zktest.WithTLS()) does the
// starting and the cleanup.
func ExampleWithTLS() {
	ctx := context.Background()
	c, err := zktest.Run(ctx, zktest.Image(), zktest.WithTLS())
	defer func() {
		if err := testcontainers.TerminateContainer(c); err != nil {
			log.Print(err)
		}
	}()
	if err != nil {
		log.Fatal(err)
	}

	billing, err := zklock.Connect(ctx, c.Servers(), zklock.WithTLS(c.TLSConfig("billing")),
		zklock.WithACL([]zk.ACL{
			{Perms: zk.PermAll, Scheme: "x509", ID: "CN=billing"}, // as ZooKeeper writes the subject
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer billing.Close()
	m, err := zklock.NewMutex(billing, "/locks/billing")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	other, err := zklock.Connect(ctx, c.Servers(), zklock.WithTLS(c.TLSConfig("reporting")))
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	m, err = zklock.NewMutex(other, "/locks/billing")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.Acquire(ctx); errors.Is(err, zk.ErrNoAuth) {
		log.Print("reporting may not take billing's lock")
	}
}
