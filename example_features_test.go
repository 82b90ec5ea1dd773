package zklock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zklock"
)

// A holder that lets go when asked, and an operator who asks.
func ExampleLease_Revoked() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/locks/reindex")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	select {
	case <-lease.Revoked(): // someone called zklock.Revoke, or Curator's Revoker, on lease.Node()
		fmt.Println("asked to let go: stopping at a safe point")
	case <-lease.Done():
		fmt.Println("lost:", lease.Err())
	}
}

func ExampleRevoke() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/locks/reindex")
	if err != nil {
		log.Fatal(err)
	}
	parts, err := m.Participants(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if len(parts) > 0 && parts[0].Holder {
		if err := zklock.Revoke(ctx, c, parts[0].Node); err != nil {
			log.Fatal(err)
		}
	}
}

// Rebuild a cache under the write lock, then keep reading it without
// letting another writer change it in between.
func ExampleRWMutex_Downgrade() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	rw, err := zklock.NewRWMutex(c, "/locks/cache")
	if err != nil {
		log.Fatal(err)
	}
	write, err := rw.WriteLock().Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... rebuild ...
	read, err := rw.Downgrade(ctx, write) // write is released; no writer got in
	if err != nil {
		log.Fatal(err)
	}
	defer read.Release(ctx)
	// ... serve from what was just built ...
}

// Bound work the lock protects, but the resource cannot fence, by the
// lease's deadline.
func ExampleLease_ValidUntil() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/locks/report")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	for step := 0; step < 10; step++ {
		if time.Until(lease.ValidUntil()) < time.Second || lease.Err() != nil {
			log.Print("the lease may be lost soon: stopping")
			return
		}
		// ... one short step of work ...
	}
}

// A semaphore of 3 leases across every process on the path. Replicas made
// with another size may share the path during a rolling deploy: the smallest
// size among the live participants is in force, and none is refused for its
// size (under kazoo's layout, another size fails with ErrSizeMismatch).
func ExampleNewSemaphore() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := zklock.NewSemaphore(c, "/locks/exporters", 3)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := s.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
}

// A service moving from go-zookeeper's zk.Lock to zklock, one instance at
// a time: on one path the two exclude each other.
func ExampleMutex_migrateFromZkLock() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Old instances: zk.NewLock(conn, "/locks/jobs", acl).Lock()
	// New instances, on the same path:
	m, err := zklock.NewMutex(c, "/locks/jobs")
	if err != nil {
		log.Fatal(err)
	}
	err = zklock.Do(ctx, m, func(ctx context.Context) error {
		return nil // held: no zk.Lock holder holds now
	})
	if err != nil {
		log.Fatal(err)
	}
}
