package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zklock"
)

func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"}, zklock.WithSessionTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Printf("session %#x\n", c.SessionID())
}

func ExampleMutex() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m, err := zklock.NewMutex(c, "/locks/billing")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	select {
	case <-lease.Done():
		log.Printf("lost the lock: %v", lease.Err())
	default:
		// Pass the token to what the lock protects, so it can refuse a
		// stale holder.
		fmt.Println("holding with token", lease.Token())
	}
}

func ExampleMutex_TryAcquire() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/locks/cron")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.TryAcquire(ctx)
	if errors.Is(err, zklock.ErrLocked) {
		fmt.Println("another instance runs the job")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	fmt.Println("running the job")
}

func ExampleRWMutex() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	rw, err := zklock.NewRWMutex(c, "/locks/config")
	if err != nil {
		log.Fatal(err)
	}
	err = zklock.Do(ctx, rw.ReadLock(), func(ctx context.Context) error {
		// Many readers hold at once; ctx is cancelled if the lease is lost.
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleSemaphore_AcquireN() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := zklock.NewSemaphore(c, "/locks/gpu", 4)
	if err != nil {
		log.Fatal(err)
	}
	leases, err := s.AcquireN(ctx, 2) // two of four, all at once or not at all
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		defer l.Release(ctx)
	}
	fmt.Println("holding", len(leases), "leases")
}

func ExampleDo() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/locks/migrations")
	if err != nil {
		log.Fatal(err)
	}
	err = zklock.Do(ctx, m, func(ctx context.Context) error {
		// Stop when ctx is done: the lease was lost (or ctx ended).
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// oldestFirst is a user policy written against the Driver interface: it
// writes mutex nodes, so it excludes (and queues fairly with) every Mutex
// on the path, in zklock, Curator or kazoo; only the head of the queue
// holds, and everyone else watches their predecessor.
type oldestFirst struct{}

func (oldestFirst) Kind() zklock.Kind { return zklock.KindMutex }

func (oldestFirst) GetsTheLock(children []zklock.Child, first, _ int) zklock.Decision {
	if first == 0 {
		return zklock.Decision{Holds: true}
	}
	return zklock.Decision{Watch: []int{first - 1}}
}

func ExampleNewLock() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := zklock.NewLock(c, "/locks/custom", oldestFirst{})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	parts, err := l.Participants(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range parts {
		fmt.Printf("%s holder=%v data=%q\n", p.Node, p.Holder, p.Data)
	}
}
