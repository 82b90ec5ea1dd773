package zklock_test

import (
	"context"
	"log"
	"time"

	"github.com/zkrecipes/zklock"
)

// A transfer locks both accounts at once. Another transfer may list the
// same two accounts the other way round: neither can end up holding one
// account while it waits for the other, so they cannot deadlock.
func ExampleNewMultiLock() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m, err := zklock.NewMultiLock(c, []string{"/locks/accounts/alice", "/locks/accounts/bob"})
	if err != nil {
		log.Fatal(err)
	}
	// One deadline for the whole wait, however many paths.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lease, err := m.Acquire(actx)
	if err != nil {
		log.Fatal(err) // nothing is held, and no node is left on any path
	}
	defer lease.Release(ctx) // frees both paths

	// One token for both paths: the zxid of the transaction that queued on
	// them. Both ledgers can fence with it.
	log.Printf("moving funds under token %d", lease.Token())
}
