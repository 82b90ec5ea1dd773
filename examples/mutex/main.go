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
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zklock"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := zkServers()
	path := fmt.Sprintf("/zklock-examples/mutex-%d", time.Now().UnixNano())

	var wg sync.WaitGroup
	for w := 1; w <= 4; w++ {
		c := connect(ctx, servers)
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
	c := connect(ctx, servers)
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
