//go:build unix

package main

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// execCommand makes a command that runs in a process group of its own, so
// that a cut-off kills whatever the tests started too.
func execCommand(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
