// Command driver shows a user-written lock policy on zklock's engine: a
// read lock that admits at most two readers at a time, with writers
// excluding everyone, on the RWMutex's node format.
//
//	go run ./examples/driver    # a ZooKeeper at 127.0.0.1:2181
//	ZKLOCK_SERVERS=zk1:2181,zk2:2181 go run ./examples/driver
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

// cappedReaders holds when no writer is queued ahead and fewer than max
// readers are. It meets the Driver contract: it looks only at children
// ahead, and removing a child ahead never takes a hold away.
//
// Its wake-up is simple rather than optimal: a reader blocked by the cap
// watches the oldest reader ahead, so a younger reader's release does not
// wake it. That is always safe (it never lets too many in) but can leave a
// slot free for a while; zklock's Semaphore shows how to wake exactly the
// right waiter.
type cappedReaders struct{ max int }

func (cappedReaders) Kind() zklock.Kind { return zklock.KindRead }

func (d cappedReaders) GetsTheLock(children []zklock.Child, first, _ int) zklock.Decision {
	readers, oldest := 0, -1
	for i := first - 1; i >= 0; i-- {
		if children[i].Kind != zklock.KindRead {
			return zklock.Decision{Watch: []int{i}} // the nearest writer ahead
		}
		readers, oldest = readers+1, i
	}
	if readers < d.max {
		return zklock.Decision{Holds: true}
	}
	return zklock.Decision{Watch: []int{oldest}}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := demo.Servers()
	path := fmt.Sprintf("/zklock-examples/driver-%d", time.Now().UnixNano())

	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for r := 1; r <= 5; r++ {
		c := demo.Connect(ctx, servers)
		defer c.Close()
		l, err := zklock.NewLock(c, path, cappedReaders{max: 2})
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := zklock.Do(ctx, l, func(ctx context.Context) error {
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				fmt.Printf("reader %d reads (%d reading)\n", r, n)
				time.Sleep(50 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			if err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("most readers at once:", peak.Load(), "(cap 2)")
}
