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

// A server behind a name that moves: the Client looks the name up again
// when its connection is reset, and follows the server to its new address
// with its session and its lease.
func ExampleMovable() {
	// Bounded: a Client that cannot follow the name would wait forever.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	m, err := zktest.NewMovable(zkc.Servers())
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	c, err := zklock.Connect(ctx, m.Servers(), zklock.WithHostResolver(m.Lookup))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	session := c.SessionID()
	mu, _ := zklock.NewMutex(c, "/example/movable")
	lease, err := mu.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	old := m.Addr(0)
	if _, err := m.Move(0); err != nil {
		log.Fatal(err)
	}
	_, err = zktest.FourLetter(ctx, old, "ruok")
	fmt.Println("the old address answers:", err == nil)

	// Answered once the Client has reconnected, at the new address.
	holders, err := mu.Participants(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("still the holder:", holders[0].Node == lease.Node() && lease.Err() == nil)
	fmt.Println("same session:", c.SessionID() == session)
	_ = lease.Release(ctx)
	// Output:
	// the old address answers: false
	// still the holder: true
	// same session: true
}

// A StatefulSet's rolling update of the ensemble: each server in turn
// leaves its address and its DNS record, restarts, and comes back on a new
// address. A Client that resolves the names at every connection attempt
// keeps its session and its leases through it; one that resolved them
// once has no address left that answers. (TestMovableRollingUpdateKeepsLease
// runs this.)
func ExampleMovable_MoveAll() {
	ctx := context.Background()
	e, err := zktest.RunEnsemble(ctx, zktest.Image())
	defer e.Terminate(ctx)
	if err != nil {
		log.Fatal(err)
	}
	m, err := zktest.NewMovable(e.Servers())
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	// A session, and its leases, outlive the leader's restart and the
	// election that follows.
	c, err := zklock.Connect(ctx, m.Servers(), zklock.WithHostResolver(m.Lookup),
		zklock.WithSessionTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	session := c.SessionID()
	mu, _ := zklock.NewMutex(c, "/example/rolling-update")
	lease, err := mu.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	err = m.MoveAll(ctx, func(ctx context.Context, i int) error {
		return e.Restart(ctx, i) // while server i has no address
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same session:", c.SessionID() == session, "lease live:", lease.Err() == nil)
	_ = lease.Release(ctx)
}
