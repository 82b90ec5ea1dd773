// Command semaphore shows zklock's Semaphore: six workers share three
// leases, never more than three at once, and AcquireN takes two leases all
// at once.
//
//	go run ./examples/semaphore    # a ZooKeeper at 127.0.0.1:2181
//	ZKLOCK_SERVERS=zk1:2181,zk2:2181 go run ./examples/semaphore
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/examples/internal/demo"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := demo.Servers()
	path := fmt.Sprintf("/zklock-examples/semaphore-%d", time.Now().UnixNano())

	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for w := 1; w <= 6; w++ {
		c := demo.Connect(ctx, servers)
		defer c.Close()
		s, err := zklock.NewSemaphore(c, path, 3)
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := zklock.Do(ctx, s, func(ctx context.Context) error {
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				fmt.Printf("worker %d holds a lease (%d in use)\n", w, n)
				time.Sleep(100 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			if err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("most leases in use at once:", peak.Load())

	c := demo.Connect(ctx, servers)
	defer c.Close()
	s, _ := zklock.NewSemaphore(c, path, 3)
	leases, err := s.AcquireN(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("AcquireN(2) holds", len(leases), "leases")
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
}
