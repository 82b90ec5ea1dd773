// Command rwlock shows zklock's RWMutex: readers share the lock, a writer
// holds it alone, and a queued writer goes before readers that arrive after
// it.
//
//	go run ./examples/rwlock    # a ZooKeeper at 127.0.0.1:2181
//	ZKLOCK_SERVERS=zk1:2181,zk2:2181 go run ./examples/rwlock
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/examples/internal/demo"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := demo.Servers()
	path := fmt.Sprintf("/zklock-examples/rwlock-%d", time.Now().UnixNano())

	rw := func(name string) *zklock.RWMutex {
		c := demo.Connect(ctx, servers)
		l, err := zklock.NewRWMutex(c, path, zklock.WithNodeData([]byte(name)))
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	r1, err := rw("reader-1").ReadLock().Acquire(ctx)
	must(err)
	r2, err := rw("reader-2").ReadLock().Acquire(ctx)
	must(err)
	fmt.Println("two readers hold together")

	writer := rw("writer")
	wdone := make(chan *zklock.Lease)
	go func() {
		l, err := writer.WriteLock().Acquire(ctx)
		must(err)
		fmt.Println("writer holds alone")
		wdone <- l
	}()
	waitFor(ctx, writer, 3)

	late := rw("reader-3")
	rdone := make(chan *zklock.Lease)
	go func() {
		l, err := late.ReadLock().Acquire(ctx)
		must(err)
		fmt.Println("reader-3 holds, after the writer")
		rdone <- l
	}()
	waitFor(ctx, writer, 4)
	show(ctx, writer)

	must(r1.Release(ctx))
	must(r2.Release(ctx))
	w := <-wdone
	must(w.Release(ctx))
	r3 := <-rdone
	must(r3.Release(ctx))
}

// waitFor waits until n participants are queued.
func waitFor(ctx context.Context, rw *zklock.RWMutex, n int) {
	for {
		ps, err := rw.Participants(ctx)
		must(err)
		if len(ps) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func show(ctx context.Context, rw *zklock.RWMutex) {
	ps, err := rw.Participants(ctx)
	must(err)
	for _, p := range ps {
		side := "write"
		if p.Read {
			side = "read"
		}
		fmt.Printf("  %-8s %-5s holder=%v\n", p.Data, side, p.Holder)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
