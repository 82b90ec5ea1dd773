//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGlobalFlags: the connection flags work before the subcommand as after
// it, for every subcommand that connects; given on both sides, the one
// after the subcommand wins.
func TestGlobalFlags(t *testing.T) {
	// No ZKLOCK_SERVERS: the servers come from the flags alone.
	noEnv := []string{"PATH=" + os.Getenv("PATH"), "GORACE=" + os.Getenv("GORACE")}
	path, c := lockPath(t), client(t)
	out := filepath.Join(t.TempDir(), "ran")

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"before", []string{"-servers", servers, "-session-timeout", "5s", "lock", "-data", "before", path, "--", "sh", "-c", "echo before >> " + out}},
		{"after", []string{"lock", "-servers", servers, "-session-timeout", "5s", "-data", "after", path, "--", "sh", "-c", "echo after >> " + out}},
		{"both, the later wins", []string{"-servers", "127.0.0.1:1", "lock", "-servers", servers, path, "--", "sh", "-c", "echo both >> " + out}},
		{"before with =, and -v", []string{"-servers=" + servers, "-v", "elect", path + "-election", "--", "sh", "-c", "echo elect >> " + out}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectCode(t, 0, noEnv, tc.args...)
		})
	}
	if got, want := strings.Join(readLines(t, out), ","), "before,after,both,elect"; got != want {
		t.Errorf("the commands that ran: %s, want %s", got, want)
	}

	// ls and observe, both ways, see the same holder.
	start(t, noEnv, "-servers", servers, "lock", "-data", "holder", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 1, "holder")
	for _, args := range [][]string{
		{"-servers", servers, "ls", path},
		{"ls", "-servers", servers, path},
		{"-servers", servers, "-connect-timeout", "30s", "ls", "-json", path},
	} {
		stdout, _ := expectCode(t, 0, noEnv, args...)
		if !strings.Contains(stdout, "holder") {
			t.Errorf("zklock %q does not list the holder:\n%s", args, stdout)
		}
	}
	for _, args := range [][]string{{"-servers", servers, "observe", path}, {"observe", "-servers", servers, path}} {
		p := start(t, noEnv, args...)
		eventually(t, func() bool { return strings.Contains(p.stdout.String(), "holders holder") },
			"zklock %q prints the holder; stdout %q, stderr %q", args, p.stdout.String(), p.stderr.String())
	}

	// A -servers before the subcommand that the one after overrides is
	// never dialled: the one after is wrong, so the run fails.
	stdout, stderr := expectCode(t, exitFailed, noEnv, "-servers", servers, "ls", "-servers", "a:1,,b:2", path)
	if stdout != "" || !strings.Contains(stderr, "empty entry") {
		t.Errorf("the -servers after ls did not win: stdout %q, stderr %q", stdout, stderr)
	}

	// version and help connect nowhere: they take the flags and ignore them.
	stdout, _ = expectCode(t, 0, noEnv, "-servers", servers, "version")
	if !strings.HasPrefix(stdout, "zklock ") {
		t.Errorf("zklock -servers ... version printed %q", stdout)
	}
	stdout, _ = expectCode(t, 0, noEnv, "-servers", servers, "help", "ls")
	if !strings.Contains(stdout, "Usage: zklock ls") {
		t.Errorf("zklock -servers ... help ls printed %q", stdout)
	}
}
