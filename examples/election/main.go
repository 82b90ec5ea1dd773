// Command election shows zklock's Election: three replicas, each with its
// own ZooKeeper session, campaign on one path; one leads at a time, in the
// order they campaigned, each with a higher fencing token than the last,
// while an observer reports every change of leader, "no leader" included.
// Then the same replicas run as a service would: each calls Lead in a loop,
// so they take turns, never two at once. Curator's LeaderLatch on the same
// path takes part in the same election.
//
//	go run ./examples/election    # a ZooKeeper at 127.0.0.1:2181
//	ZKLOCK_SERVERS=zk1:2181,zk2:2181 go run ./examples/election
package main

import (
	"context"
	"errors"
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
	path := fmt.Sprintf("/zklock-examples/election-%d", time.Now().UnixNano())

	// An observer: it watches only the leader's node, never the queue.
	oc := demo.Connect(ctx, servers)
	defer oc.Close()
	watcher, err := zklock.NewElection(oc, path, zklock.WithNodeData([]byte("observer")))
	if err != nil {
		log.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := watcher.Observe(octx)
	<-changes // the first report: nobody leads yet

	var replicas []*zklock.Election
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		c := demo.Connect(ctx, servers)
		defer c.Close()
		e, err := zklock.NewElection(c, path, zklock.WithNodeData([]byte(name)))
		if err != nil {
			log.Fatal(err)
		}
		replicas = append(replicas, e)
	}

	// The replicas campaign one after another; Campaign returns once the
	// replica leads, and they lead in the order they campaigned.
	leases := make(chan *zklock.Lease, len(replicas))
	for i, e := range replicas {
		e := e
		go func() {
			lease, err := e.Campaign(ctx)
			if err != nil {
				log.Fatal(err)
			}
			leases <- lease
		}()
		waitForCandidates(ctx, watcher, i+1)
	}

	var last int64
	for range replicas {
		lease := <-leases
		p := <-changes // the observer saw the change of leader
		fmt.Printf("%s leads: token %d (the last leader's was %d), observer saw %s\n",
			p.Data, lease.Token(), last, p.Data)
		last = lease.Token()
		// Lead, and stop acting as leader if lease.Done() closes.
		select {
		case <-lease.Done():
			log.Fatalf("leadership lost: %v", lease.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if err := lease.Release(ctx); err != nil { // resign: the next in line leads
			log.Fatal(err)
		}
	}
	if p := <-changes; p.Node == "" {
		fmt.Println("observer saw: no leader")
	}
	if _, err := watcher.Leader(ctx); errors.Is(err, zklock.ErrNoLeader) {
		fmt.Println("Leader: no leader")
	}

	leadInTurn(ctx, replicas, 2)
}

// leadInTurn runs each replica as a service runs it: Lead in a loop, which
// campaigns, runs the leader's work while it leads, resigns when the work
// returns, and campaigns again at the back of the line. Each replica stops
// after terms terms, when ctx ends or when its Client is closed.
func leadInTurn(ctx context.Context, replicas []*zklock.Election, terms int) {
	var (
		wg      sync.WaitGroup
		leading atomic.Int32 // replicas running their leader's work
	)
	for i, e := range replicas {
		r := &replica{name: fmt.Sprint("replica-", string(rune('a'+i))), e: e, terms: terms, leading: &leading}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx)
		}()
	}
	wg.Wait()
}

// replica is one replica of leadInTurn.
type replica struct {
	name    string
	e       *zklock.Election
	terms   int
	leading *atomic.Int32 // replicas running their leader's work
}

// run leads terms terms, campaigning again after each, until ctx ends or
// the Client is closed.
func (r *replica) run(ctx context.Context) {
	for term := 1; term <= r.terms && ctx.Err() == nil; {
		err := r.e.Lead(ctx, func(ctx context.Context) error { return r.work(ctx, term) })
		switch {
		case errors.Is(err, zklock.ErrClientClosed):
			return
		case err != nil:
			log.Printf("%s: %v", r.name, err)
			select { // back off before campaigning again
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		default:
			term++
		}
	}
}

// work is the leader's work, which Lead runs while r leads; ctx ends when
// leadership may be lost.
func (r *replica) work(ctx context.Context, term int) error {
	if r.leading.Add(1) > 1 {
		log.Fatal("two replicas lead at once")
	}
	defer r.leading.Add(-1)
	fmt.Printf("%s leads (term %d of its %d)\n", r.name, term, r.terms)
	select {
	case <-ctx.Done(): // leadership may be lost: stop at once
		return nil // Lead says why
	case <-time.After(50 * time.Millisecond): // the leader's work
		return nil
	}
}

// waitForCandidates waits until the election has n candidates, so that the
// replicas campaign in a known order.
func waitForCandidates(ctx context.Context, e *zklock.Election, n int) {
	for ctx.Err() == nil {
		if ps, err := e.Participants(ctx); err == nil && len(ps) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
