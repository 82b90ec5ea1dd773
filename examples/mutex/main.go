// Command mutex shows zklock's Mutex: four workers, each with its own
// ZooKeeper session, take turns in a critical section in FIFO order, and
// each hold carries a fencing token that only grows.
//
//	go run ./examples/mutex    # a ZooKeeper at 127.0.0.1:2181
//	ZKLOCK_SERVERS=zk1:2181,zk2:2181 go run ./examples/mutex
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/examples/internal/demo"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := demo.Servers()
	path := fmt.Sprintf("/zklock-examples/mutex-%d", time.Now().UnixNano())

	var wg sync.WaitGroup
	for w := 1; w <= 4; w++ {
		c := demo.Connect(ctx, servers)
		defer c.Close()
		m, err := zklock.NewMutex(c, path, zklock.WithNodeData([]byte(fmt.Sprintf("worker-%d", w))))
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2; i++ {
				err := zklock.Do(ctx, m, func(ctx context.Context) error {
					fmt.Printf("worker %d holds %s\n", w, path)
					time.Sleep(50 * time.Millisecond) // the critical section
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()

	// TryAcquire never waits: it fails with ErrLocked while someone holds.
	c := demo.Connect(ctx, servers)
	defer c.Close()
	m, _ := zklock.NewMutex(c, path)
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	other, _ := zklock.NewMutex(c, path)
	if _, err := other.TryAcquire(ctx); err != nil {
		fmt.Println("TryAcquire while held:", err)
	}
	fmt.Println("token of the last hold:", lease.Token())
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
}
