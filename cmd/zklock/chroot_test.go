//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChroot: ZKLOCK_SERVERS and -servers take a connect string with a
// chroot, as Java services are configured: the lock is made under it (the
// chroot too, missing as it is), and everything the command prints or
// hands its command (ls, ls of a parent, observe, ZKLOCK_PATH and
// ZKLOCK_NODE) is relative to it, while a client without the chroot sees
// the same holder at the full path.
func TestChroot(t *testing.T) {
	root, c := lockPath(t), client(t)
	chrooted := func(extra ...string) []string {
		return env(append([]string{"ZKLOCK_SERVERS=" + servers + root}, extra...)...)
	}
	const path = "/locks/report"
	out := filepath.Join(t.TempDir(), "out")
	gate := filepath.Join(t.TempDir(), "gate")
	start(t, chrooted("OUT="+out, "GATE="+gate), "lock", "-data", "holder", path, "--",
		"sh", "-c", `echo "$ZKLOCK_PATH $ZKLOCK_NODE" > "$OUT"; `+gated)
	ps := awaitQueue(t, c, root+path, 1, "holder") // the full path, seen without the chroot
	rel := strings.TrimPrefix(ps[0].Node, root)
	if rel == ps[0].Node || !strings.HasPrefix(rel, path+"/") {
		t.Fatalf("the holder's node %s is not under %s%s", ps[0].Node, root, path)
	}
	eventually(t, func() bool { b, _ := os.ReadFile(out); return len(b) > 0 }, "the command's output")
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != path+" "+rel {
		t.Fatalf("ZKLOCK_PATH and ZKLOCK_NODE %q, want %q", strings.TrimSpace(string(b)), path+" "+rel)
	}

	stdout, _ := expectCode(t, 0, chrooted(), "ls", "-json", path)
	var got []struct{ Node, Data string }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 1 || got[0].Node != rel || got[0].Data != "holder" {
		t.Fatalf("ls -json under the chroot: %v\n%s\nwant the holder at %s", err, stdout, rel)
	}
	stdout, _ = expectCode(t, 0, env(), "ls", "-servers", servers+root, "/")
	if !strings.Contains(stdout, path) || strings.Contains(stdout, root) {
		t.Fatalf("ls / under the chroot (with -servers) does not list %s, relative:\n%s", path, stdout)
	}
	_, stderr := expectCode(t, exitNoPath, chrooted(), "ls", root+path)
	if !strings.Contains(stderr, "does not exist") {
		t.Fatalf("ls of the full path under the chroot: %s", stderr)
	}

	obs := start(t, chrooted(), "observe", path)
	lines := awaitLines(t, obs, 1)
	if !strings.Contains(lines[0], rel[len(path)+1:]) && !strings.Contains(lines[0], "holder") {
		t.Fatalf("observe under the chroot printed %q, want the holder", lines[0])
	}
	openGate(t, gate)
	awaitLines(t, obs, 2) // the release, seen through the watch under the chroot
	interrupt(t, obs)
}
