//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLs: ls lists the holder, then the waiters in the order they came,
// with their data, as JSON and as a table; a path that does not exist has
// nobody.
func TestLs(t *testing.T) {
	path, c := lockPath(t), client(t)
	start(t, env(), "lock", "-data", "holder", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 1, "holder")
	start(t, env(), "lock", "-data", "first waiter", path, "--", "true")
	awaitQueue(t, c, path, 1, "holder", "first waiter")
	start(t, env(), "lock", "-data", "second\twaiter", path, "--", "true")
	ps := awaitQueue(t, c, path, 1, "holder", "first waiter", "second\twaiter")

	stdout, _ := expectCode(t, 0, env(), "ls", "-json", path)
	var got []struct {
		Node, Name, State, Kind, Created, Data string
		Holder, Read                           bool
		AgeSeconds                             float64 `json:"age_seconds"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("ls -json printed no JSON array: %v\n%s", err, stdout)
	}
	want := []struct{ data, state string }{{"holder", "holds"}, {"first waiter", "waits"}, {"second\twaiter", "waits"}}
	if len(got) != len(want) {
		t.Fatalf("ls -json listed %d participants, want %d:\n%s", len(got), len(want), stdout)
	}
	for i, w := range want {
		g := got[i]
		if g.Data != w.data || g.State != w.state || g.Holder != (i == 0) || g.Node != ps[i].Node ||
			g.Name != strings.TrimPrefix(ps[i].Node, path+"/") || g.Kind != "mutex" || g.Read || g.AgeSeconds < 0 {
			t.Errorf("participant %d: got %+v, want data %q, state %s, node %s", i, g, w.data, w.state, ps[i].Node)
		}
		if _, err := time.Parse(time.RFC3339, g.Created); err != nil {
			t.Errorf("participant %d: created %q is not RFC 3339: %v", i, g.Created, err)
		}
	}

	stdout, _ = expectCode(t, 0, env(), "ls", path)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "STATE") {
		t.Fatalf("ls printed %d lines, want a header and 3 rows:\n%s", len(lines), stdout)
	}
	for i, w := range []string{`holder`, `first waiter`, `"second\twaiter"`} {
		row := lines[i+1]
		if !strings.HasPrefix(row, want[i].state+" ") || !strings.Contains(row, got[i].Name) || !strings.HasSuffix(row, w) {
			t.Errorf("row %d is %q: want %s, node %s, data %s", i+1, row, want[i].state, got[i].Name, w)
		}
	}

	missing := lockPath(t)
	if stdout, _ := expectCode(t, 0, env(), "ls", "-json", missing); strings.TrimSpace(stdout) != "[]" {
		t.Errorf("ls -json of a missing path printed %q, want []", stdout)
	}
	if stdout, _ := expectCode(t, 0, env(), "ls", missing); strings.Count(stdout, "\n") != 1 {
		t.Errorf("ls of a missing path printed %q, want the header alone", stdout)
	}
}
