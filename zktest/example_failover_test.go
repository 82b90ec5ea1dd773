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

// A failover test: a lock holder cut off from ZooKeeper stops relying on its
// lease before a rival can hold the lock, and the rival's fencing token is
// higher. PartitionUntilExpired keeps the order of a real network failure
// (the holder misses its heartbeats, the server expires its session, the
// rival gets in). ExpireSession does not: the rival may hold within
// milliseconds of the expiry while the old holder hears of it about a second
// later, which is what a test of fencing wants (the resource must refuse the
// old holder's lower token), not a test of who stops first.
//
// The README's testing snippet is this example as a test.
func ExampleFaults_PartitionUntilExpired_failover() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	servers := zkc.Servers()

	f := zktest.NewFaults(nil) // the old holder's transport, breakable
	defer f.Close()
	old, err := zklock.Connect(ctx, servers, zklock.WithDialer(f.Dialer()), zklock.WithSessionTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer old.Close()
	rival, err := zklock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer rival.Close()
	om, _ := zklock.NewMutex(old, "/reports/lock")
	rm, _ := zklock.NewMutex(rival, "/reports/lock")
	held, err := om.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	taken := make(chan *zklock.Lease, 1)
	stoppedFirst := make(chan bool, 1)
	go func() {
		next, err := rm.Acquire(ctx) // waits for the old holder
		if err != nil {
			log.Fatal(err)
		}
		stoppedFirst <- held.Err() != nil // at the moment the rival holds
		taken <- next
	}()
	if err := f.PartitionUntilExpired(ctx); err != nil {
		log.Fatal(err)
	}
	next := <-taken
	defer next.Release(ctx)
	fmt.Println("old holder stopped first:", <-stoppedFirst)
	fmt.Println("rival's token is higher:", next.Token() > held.Token())
	// Output:
	// old holder stopped first: true
	// rival's token is higher: true
}
