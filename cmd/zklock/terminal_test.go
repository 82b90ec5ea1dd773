//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestTerminalCommand: run from a terminal, as an operator does, zklock
// hands the terminal to its command's process group, so that a command
// that reads it (an interactive shell, a confirmation prompt) is not
// stopped by SIGTTIN for reading from a background group.
func TestTerminalCommand(t *testing.T) {
	master, slave := openPty(t)
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "out"), filepath.Join(dir, "pid")

	p := startOn(t, slave, env("OUT="+out, "PIDFILE="+pidFile), "lock", lockPath(t), "--", "sh", "-c",
		writePid+`read line; echo "got $line" > "$OUT"`)
	slave.Close() // zklock has its own copy
	commandPid(t, pidFile, "sh")
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("zklock exited %d; stderr:\n%s", code, p.stderr.String())
	}
	if got, _ := os.ReadFile(out); strings.TrimSpace(string(got)) != "got hello" {
		t.Fatalf("the command read %q from the terminal, want hello", got)
	}
}

// openPty opens a pseudo-terminal pair; both ends are closed when the test
// ends.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if err := ioctl(master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	var n uint32
	if err := ioctl(master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

func ioctl(fd, req, arg uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, arg); errno != 0 {
		return errno
	}
	return nil
}

// startOn starts zklock as a terminal's session leader would run, with
// tty as its controlling terminal and stdin, and zklock's group in the
// terminal's foreground.
func startOn(t *testing.T, tty *os.File, environ []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env, p.cmd.Stdin = environ, tty
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	return p.begin(t)
}
