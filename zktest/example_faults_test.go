package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// ExpireSession ends a client's session on the server in about a second, so
// a test can check what a lock holder does when its session expires.
func ExampleFaults_ExpireSession() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}

	// The client under test talks through Faults.
	f := zktest.NewFaults(nil)
	defer f.Close()
	c, err := zklock.Connect(ctx, zkc.Servers(), zklock.WithDialer(f.Dialer()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := zklock.NewMutex(c, "/example/expire")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	before := c.SessionID()

	if err := f.ExpireSession(ctx); err != nil {
		log.Fatal(err)
	}
	<-lease.Done()
	// The server drops the connection, then refuses the session: the lease
	// ends with the expiry (or, had the reconnect been slow, at its
	// deadline), and Err keeps saying so.
	err = lease.Err()
	fmt.Println("lease lost:", errors.Is(err, zklock.ErrSessionExpired) || errors.Is(err, zklock.ErrLeaseExpired))

	// The client carries on in a new session.
	lease, err = m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new session:", c.SessionID() != before)
	_ = lease.Release(ctx)
	// Output:
	// lease lost: true
	// new session: true
}

// KillSession works while the client is cut off. Cutting the client off
// first, and killing its session only once it has noticed, keeps the order
// of a real expiry: the holder hears that its lease is lost before the
// server lets anyone else take the lock.
func ExampleFaults_KillSession() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	f := zktest.NewFaults(nil)
	defer f.Close()
	holder, err := zklock.Connect(ctx, zkc.Servers(), zklock.WithDialer(f.Dialer()))
	if err != nil {
		log.Fatal(err)
	}
	defer holder.Close()
	rival, err := zklock.Connect(ctx, zkc.Servers())
	if err != nil {
		log.Fatal(err)
	}
	defer rival.Close()
	hm, _ := zklock.NewMutex(holder, "/example/kill")
	rm, _ := zklock.NewMutex(rival, "/example/kill")
	lease, err := hm.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}

	f.Partition()
	f.Drop()
	<-lease.Done() // the holder stops relying on the lock at its deadline
	fmt.Println("holder's lease expired:", errors.Is(lease.Err(), zklock.ErrLeaseExpired))
	if err := f.KillSession(ctx); err != nil {
		log.Fatal(err)
	}
	taken, err := rm.Acquire(ctx) // only now can the rival get in
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rival's token is greater:", taken.Token() > lease.Token())
	f.Heal()
	_ = taken.Release(ctx)
	// Output:
	// holder's lease expired: true
	// rival's token is greater: true
}

// PartitionUntilExpired expires a session the slow, realistic way: the
// client misses its heartbeats and disconnects after two thirds of its
// session timeout, the server expires the session after the whole timeout,
// and the client is told when the partition heals.
func ExampleFaults_PartitionUntilExpired() {
	ctx := context.Background()
	zkc, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(zkc)
	if err != nil {
		log.Fatal(err)
	}
	f := zktest.NewFaults(nil)
	defer f.Close()
	var states []zk.State
	events := make(chan zk.State, 16)
	conn, _, err := zk.Connect(zkc.Servers(), time.Second, zk.WithDialer(f.Dialer()),
		zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				select {
				case events <- ev.State:
				default:
				}
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for st := range events {
		if st == zk.StateHasSession {
			break
		}
	}

	if err := f.PartitionUntilExpired(ctx); err != nil {
		log.Fatal(err)
	}
	for st := range events {
		if st == zk.StateDisconnected || st == zk.StateExpired {
			states = append(states, st)
		}
		if st == zk.StateExpired {
			break
		}
	}
	fmt.Println(states[0], "then", states[len(states)-1])
	// Output: StateDisconnected then StateExpired
}

// An ensemble survives its leader: the other two servers elect a new one,
// clients move over with their sessions, and the killed server comes back
// as a follower.
func ExampleEnsemble_KillLeader() {
	ctx := context.Background()
	e, err := zktest.RunEnsemble(ctx, zktest.Image())
	defer e.Terminate(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := zklock.Connect(ctx, e.Servers())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	session := c.SessionID()
	m, _ := zklock.NewMutex(c, "/example/ensemble")

	old, err := e.KillLeader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, err := e.Leader(ctx) // waits for the election
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new leader:", leader != old)

	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same session:", c.SessionID() == session)
	_ = lease.Release(ctx)

	if err := e.Node(old).Start(ctx); err != nil {
		log.Fatal(err)
	}
	srvr, err := e.Node(old).FourLetter(ctx, "srvr")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("back as follower:", strings.Contains(srvr, "Mode: follower"))
	// Output:
	// new leader: true
	// same session: true
	// back as follower: true
}

// Isolate partitions a server from the rest of the ensemble while its
// clients still reach it. Its client stays connected and can read, but
// cannot write, and for syncLimit ticks nothing tells it so; meanwhile the
// leader hears nothing of the client's session, and expires it when its
// timeout passes. A lease that trusts the connection alone outlives its
// session here.
func ExampleEnsemble_Isolate() {
	ctx := context.Background()
	e, err := zktest.RunEnsemble(ctx, zktest.Image())
	defer e.Terminate(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	follower := (leader + 1) % zktest.EnsembleSize
	conn, events, err := zk.Connect([]string{e.Node(follower).ClientEndpoint()}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for ev := range events { // a session needs the leader: open it first
		if ev.State == zk.StateHasSession {
			break
		}
	}

	if err := e.Isolate(ctx, follower); err != nil {
		log.Fatal(err)
	}
	_, _, err = conn.Get("/") // answered by the isolated follower
	fmt.Println("read while isolated:", err == nil)
	// ... a write through conn does not commit; after syncLimit ticks the
	// follower gives up, drops conn and refuses it until healed ...

	if err := e.Heal(ctx, follower); err != nil {
		log.Fatal(err)
	}
	// The follower rejoins by itself; conn reconnects to it.
}
