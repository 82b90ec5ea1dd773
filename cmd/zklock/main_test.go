//go:build linux

package main

// The command's tests build the zklock binary once and run it, as an
// operator would, against the real ZooKeeper of ZKLOCK_TEST_SERVERS. They
// are Linux's, as Pdeathsig and the terminal handover they check are.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// testServersEnv names the ZooKeeper the tests run against, as for the
// library's tests.
const testServersEnv = "ZKLOCK_TEST_SERVERS"

// long bounds every wait: far above what any step needs, so that a hang
// fails the test instead of blocking the run.
const long = 60 * time.Second

var (
	servers     string // ZKLOCK_TEST_SERVERS
	binary      string // the zklock binary TestMain built
	raceEnabled bool   // the tests run with -race, and so does the binary
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	servers = strings.TrimSpace(os.Getenv(testServersEnv))
	if servers == "" {
		fmt.Fprintf(os.Stderr, "%s is not set: run `make test`, which starts a ZooKeeper and sets it, "+
			"or set %s=host:port[,host:port...] to a ZooKeeper of your own\n", testServersEnv, testServersEnv)
		return 1
	}
	dir, err := os.MkdirTemp("", "zklock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "zklock")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race") // a race in the command fails its run (exit 66)
		if os.Getenv("GORACE") == "" {
			// Not the race runtime's default second of sleep at every exit.
			os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
	}
	build := exec.Command(goTool(), append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "go build of the zklock command failed: %v\n", err)
		return 1
	}
	return m.Run()
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// lockPath returns a lock path of the test's own.
func lockPath(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/zklock-cli-test/" + name + "-" + hex.EncodeToString(b)
}

// client opens a library Client, closed when the test ends.
func client(t *testing.T) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	c, err := zklock.Connect(ctx, strings.Split(servers, ","))
	if err != nil {
		t.Fatalf("connect to %s: %v", servers, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func participants(t *testing.T, c *zklock.Client, path string) []zklock.Participant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	ps, err := zklock.Participants(ctx, c, path)
	if err != nil {
		t.Fatalf("participants of %s: %v", path, err)
	}
	return ps
}

// awaitQueue waits until path has exactly the participants whose data is
// want, in queue order, the first holds of them.
func awaitQueue(t *testing.T, c *zklock.Client, path string, holders int, want ...string) []zklock.Participant {
	t.Helper()
	var ps []zklock.Participant
	for deadline := time.Now().Add(long); ; time.Sleep(20 * time.Millisecond) {
		ps = participants(t, c, path)
		if queueIs(ps, holders, want) {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %s: want %q with %d holding; after %v it is %s", path, want, holders, long, describe(ps))
		}
	}
}

func queueIs(ps []zklock.Participant, holders int, want []string) bool {
	if len(ps) != len(want) {
		return false
	}
	for i, p := range ps {
		if string(p.Data) != want[i] || p.Holder != (i < holders) {
			return false
		}
	}
	return true
}

func describe(ps []zklock.Participant) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%s holder=%v data=%q] ", filepath.Base(p.Node), p.Holder, p.Data)
	}
	return b.String()
}

// eventually polls cond until it holds, and fails the test if it does not
// within long.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(long)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{long}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proc is a zklock process a test started.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{} // closed once it has exited and been reaped
	code           int           // its exit code, -1 if a signal killed it
}

// env is the environment of a zklock process: the test's, with
// ZKLOCK_SERVERS set to the test server, and extra.
func env(extra ...string) []string {
	return append(os.Environ(), append([]string{"ZKLOCK_SERVERS=" + servers}, extra...)...)
}

// start starts zklock with args and environ. The process is stopped (by its
// pid: SIGTERM, then SIGKILL) and reaped when the test ends, if it has not
// exited by then.
func start(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	return p.begin(t)
}

// begin starts p's command, reaps it when it exits, and stops it when the
// test ends.
func (p *proc) begin(t *testing.T) *proc {
	t.Helper()
	args := p.cmd.Args[1:]
	// A command that outlives zklock (it must not) keeps the output pipes
	// open: Wait must not wait for it.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start zklock %q: %v", args, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits for the process to exit and returns its exit code; it fails
// the test if that takes longer than long.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(long):
		t.Fatalf("zklock %q did not exit within %v; stderr:\n%s", p.cmd.Args[1:], long, p.stderr.String())
		return 0
	}
}

// run runs zklock to completion and returns its exit code, stdout and
// stderr.
func run(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	p := start(t, environ, args...)
	code := p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// runBounded is run for a goroutine other than the test's: it reports
// instead of failing the test, and kills zklock (by its pid) if it runs
// longer than long.
func runBounded(environ []string, args ...string) (code int, stderr string) {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	var errb syncBuffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env, cmd.Stderr = environ, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		return -1, err.Error()
	}
	if ctx.Err() != nil {
		return -1, fmt.Sprintf("killed after %v; stderr:\n%s", long, errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

// expectCode runs zklock and fails the test unless it exits with want.
func expectCode(t *testing.T, want int, environ []string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := run(t, environ, args...)
	if code != want {
		t.Fatalf("zklock %q exited %d, want %d; stdout:\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
	}
	return stdout, stderr
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// readLines returns the lines of a file the commands write; a missing file
// has none.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// commandPid waits for a command to have written its pid to name (it
// writes a temporary file and renames it, so a read never sees half of
// it). If the command, whose command line has the word want, still runs
// when the test ends (zklock failed to stop it), it is killed then.
func commandPid(t *testing.T, name, want string) int {
	t.Helper()
	var pid int
	eventually(t, func() bool {
		data, err := os.ReadFile(name)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(data), &pid)
		return err == nil
	}, "pid in %s", name)
	t.Cleanup(func() {
		if !gone(pid, want) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// writePid is a shell fragment that writes the shell's pid to $PIDFILE.
const writePid = `echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; `

// gone reports whether process pid has exited: it no longer exists, or it
// is a zombie that nobody reaped yet (its command line is empty then).
// want is a word of its command line, so a reused pid does not count.
func gone(pid int, want string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err != nil || !bytes.Contains(cmdline, []byte(want))
}
