package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/zkrecipes/zklock"
)

func ExampleElection() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e, err := zklock.NewElection(c, "/services/billing/leader", zklock.WithNodeData([]byte("billing-7")))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := e.Campaign(ctx) // waits until this replica leads
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx) // resigns: the next candidate in line leads

	select {
	case <-lease.Done():
		// Leadership may be lost: stop acting as the leader at once.
		log.Printf("no longer leading: %v", lease.Err())
	default:
		// Lead, passing lease.Token() to what leadership protects.
		fmt.Println("leading with token", lease.Token())
	}
}

func ExampleElection_Lead() {
	// The replica stops leading, and campaigning, at SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e, err := zklock.NewElection(c, "/services/reports/leader", zklock.WithNodeData([]byte("reports-3")))
	if err != nil {
		log.Fatal(err)
	}
	// Lead, and after each term (resigned or lost) campaign again, at the
	// back of the line: Curator's LeaderSelector with autoRequeue.
	for ctx.Err() == nil { // ctx's end, not an error that wraps context.Canceled: a loss cancels fn's ctx too
		err := e.Lead(ctx, func(ctx context.Context) error {
			tick := time.NewTicker(time.Minute)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done(): // leadership may be lost, or the replica stops
					return nil // Lead's error says if leadership was lost
				case <-tick.C:
					fmt.Println("writing the reports") // the leader's work
				}
			}
		})
		if errors.Is(err, zklock.ErrClientClosed) {
			return
		}
		if ctx.Err() == nil {
			log.Printf("no longer leading: %v", err)
			select { // back off before the next campaign
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e, err := zklock.NewElection(c, "/services/billing/leader")
	if err != nil {
		log.Fatal(err)
	}
	if leader, err := e.Leader(ctx); errors.Is(err, zklock.ErrNoLeader) {
		fmt.Println("nobody leads")
	} else if err == nil {
		fmt.Printf("%s leads\n", leader.Data)
	}
	for p := range e.Observe(ctx) { // the leader now, then every change; ends with ctx
		if p.Node == "" {
			fmt.Println("no leader")
			continue
		}
		fmt.Printf("%s leads (node %s)\n", p.Data, p.Node)
	}
}

func ExampleParticipants() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Any lock path: zklock's, Curator's or kazoo's.
	ps, err := zklock.Participants(ctx, c, "/locks/billing")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range ps {
		state := "waits"
		if p.Holder {
			state = "holds"
		}
		fmt.Println(state, p.Kind, p.Node, string(p.Data))
	}
}
