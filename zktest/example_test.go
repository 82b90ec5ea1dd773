package zktest_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zkrecipes/zklock/zktest"
)

// Run starts a server outside of a test, for a program or a benchmark. The
// container is terminated even if Run fails half way. In a test, call
// testcontainers.CleanupContainer(t, c) right after Run instead, or use
// [zktest.Start].
func ExampleRun() {
	ctx := context.Background()
	c, err := zktest.Run(ctx, zktest.Image())
	defer func() {
		if err := testcontainers.TerminateContainer(c); err != nil {
			log.Print(err)
		}
	}()
	if err != nil {
		log.Fatal(err)
	}

	conn, _, err := zk.Connect(c.Servers(), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	path, err := conn.Create("/hello", []byte("world"), 0, zk.WorldACL(zk.PermAll))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created", path)
	// Output: created /hello
}

// A short tick lets sessions expire quickly: with a 50ms tick the shortest
// session timeout ZooKeeper grants is 100ms.
func ExampleWithTickTime() {
	c, err := zktest.Run(context.Background(), zktest.Image(),
		zktest.WithTickTime(50*time.Millisecond),
		zktest.WithConfig("minSessionTimeout", "100"),
	)
	defer testcontainers.TerminateContainer(c)
	if err != nil {
		log.Fatal(err)
	}
	conf, err := c.FourLetter(context.Background(), "conf")
	if err != nil {
		log.Fatal(err)
	}
	for line := range strings.Lines(conf) {
		if strings.HasPrefix(line, "minSessionTimeout=") {
			fmt.Print(line)
		}
	}
	// Output: minSessionTimeout=100
}

// Pausing the server is how a test makes a client lose its session: the
// client hears nothing, and when the server runs again it expires the
// sessions that missed their heartbeats.
func ExampleContainer_Pause() {
	ctx := context.Background()
	c, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(c)
	if err != nil {
		log.Fatal(err)
	}

	// The callback sees every event; it must not block.
	states := make(chan zk.State, 64)
	conn, _, err := zk.Connect(c.Servers(), time.Second, zk.WithEventCallback(func(ev zk.Event) {
		if ev.Type == zk.EventSession {
			select {
			case states <- ev.State:
			default:
			}
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	waitFor := func(want zk.State) bool {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case s := <-states:
				if s == want {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
	waitFor(zk.StateHasSession)

	// A paused server answers nothing: the client times out and disconnects.
	// (Whether the session then expires is a race on unpause: the server's
	// session clock was frozen too. Faults.ExpireSession expires one for sure.)
	if err := c.Pause(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("disconnected while paused:", waitFor(zk.StateDisconnected))
	if err := c.Unpause(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("connected again:", waitFor(zk.StateHasSession))
	// Output:
	// disconnected while paused: true
	// connected again: true
}

// Stop and Start restart the server on the same address, so existing clients
// reconnect by themselves and keep their sessions if the restart is shorter
// than their session timeout.
func ExampleContainer_Start() {
	ctx := context.Background()
	c, err := zktest.Run(ctx, zktest.Image())
	defer testcontainers.TerminateContainer(c)
	if err != nil {
		log.Fatal(err)
	}
	before := c.ClientEndpoint()

	if err := c.Stop(ctx, nil); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.ClientEndpoint() == before)
	// Output: true
}
