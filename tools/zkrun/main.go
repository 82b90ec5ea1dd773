// Command zkrun runs a command against a throwaway ZooKeeper server:
//
//	go run ./tools/zkrun [-v] [-env NAME[,NAME...]] [--] command [args...]
//
// It starts a container with [zktest.Run], with the image named by
// ZKLOCK_ZK_IMAGE or else [zktest.DefaultImage], runs the command with the
// environment variables named by -env set to the server's address
// (127.0.0.1:port), and terminates the container when the command exits or
// when zkrun gets SIGINT or SIGTERM, which it forwards to the command. zkrun
// exits with the command's status: its exit code, or 128 plus the number of
// the signal that killed it. Its own failures exit with 125, a command that
// cannot be started with 126 or 127.
//
// -env defaults to ZKLOCK_SERVERS, which the example programs read; zklock's
// tests read ZKLOCK_TEST_SERVERS:
//
//	go run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- go test -race ./...
//
// When one of the named variables is already set, zkrun starts nothing and
// runs the command against those servers, with the other names set to the
// same value.
//
// Since zkrun always terminates its container itself, it runs without
// testcontainers' reaper (Ryuk), which is often not pullable where zkrun is
// used; set TESTCONTAINERS_RYUK_DISABLED=false to have it anyway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/zkrecipes/zklock/zktest"
)

const (
	serversEnv = "ZKLOCK_SERVERS"

	exitFailure     = 125
	exitNotRunnable = 126
	exitNotFound    = 127

	// How long a command has to exit after a forwarded signal before it is
	// killed, so that the container is always terminated.
	killGrace = 10 * time.Second
)

func main() {
	os.Exit(run())
}

func run() int {
	verbose := flag.Bool("v", false, "print testcontainers' log")
	envList := flag.String("env", serversEnv, "comma-separated `names` of the environment variables to set to the server's address")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(),
			"usage: zkrun [-v] [-env NAME[,NAME...]] [--] command [args...]\n\n"+
				"Runs command with %s (or the -env names) set to a throwaway ZooKeeper server.\n\n", serversEnv)
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	names := envNames(*envList)
	if len(args) == 0 || len(names) == 0 {
		flag.Usage()
		return 2
	}

	// The command gets the environment zkrun was given, not zkrun's own tweaks.
	env := os.Environ()
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	if !*verbose {
		tclog.SetDefault(tclog.NewNoopLogger())
	}

	// Catch signals from the start: no signal may kill zkrun between
	// creating the container and terminating it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var servers string
	for _, name := range names {
		if servers = os.Getenv(name); servers != "" {
			break
		}
	}
	if servers == "" {
		c, code := startServer(sigs)
		defer terminate(c)
		if code != 0 {
			return code
		}
		servers = c.ClientEndpoint()
	}
	for _, name := range names {
		env = setEnv(env, name, servers)
	}
	return runCommand(args, env, sigs)
}

// envNames splits -env's list, dropping empty names.
func envNames(list string) []string {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// startServer starts the container; a non-zero code means zkrun must exit
// with it, after terminating c if c is not nil.
func startServer(sigs <-chan os.Signal) (*zktest.Container, int) {
	image := zktest.Image()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type result struct {
		c   *zktest.Container
		err error
	}
	started := make(chan result, 1)
	go func() {
		c, err := zktest.Run(ctx, image)
		started <- result{c, err}
	}()

	t0 := time.Now()
	select {
	case res := <-started:
		if res.err != nil {
			fmt.Fprintf(os.Stderr, "zkrun: %v\n", res.err)
			return res.c, exitFailure
		}
		fmt.Fprintf(os.Stderr, "zkrun: ZooKeeper (%s) serving on %s after %v\n",
			image, res.c.ClientEndpoint(), time.Since(t0).Round(100*time.Millisecond))
		return res.c, 0
	case sig := <-sigs:
		cancel()
		res := <-started
		return res.c, signalCode(sig)
	}
}

func terminate(c *zktest.Container) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Terminate(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "zkrun: %v\n", err)
	}
}

// runCommand runs the command to its end, forwarding signals to it, and
// returns the exit code zkrun should exit with.
func runCommand(args, env []string, sigs <-chan os.Signal) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "zkrun: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitNotRunnable
	}

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var kill <-chan time.Time
	for {
		select {
		case err := <-waited:
			return exitCode(cmd.ProcessState, err)
		case sig := <-sigs:
			// A terminal's Ctrl-C reached the command already; a kill aimed
			// at zkrun did not.
			_ = cmd.Process.Signal(sig)
			if kill == nil {
				kill = time.After(killGrace)
			}
		case <-kill:
			fmt.Fprintf(os.Stderr, "zkrun: %s still running %v after a signal: killing it\n", args[0], killGrace)
			_ = cmd.Process.Kill()
		}
	}
}

func exitCode(state *os.ProcessState, err error) int {
	if state == nil {
		fmt.Fprintf(os.Stderr, "zkrun: %v\n", err)
		return exitFailure
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalCode(ws.Signal())
	}
	return state.ExitCode()
}

func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// setEnv returns env with key set to value, replacing any earlier value.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
