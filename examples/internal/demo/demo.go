// Package demo is what the example programs share: which ZooKeeper to use,
// and a connect that says what to do when there is none.
package demo

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/zkrecipes/zklock"
)

// Servers returns the ZooKeeper servers to use, ZKLOCK_SERVERS's or else
// 127.0.0.1:2181, and says which.
func Servers() []string {
	s := os.Getenv("ZKLOCK_SERVERS")
	if s == "" {
		s = "127.0.0.1:2181"
		fmt.Fprintf(os.Stderr, "using ZooKeeper at %s (ZKLOCK_SERVERS is not set)\n", s)
	} else {
		fmt.Fprintf(os.Stderr, "using ZooKeeper at %s (ZKLOCK_SERVERS)\n", s)
	}
	return strings.Split(s, ",")
}

// Connect opens a session on servers, or says what to do if it cannot
// within 10 seconds, and exits.
func Connect(ctx context.Context, servers []string, opts ...zklock.Option) *zklock.Client {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, opts...)
	if err != nil {
		log.Fatalf("%v\nIs ZooKeeper running at %s? Start one (make demo does), or set ZKLOCK_SERVERS=host:port[,host:port...]",
			err, strings.Join(servers, ","))
	}
	return c
}
