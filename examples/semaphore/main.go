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
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zklock"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := zkServers()
	path := fmt.Sprintf("/zklock-examples/semaphore-%d", time.Now().UnixNano())

	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for w := 1; w <= 6; w++ {
		c := connect(ctx, servers)
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

	c := connect(ctx, servers)
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

// zkServers returns the ZooKeeper servers to use, ZKLOCK_SERVERS's or else
// 127.0.0.1:2181, and says which.
func zkServers() []string {
	s := os.Getenv("ZKLOCK_SERVERS")
	if s == "" {
		s = "127.0.0.1:2181"
		fmt.Fprintf(os.Stderr, "using ZooKeeper at %s (ZKLOCK_SERVERS is not set)\n", s)
	} else {
		fmt.Fprintf(os.Stderr, "using ZooKeeper at %s (ZKLOCK_SERVERS)\n", s)
	}
	return strings.Split(s, ",")
}

// connect opens a session on servers, or says what to do if it cannot
// within 10 seconds.
func connect(ctx context.Context, servers []string) *zklock.Client {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers)
	if err != nil {
		log.Fatalf("%v\nIs ZooKeeper running at %s? Start one (make demo does), or set ZKLOCK_SERVERS=host:port[,host:port...]",
			err, strings.Join(servers, ","))
	}
	return c
}
