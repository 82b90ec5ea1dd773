package zktest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// A server behind a slow link: a Delayer in front of it adds 3ms to every
// round trip, as a link between zones would, and a Client connects to the
// Delayer instead of the server. In a test, zktest.Delay(t, addr, rtt)
// does the same and closes it at the end.
func ExampleNewDelayer() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	const rtt = 3 * time.Millisecond
	d, err := zktest.NewDelayer(zkc.ClientEndpoint(), rtt)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	c, err := zklock.Connect(ctx, []string{d.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mu, _ := zklock.NewMutex(c, "/example/slow-link")
	start := time.Now()
	lease, err := mu.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", lease.Err() == nil)
	fmt.Println("took at least a round trip:", time.Since(start) >= rtt)
	_ = lease.Release(ctx)
	// Output:
	// held: true
	// took at least a round trip: true
}
