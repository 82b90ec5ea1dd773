package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A Forwarder in front of a server can play one that hands out a new
// session on reconnect, as ClickHouse Keeper may: a test checks what its
// lock holders do when that happens.
func ExampleForwarder_SwapSessions() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	fw, err := zktest.NewForwarder(zkc.ClientEndpoint())
	if err != nil {
		log.Fatal(err)
	}
	defer fw.Close()

	c, err := zklock.Connect(ctx, []string{fw.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/example/swap")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	fw.SwapSessions(true) // reconnects get a new session
	fw.Drop()             // the client reconnects
	<-lease.Done()
	fmt.Println("replaced:", errors.Is(lease.Err(), zklock.ErrSessionReplaced))
	fmt.Println("expired too:", errors.Is(lease.Err(), zklock.ErrSessionExpired))

	// The Client goes on in its new session.
	lease, err = m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired again")
	_ = lease.Release(ctx)
	// Output:
	// replaced: true
	// expired too: true
	// acquired again
}
