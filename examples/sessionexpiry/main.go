// Command sessionexpiry shows how to test what a service does when the
// ZooKeeper session behind its lock expires, with zktest's fault-injecting
// transport.
//
// The service under test holds a zklock.Mutex and works only while it
// holds it. The program connects it through a zktest.Faults, then expires
// its session twice:
//
//  1. with Faults.ExpireSession, which ends the session on the server in
//     about a second (as Curator's KillSession does): the service must
//     notice, a rival that was queued must get the lock with a greater
//     fencing token, and the service must come back in a new session;
//  2. with Faults.PartitionUntilExpired, which cuts the service off until
//     the server expires the session, as a real network failure would: the
//     service must stop working as soon as its connection is lost, before
//     the server lets anyone else in.
//
// It prints what happens and exits with status 1 if the service misbehaves.
// It starts a throwaway ZooKeeper container with zktest.Run (Docker needed;
// the image comes from ZKLOCK_ZK_IMAGE, or else zktest.DefaultImage), or
// uses the servers in ZKLOCK_SERVERS:
//
//	go run ./examples/sessionexpiry
//	ZKLOCK_SERVERS=127.0.0.1:2181 go run ./examples/sessionexpiry
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

func main() { os.Exit(mainCode()) }

func mainCode() int {
	log.SetFlags(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var servers []string
	if s := os.Getenv("ZKLOCK_SERVERS"); s != "" {
		fmt.Fprintf(os.Stderr, "using ZooKeeper at %s (ZKLOCK_SERVERS)\n", s)
		servers = strings.Split(s, ",")
	} else {
		fmt.Println("starting a ZooKeeper container...")
		zkc, err := zktest.Run(ctx, zktest.Image())
		defer func() {
			if err := zkc.Terminate(context.Background()); err != nil {
				log.Print(err)
			}
		}()
		if err != nil {
			log.Print(err)
			return 1
		}
		servers = zkc.Servers()
	}
	if err := run(ctx, servers, os.Stdout); err != nil {
		fmt.Println("FAIL:", err)
		return 1
	}
	fmt.Println("PASS: the service handles session expiry")
	return 0
}

// Event is what the service reports, for the test to check.
type Event struct {
	Kind  string // "acquired" or "lost"
	Token int64  // of the lease acquired or lost
	Err   error  // why it was lost
	At    time.Time
}

// Service is the code under test: it works only while it holds its lock,
// and stops the moment its lease ends.
type Service struct {
	Lock   zklock.Locker
	Events chan<- Event
}

// Run acquires the lock, works while it holds it, and starts over when it
// loses it, until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	for {
		lease, err := s.Lock.Acquire(ctx)
		if err != nil {
			return err
		}
		s.Events <- Event{Kind: "acquired", Token: lease.Token(), At: time.Now()}
		select {
		case <-lease.Done(): // lost: stop working now
			s.Events <- Event{Kind: "lost", Token: lease.Token(), Err: lease.Err(), At: time.Now()}
			// Release cleans up what is left; the lease is gone either way.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = lease.Release(rctx)
			cancel()
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := lease.Release(rctx)
			cancel()
			return errors.Join(ctx.Err(), err)
		}
	}
}

const sessionTimeout = 2 * time.Second

// run is the test: it starts the service and a rival on servers, breaks
// the service's session two ways, and checks what the service did.
func run(ctx context.Context, servers []string, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	path := fmt.Sprintf("/zklock-examples/sessionexpiry-%d", time.Now().UnixNano())

	// The service talks to ZooKeeper through a transport the test controls.
	faults := zktest.NewFaults(nil)
	defer faults.Close()
	client, err := zklock.Connect(ctx, servers,
		zklock.WithDialer(faults.Dialer()), zklock.WithSessionTimeout(sessionTimeout))
	if err != nil {
		return err
	}
	defer client.Close() // before faults.Close: defers run last-in first-out
	mutex, err := zklock.NewMutex(client, path)
	if err != nil {
		return err
	}
	events := make(chan Event, 16)
	svc := &Service{Lock: mutex, Events: events}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	sc := &scenario{out: out, faults: faults, client: client, mutex: mutex, events: events, done: done}

	first, err := sc.next("acquired")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "service acquired the lock in session %#x, token %#x\n", client.SessionID(), first.Token)

	// A rival queues behind the service.
	rivalClient, err := zklock.Connect(ctx, servers)
	if err != nil {
		return err
	}
	defer rivalClient.Close()
	rivalMutex, err := zklock.NewMutex(rivalClient, path)
	if err != nil {
		return err
	}
	rival := make(chan *zklock.Lease, 1)
	go func() {
		lease, err := rivalMutex.Acquire(ctx)
		if err == nil {
			rival <- lease
		}
	}()
	if err := sc.awaitQueue(ctx, 2); err != nil {
		return err
	}
	if err := sc.expire(ctx, first, rival); err != nil {
		return err
	}
	return sc.partition(ctx)
}

// scenario is the service under test, and what the test breaks it with.
type scenario struct {
	out    io.Writer
	faults *zktest.Faults
	client *zklock.Client
	mutex  *zklock.Mutex
	events <-chan Event
	done   <-chan error // the service's Run returned
}

// next waits for the service's next event, which must be of kind.
func (sc *scenario) next(kind string) (Event, error) {
	select {
	case ev := <-sc.events:
		if ev.Kind != kind {
			return ev, fmt.Errorf("service: want %q, got %q (%v)", kind, ev.Kind, ev.Err)
		}
		return ev, nil
	case err := <-sc.done:
		return Event{}, fmt.Errorf("service stopped: %w", err)
	case <-time.After(30 * time.Second):
		return Event{}, fmt.Errorf("service: no %q within 30s", kind)
	}
}

// awaitQueue waits until the lock has n participants.
func (sc *scenario) awaitQueue(ctx context.Context, n int) error {
	for {
		parts, err := sc.mutex.Participants(ctx)
		if err != nil {
			return err
		}
		if len(parts) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// expire expires the service's session now: the service must notice, the
// rival queued behind it must get the lock with a greater token than
// first's, and the service must come back in a new session.
func (sc *scenario) expire(ctx context.Context, first Event, rival <-chan *zklock.Lease) error {
	fmt.Fprintln(sc.out, "-- expiring the service's session with Faults.ExpireSession")
	old := sc.client.SessionID()
	if err := sc.faults.ExpireSession(ctx); err != nil {
		return err
	}
	lost, err := sc.next("lost")
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.out, "service lost its lease: %v\n", lost.Err)
	var rivalLease *zklock.Lease
	select {
	case rivalLease = <-rival:
	case <-time.After(30 * time.Second):
		return errors.New("rival: did not get the lock after the service's session expired")
	}
	fmt.Fprintf(sc.out, "rival acquired the lock, token %#x\n", rivalLease.Token())
	if rivalLease.Token() <= first.Token {
		return fmt.Errorf("rival's token %#x is not greater than the service's %#x", rivalLease.Token(), first.Token)
	}
	if err := rivalLease.Release(ctx); err != nil {
		return err
	}
	again, err := sc.next("acquired")
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.out, "service acquired the lock again in session %#x, token %#x\n", sc.client.SessionID(), again.Token)
	if sc.client.SessionID() == old {
		return errors.New("service: still in its old session")
	}
	return nil
}

// partition cuts the service off until the server expires its session: the
// service must stop working as soon as its lease's deadline passes, before
// the server could let anyone else in, and come back afterwards.
func (sc *scenario) partition(ctx context.Context) error {
	fmt.Fprintln(sc.out, "-- partitioning the service until its session expires (Faults.PartitionUntilExpired)")
	cut := time.Now()
	expired := make(chan error, 1)
	go func() { expired <- sc.faults.PartitionUntilExpired(ctx) }()
	lost, err := sc.next("lost")
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.out, "service lost its lease %v into the partition: %v\n", lost.At.Sub(cut).Round(100*time.Millisecond), lost.Err)
	if !errors.Is(lost.Err, zklock.ErrLeaseExpired) {
		return fmt.Errorf("service: want the lease lost at its deadline first, got %v", lost.Err)
	}
	if lost.At.Sub(cut) >= sessionTimeout {
		return fmt.Errorf("service: stopped only %v after the partition began, not before the server could expire its session", lost.At.Sub(cut))
	}
	if err := <-expired; err != nil {
		return err
	}
	again, err := sc.next("acquired")
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.out, "service acquired the lock again in session %#x, token %#x\n", sc.client.SessionID(), again.Token)
	return nil
}
