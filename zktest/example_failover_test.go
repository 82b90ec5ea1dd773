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

// ExpireSession is for testing fencing. It ends the session from the
// server's side at once: the rival can hold the lock within milliseconds,
// while the old holder hears of it about a second later and meanwhile still
// thinks it holds (as a paused process would). The resource the lock
// protects must refuse the old holder's writes: its token is lower.
func ExampleFaults_ExpireSession_fencing() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	f := zktest.NewFaults(nil)
	defer f.Close()
	old, err := zklock.Connect(ctx, zkc.Servers(), zklock.WithDialer(f.Dialer()))
	if err != nil {
		log.Fatal(err)
	}
	defer old.Close()
	rival, err := zklock.Connect(ctx, zkc.Servers())
	if err != nil {
		log.Fatal(err)
	}
	defer rival.Close()
	om, _ := zklock.NewMutex(old, "/reports/lock")
	rm, _ := zklock.NewMutex(rival, "/reports/lock")

	// The resource: it keeps the highest token it has seen for the lock.
	var high int64
	write := func(token int64) bool {
		if token < high {
			return false
		}
		high = token
		return true
	}

	held, err := om.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("old holder writes:", write(held.Token()))
	if err := f.ExpireSession(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := rm.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("rival writes:", write(next.Token()))
	fmt.Println("old holder's late write accepted:", write(held.Token()))
	// Output:
	// old holder writes: true
	// rival writes: true
	// old holder's late write accepted: false
}
