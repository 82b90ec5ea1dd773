package zktest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Start starts a ZooKeeper container of the test's own from [Image], as
// [Run] does with opts, and terminates it when the test and its subtests end
// (testcontainers.CleanupContainer). It stops the test if the container does
// not start. testcontainers' log lines go to the test's log.
//
// Start always starts a container, even when ZKLOCK_TEST_SERVERS is set: it is
// meant for tests that pause, stop or restart their server.
func Start(tb testing.TB, opts ...testcontainers.ContainerCustomizer) *Container {
	tb.Helper()
	opts = append([]testcontainers.ContainerCustomizer{testcontainers.WithLogger(tclog.TestLogger(tb))}, opts...)
	c, err := Run(tb.Context(), Image(), opts...)
	testcontainers.CleanupContainer(tb, c)
	require.NoError(tb, err, "zktest: start ZooKeeper")
	return c
}

// External reports whether the tests run against servers listed in the
// ZKLOCK_TEST_SERVERS environment variable rather than a container.
func External() bool {
	return len(externalServers()) > 0
}

func externalServers() []string {
	var servers []string
	for s := range strings.SplitSeq(os.Getenv(serversEnv), ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	return servers
}

var shared struct {
	once sync.Once
	c    *Container
	err  error
}

// mainRunning is set while [Main] runs the tests, and so will terminate the
// shared container.
var mainRunning atomic.Bool

// Servers returns the ZooKeeper servers for a test that does not break them:
// the servers in ZKLOCK_TEST_SERVERS when that variable is set, or else the
// endpoint of a container shared by the whole test binary, started by the
// first call from [Image] with [Run]'s defaults. If the shared container cannot start,
// every test that asks for it fails with the same error.
//
// The shared container is terminated by [Main]. Without Main, which nothing
// would then terminate, Servers starts a container for the test alone with
// [Start].
func Servers(tb testing.TB) []string {
	tb.Helper()
	if servers := externalServers(); len(servers) > 0 {
		return servers
	}
	if !mainRunning.Load() {
		tb.Log("zktest: TestMain does not call zktest.Main: starting a ZooKeeper for this test alone")
		return Start(tb).Servers()
	}
	shared.once.Do(func() {
		shared.c, shared.err = Run(context.Background(), Image())
		if shared.err != nil {
			// Nobody else holds it: do not leave it running.
			if err := shared.c.Terminate(context.Background()); err != nil {
				shared.err = fmt.Errorf("%w (and: %w)", shared.err, err)
			}
			shared.c = nil
		}
	})
	if shared.err != nil {
		tb.Fatalf("zktest: shared ZooKeeper: %v", shared.err)
	}
	return shared.c.Servers()
}

// Main runs the tests of a package, then terminates the shared container of
// [Servers] if one was started, and exits with the tests' exit code (1 if
// they passed but the container could not be terminated). Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
// While the tests run, SIGINT or SIGTERM terminates every container zktest
// started in this process before the process exits.
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	mainRunning.Store(true)
	defer mainRunning.Store(false)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			n := terminateAll()
			fmt.Fprintf(os.Stderr, "zktest: %v: terminated %d ZooKeeper container(s)\n", sig, n)
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		case <-stop:
		}
	}()

	code := m.Run()

	signal.Stop(sigs)
	close(stop)
	<-done

	if shared.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := shared.c.Terminate(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "zktest: shared ZooKeeper: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// live holds every container zktest created and has not seen terminated, for
// the signal handler of Main. Lifecycle hooks keep it current whoever
// terminates a container.
var live struct {
	sync.Mutex
	m map[string]testcontainers.Container
}

func track(_ context.Context, c testcontainers.Container) error {
	live.Lock()
	defer live.Unlock()
	if live.m == nil {
		live.m = make(map[string]testcontainers.Container)
	}
	live.m[c.GetContainerID()] = c
	return nil
}

func untrack(_ context.Context, c testcontainers.Container) error {
	live.Lock()
	defer live.Unlock()
	delete(live.m, c.GetContainerID())
	return nil
}

// terminateAll terminates every live container, concurrently, and returns how
// many it terminated.
func terminateAll() int {
	live.Lock()
	var ctrs []testcontainers.Container
	for _, c := range live.m {
		ctrs = append(ctrs, c)
	}
	live.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg sync.WaitGroup
		n  atomic.Int32
	)
	for _, c := range ctrs {
		wg.Go(func() {
			if err := c.Terminate(ctx); err == nil {
				n.Add(1)
			} else {
				fmt.Fprintf(os.Stderr, "zktest: terminate %s: %v\n", c.GetContainerID(), err)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}
