//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// checkAlternation checks the lines that holders appended around their
// holds ("start <pid> <token> ..." then "end <pid>"): they strictly
// alternate, each end matching its start, so no two holds overlapped, and
// the tokens strictly increase in the order the holds happened. It returns
// the start lines' fields.
func checkAlternation(t *testing.T, lines []string, holds int) [][]string {
	t.Helper()
	if len(lines) != 2*holds {
		t.Fatalf("%d lines, want %d (a start and an end per hold):\n%s", len(lines), 2*holds, strings.Join(lines, "\n"))
	}
	var (
		starts [][]string
		last   int64
	)
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(start) < 3 || start[0] != "start" || len(end) != 2 || end[0] != "end" || end[1] != start[1] {
			t.Fatalf("lines %d and %d are not one hold's start and end, so two holds overlapped:\n%s",
				i+1, i+2, strings.Join(lines, "\n"))
		}
		token, err := strconv.ParseInt(start[2], 10, 64)
		if err != nil || token <= last {
			t.Fatalf("hold %d has token %q after %d: tokens must strictly increase:\n%s", i/2+1, start[2], last, strings.Join(lines, "\n"))
		}
		last = token
		starts = append(starts, start)
	}
	return starts
}

// TestLockExcludes: zklock lock processes on one path never overlap, and
// the tokens they pass to their commands increase hold after hold.
func TestLockExcludes(t *testing.T) {
	path := lockPath(t)
	out := filepath.Join(t.TempDir(), "holds")
	const workers, rounds = 3, 3
	script := `echo "start $$ $ZKLOCK_TOKEN $ZKLOCK_PATH $ZKLOCK_NODE" >> "$OUT"; sleep 0.05; echo "end $$" >> "$OUT"`

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				code, stderr := runBounded(env("OUT="+out), "lock", path, "--", "sh", "-c", script)
				if code != 0 {
					t.Errorf("zklock lock exited %d; stderr:\n%s", code, stderr)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, start := range checkAlternation(t, readLines(t, out), workers*rounds) {
		if len(start) != 5 || start[3] != path || !strings.HasPrefix(start[4], path+"/_c_") {
			t.Errorf("ZKLOCK_PATH and ZKLOCK_NODE in %q: want %s and a node under it", start, path)
		}
	}
}

// TestKilledHolderReleases: when the zklock process holding a lock is
// killed (SIGKILL: no cleanup at all), its command dies with it
// (Pdeathsig), and the lock is free once its session expires.
func TestKilledHolderReleases(t *testing.T) {
	path, c := lockPath(t), client(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	holder := start(t, env("PIDFILE="+pidFile), "lock", "-session-timeout", "4s", "-data", "holder", path,
		"--", "sh", "-c", writePid+"exec sleep 600")
	pid := commandPid(t, pidFile, "sleep")
	awaitQueue(t, c, path, 1, "holder")

	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.wait(t)
	eventually(t, func() bool { return gone(pid, "sleep") },
		"the command (pid %d) is still running after zklock was killed: Pdeathsig did not kill it", pid)

	expectCode(t, 0, env(), "lock", "-timeout", "60s", path, "--", "true")
}

// TestLostLeaseStopsCommand: when the lock is lost while the command runs
// (here someone deletes the lock node, which the library's keeper notices
// within a third of the session timeout), zklock signals the command and
// exits 123.
func TestLostLeaseStopsCommand(t *testing.T) {
	c := client(t)
	// hold starts a holder running script, waits until it holds and its
	// command runs, then deletes its node.
	hold := func(t *testing.T, pidFile string, environ []string, script string, args ...string) *proc {
		path := lockPath(t)
		args = append(append([]string{"lock", "-session-timeout", "4s", "-data", "holder"}, args...),
			path, "--", "sh", "-c", writePid+script)
		p := start(t, environ, args...)
		commandPid(t, pidFile, "sh")
		ps := awaitQueue(t, c, path, 1, "holder")
		if err := c.Conn().Delete(ps[0].Node, -1); err != nil {
			t.Fatalf("delete the holder's node %s: %v", ps[0].Node, err)
		}
		return p
	}

	t.Run("SIGTERM", func(t *testing.T) {
		dir := t.TempDir()
		pidFile, trapped := filepath.Join(dir, "pid"), filepath.Join(dir, "trapped")
		p := hold(t, pidFile, env("PIDFILE="+pidFile, "TRAPPED="+trapped),
			`trap 'echo term >> "$TRAPPED"; exit 0' TERM; while :; do sleep 0.1; done`)
		if code := p.wait(t); code != exitLockLost {
			t.Fatalf("zklock exited %d, want %d (lock lost); stderr:\n%s", code, exitLockLost, p.stderr.String())
		}
		if got := readLines(t, trapped); len(got) != 1 || got[0] != "term" {
			t.Errorf("the command's TERM trap wrote %q, want [term]", got)
		}
		if !strings.Contains(p.stderr.String(), "lost the lock on") || !strings.Contains(p.stderr.String(), "deleted") {
			t.Errorf("stderr does not say the lock was lost and why:\n%s", p.stderr.String())
		}
	})

	t.Run("SIGKILL after grace", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := hold(t, pidFile, env("PIDFILE="+pidFile),
			`trap '' TERM; while :; do sleep 0.1; done`, "-grace", "1s")
		if code := p.wait(t); code != exitLockLost {
			t.Fatalf("zklock exited %d, want %d (lock lost); stderr:\n%s", code, exitLockLost, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "SIGKILL") {
			t.Errorf("stderr does not say the command was killed:\n%s", p.stderr.String())
		}
		pid := commandPid(t, pidFile, "sh")
		eventually(t, func() bool { return gone(pid, "sh") }, "the command (pid %d) that ignores SIGTERM still runs", pid)
	})
}

// TestSignals: a signal to a waiting zklock stops the wait (124); a signal
// to a holding zklock goes to its command, whose status zklock returns,
// and the lock passes on.
func TestSignals(t *testing.T) {
	path, c := lockPath(t), client(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	holder := start(t, env("PIDFILE="+pidFile), "lock", "-data", "holder", path, "--", "sh", "-c", writePid+"exec sleep 600")
	pid := commandPid(t, pidFile, "sleep")
	awaitQueue(t, c, path, 1, "holder")
	waiter := start(t, env(), "lock", "-data", "waiter", path, "--", "true")
	awaitQueue(t, c, path, 1, "holder", "waiter")
	quitter := start(t, env(), "lock", "-data", "quitter", path, "--", "true")
	awaitQueue(t, c, path, 1, "holder", "waiter", "quitter")

	if err := quitter.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := quitter.wait(t); code != exitNotLocked {
		t.Fatalf("zklock interrupted while waiting exited %d, want %d; stderr:\n%s", code, exitNotLocked, quitter.stderr.String())
	}
	awaitQueue(t, c, path, 1, "holder", "waiter") // it left the queue

	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, want := holder.wait(t), exitSignalBase+int(syscall.SIGTERM); code != want {
		t.Fatalf("zklock whose command SIGTERM killed exited %d, want %d; stderr:\n%s", code, want, holder.stderr.String())
	}
	if !gone(pid, "sleep") {
		t.Errorf("the command (pid %d) still runs", pid)
	}
	if code := waiter.wait(t); code != 0 {
		t.Fatalf("the waiter exited %d, want 0; stderr:\n%s", code, waiter.stderr.String())
	}
}

// TestExitCodes: what each outcome exits with.
func TestExitCodes(t *testing.T) {
	path, c := lockPath(t), client(t)

	t.Run("command status", func(t *testing.T) {
		expectCode(t, 7, env(), "lock", path, "--", "sh", "-c", "exit 7")
		expectCode(t, exitSignalBase+int(syscall.SIGKILL), env(), "lock", path, "--", "sh", "-c", "kill -KILL $$")
	})
	t.Run("command not found", func(t *testing.T) {
		_, stderr := expectCode(t, exitNotFound, env(), "lock", path, "--", "zklock-test-no-such-command")
		if !strings.Contains(stderr, "not found") {
			t.Errorf("stderr does not say the command was not found:\n%s", stderr)
		}
		expectCode(t, exitNotFound, env(), "lock", path, "--", filepath.Join(t.TempDir(), "missing"))
	})
	t.Run("command not executable", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(f, []byte("#!/bin/sh\ntrue\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		expectCode(t, exitCannotRun, env(), "lock", path, "--", f)
	})

	t.Run("held", func(t *testing.T) {
		holder := start(t, env(), "lock", "-data", "holder", path, "--", "sleep", "600")
		awaitQueue(t, c, path, 1, "holder")
		_, stderr := expectCode(t, exitNotLocked, env(), "lock", "-try", path, "--", "true")
		if !strings.Contains(stderr, "held by holder, who queued ") {
			t.Errorf("-try's stderr does not say who holds the lock and when it queued:\n%s", stderr)
		}
		_, stderr = expectCode(t, exitNotLocked, env(), "lock", "-timeout", "1s", path, "--", "true")
		if !strings.Contains(stderr, "-timeout") {
			t.Errorf("-timeout's stderr does not say it timed out:\n%s", stderr)
		}
		holder.stop()
		// Neither left a node behind.
		eventually(t, func() bool { return len(participants(t, c, path)) == 0 }, "the path has participants left")
	})
}

// TestReadWrite: readers hold together; a writer does not hold with them.
func TestReadWrite(t *testing.T) {
	path, c := lockPath(t), client(t)
	dir := t.TempDir()
	gate, in := filepath.Join(dir, "gate"), filepath.Join(dir, "in")
	reader := start(t, env("GATE="+gate, "IN="+in), "lock", "-read", "-data", "reader", path, "--", "sh", "-c",
		`touch "$IN"; while [ ! -e "$GATE" ]; do sleep 0.05; done`)
	eventually(t, func() bool { return fileExists(in) }, "the first reader's command to run")
	// A second reader holds while the first does, so it can finish.
	expectCode(t, 0, env(), "lock", "-read", path, "--", "true")
	expectCode(t, exitNotLocked, env(), "lock", "-write", "-try", path, "--", "true")
	awaitQueue(t, c, path, 1, "reader")

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := reader.wait(t); code != 0 {
		t.Fatalf("the reader exited %d; stderr:\n%s", code, reader.stderr.String())
	}
	expectCode(t, 0, env(), "lock", "-write", "-try", path, "--", "true")
}

// TestSemaphore: at most MAX commands run at once under -semaphore MAX,
// and each of them runs.
func TestSemaphore(t *testing.T) {
	path, c := lockPath(t), client(t)
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "holds"), filepath.Join(dir, "gate")
	script := `echo "start $$" >> "$OUT"; while [ ! -e "$GATE" ]; do sleep 0.05; done; echo "end $$" >> "$OUT"`

	var procs []*proc
	var queue []string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprint("p", i)
		procs = append(procs, start(t, env("OUT="+out, "GATE="+gate),
			"lock", "-semaphore", "2", "-data", name, path, "--", "sh", "-c", script))
		queue = append(queue, name)
		holders := i
		if holders > 2 {
			holders = 2
		}
		awaitQueue(t, c, path, holders, queue...)
	}
	eventually(t, func() bool { return len(readLines(t, out)) >= 2 }, "the first two commands to run")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if code := p.wait(t); code != 0 {
			t.Errorf("p%d exited %d; stderr:\n%s", i+1, code, p.stderr.String())
		}
	}

	lines := readLines(t, out)
	running, most, starts := 0, 0, 0
	for _, l := range lines {
		switch strings.Fields(l)[0] {
		case "start":
			running++
			starts++
		case "end":
			running--
		}
		if running > most {
			most = running
		}
	}
	if most > 2 || starts != 3 || len(lines) != 6 {
		t.Fatalf("%d commands ran at once at most (want at most 2), %d started (want 3):\n%s", most, starts, strings.Join(lines, "\n"))
	}

	t.Run("n", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "nodes")
		expectCode(t, 0, env("OUT="+out), "lock", "-semaphore", "3", "-n", "2", lockPath(t), "--", "sh", "-c",
			`echo "$ZKLOCK_NODE" > "$OUT"; echo "$ZKLOCK_NODES" >> "$OUT"`)
		lines := readLines(t, out)
		if len(lines) != 2 {
			t.Fatalf("the command wrote %q", lines)
		}
		nodes := strings.Fields(lines[1])
		if len(nodes) != 2 || nodes[0] != lines[0] || nodes[0] == nodes[1] {
			t.Fatalf("ZKLOCK_NODE=%q ZKLOCK_NODES=%q: want two nodes, ZKLOCK_NODE the first", lines[0], lines[1])
		}
	})
	t.Run("try n", func(t *testing.T) {
		path, c := lockPath(t), client(t)
		holder := start(t, env(), "lock", "-semaphore", "3", "-n", "2", "-data", "holder", path, "--", "sleep", "600")
		awaitQueue(t, c, path, 2, "holder", "holder")
		// Two of three leases are held: two more are not free, one is.
		expectCode(t, exitNotLocked, env(), "lock", "-semaphore", "3", "-n", "2", "-try", path, "--", "true")
		expectCode(t, 0, env(), "lock", "-semaphore", "3", "-n", "1", "-try", path, "--", "true")
		holder.stop()
		eventually(t, func() bool { return len(participants(t, c, path)) == 0 }, "the path has participants left")
		expectCode(t, 0, env(), "lock", "-semaphore", "3", "-n", "2", "-try", path, "--", "true")
	})
}

// TestSemaphoreConflict: zklock's own semaphore takes participants of
// another size (a rolling resize: the command runs), while kazoo's, which
// keeps one size, refuses another: a lock that cannot be taken (124), not
// a usage error, said once with zklock's own prefix and both sizes; the
// refused acquire leaves no node behind.
func TestSemaphoreConflict(t *testing.T) {
	path, c := lockPath(t), client(t)
	start(t, env(), "lock", "-semaphore", "3", "-data", "holder", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 1, "holder")
	expectCode(t, 0, env(), "lock", "-semaphore", "2", "-try", path, "--", "true")
	awaitQueue(t, c, path, 1, "holder")

	kpath := lockPath(t)
	start(t, env(), "lock", "-semaphore", "3", "-layout", "kazoo", "-data", "holder", kpath, "--", "sleep", "600")
	awaitQueue(t, c, kpath, 1, "holder")
	for _, args := range [][]string{
		{"lock", "-semaphore", "2", "-layout", "kazoo", kpath, "--", "true"},
		{"lock", "-semaphore", "2", "-layout", "kazoo", "-try", kpath, "--", "true"},
	} {
		_, stderr := expectCode(t, exitNotLocked, env(), args...)
		if !strings.Contains(stderr, "size mismatch") || !strings.Contains(stderr, `"3"`) ||
			!strings.Contains(stderr, "not 2") || !strings.Contains(stderr, "did not run") {
			t.Errorf("zklock %q: stderr does not name both sizes and say the command did not run:\n%s", args, stderr)
		}
		if strings.Contains(stderr, "zklock: ") || strings.Contains(stderr, "for usage") {
			t.Errorf("zklock %q: stderr has a doubled prefix or calls it a usage error:\n%s", args, stderr)
		}
	}
	awaitQueue(t, c, kpath, 1, "holder")

	t.Run("another library's semaphore", func(t *testing.T) {
		path, c := lockPath(t), client(t)
		// Curator's InterProcessSemaphoreV2 keeps its leases under
		// <path>/leases.
		for _, p := range []string{path, path + "/leases"} {
			if _, err := c.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("create %s: %v", p, err)
			}
		}
		t.Cleanup(func() {
			_ = c.Conn().Delete(path+"/leases", -1)
			_ = c.Conn().Delete(path, -1)
		})
		_, stderr := expectCode(t, exitNotLocked, env(), "lock", "-semaphore", "2", path, "--", "true")
		if !strings.Contains(stderr, path+" is used by another kind of lock") || strings.Contains(stderr, "zklock: ") {
			t.Errorf("stderr does not say the path is another kind of lock, once:\n%s", stderr)
		}
	})
}

// TestElect: two zklock elect processes take turns: only the leader runs
// its command, and once the leader's command exits and it resigns, the
// other leads.
func TestElect(t *testing.T) {
	path, c := lockPath(t), client(t)
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "holds"), filepath.Join(dir, "gate")
	script := `echo "start $$ $ZKLOCK_TOKEN" >> "$OUT"; while [ ! -e "$GATE" ]; do sleep 0.05; done; echo "end $$" >> "$OUT"`

	a := start(t, env("OUT="+out, "GATE="+gate), "elect", "-data", "A", path, "--", "sh", "-c", script)
	awaitQueue(t, c, path, 1, "A")
	eventually(t, func() bool { return len(readLines(t, out)) == 1 }, "the leader's command to run")
	b := start(t, env("OUT="+out, "GATE="+gate), "elect", "-data", "B", path, "--", "sh", "-c", script)
	awaitQueue(t, c, path, 1, "A", "B")
	if lines := readLines(t, out); len(lines) != 1 {
		t.Fatalf("a candidate that does not lead ran its command:\n%s", strings.Join(lines, "\n"))
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*proc{"A": a, "B": b} {
		if code := p.wait(t); code != 0 {
			t.Errorf("candidate %s exited %d; stderr:\n%s", name, code, p.stderr.String())
		}
	}
	checkAlternation(t, readLines(t, out), 2)
}

// TestLockLayout: lock -semaphore MAX -layout curator|kazoo shares the
// leases of a semaphore of that layout (here the library's own, in that
// layout): it takes the lease left free, and then the semaphore is full;
// the default layout is refused on that path, and told which -layout to
// give.
func TestLockLayout(t *testing.T) {
	for _, layout := range []zklock.SemaphoreLayout{zklock.LayoutCurator, zklock.LayoutKazoo} {
		t.Run(layout.String(), func(t *testing.T) {
			path, c := lockPath(t), client(t)
			if layout == zklock.LayoutKazoo {
				t.Cleanup(func() { // kazoo's nodes are persistent
					_ = c.Conn().Delete(path+"-__lock__", -1)
					_ = c.Conn().Delete(path, -1)
				})
			}
			s, err := zklock.NewSemaphore(client(t), path, 2, zklock.WithSemaphoreLayout(layout), zklock.WithNodeData([]byte("library")))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), long)
			defer cancel()
			held, err := s.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gate := filepath.Join(t.TempDir(), "gate")
			holder := start(t, env("GATE="+gate), "lock", "-semaphore", "2", "-layout", layout.String(), "-data", "command",
				path, "--", "sh", "-c", gated)
			eventually(t, func() bool {
				ps := participants(t, c, path)
				return len(ps) == 2 && ps[0].Holder && ps[1].Holder && string(ps[1].Data) == "command"
			}, "the command's lease next to the library's")

			_, stderr := expectCode(t, exitNotLocked, env(), "lock", "-semaphore", "2", "-layout", layout.String(), "-try", path, "--", "true")
			if !strings.Contains(stderr, "is taken (-try)") {
				t.Errorf("-try on a full %v semaphore: stderr does not say it is taken:\n%s", layout, stderr)
			}
			_, stderr = expectCode(t, exitNotLocked, env(), "lock", "-semaphore", "2", path, "--", "true")
			if want := "give -layout " + layout.String() + " to take part"; !strings.Contains(stderr, want) {
				t.Errorf("the default layout on a %v semaphore: stderr does not say %q:\n%s", layout, want, stderr)
			}

			openGate(t, gate)
			if code := holder.wait(t); code != 0 {
				t.Fatalf("the holder exited %d; stderr:\n%s", code, holder.stderr.String())
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, func() bool { return len(participants(t, c, path)) == 0 }, "the path has participants left")
		})
	}
}
