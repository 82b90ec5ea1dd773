//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
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
	for _, args := range [][]string{{"ls", missing}, {"ls", "-json", missing}} {
		stdout, stderr := expectCode(t, exitNoPath, env(), args...)
		if stdout != "" || !strings.Contains(stderr, "zklock ls: "+missing+" does not exist") {
			t.Errorf("zklock %q printed %q, stderr %q; want nothing, and on stderr that it does not exist", args, stdout, stderr)
		}
	}

	// The whole tree (here, its first level): / is a path ls takes.
	expectCode(t, 0, env(), "ls", "-max-depth", "1", "/")

	// An existing node with no children: nobody holds.
	empty := lockPath(t)
	mkNode(t, c, empty)
	if stdout, _ := expectCode(t, 0, env(), "ls", "-json", empty); strings.TrimSpace(stdout) != "[]" {
		t.Errorf("ls -json of an empty path printed %q, want []", stdout)
	}
	if stdout, _ := expectCode(t, 0, env(), "ls", empty); strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "STATE") {
		t.Errorf("ls of an empty path printed %q, want the header alone", stdout)
	}
}

// mkNode creates p and its missing parents, persistent, and deletes them
// when the test ends (those that are empty by then).
func mkNode(t *testing.T, c *zklock.Client, p string) {
	t.Helper()
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		q := p[:i]
		if _, err := c.Conn().Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", q, err)
		}
		t.Cleanup(func() { _ = c.Conn().Delete(q, -1) })
	}
}

// TestLsParent: ls of a path with no lock nodes of its own lists the lock
// paths below it, one row each, sorted, with their holders, waiters and
// kind, as a table and as JSON; its limits cut the listing and say so.
func TestLsParent(t *testing.T) {
	parent, c := lockPath(t), client(t)
	start(t, env(), "lock", "-data", "holder", parent+"/jobs/backup", "--", "sleep", "600")
	awaitQueue(t, c, parent+"/jobs/backup", 1, "holder")
	start(t, env(), "lock", "-data", "waiter", parent+"/jobs/backup", "--", "true")
	awaitQueue(t, c, parent+"/jobs/backup", 1, "holder", "waiter")
	start(t, env(), "lock", "-read", "-data", "reader", parent+"/config", "--", "sleep", "600")
	awaitQueue(t, c, parent+"/config", 1, "reader")
	start(t, env(), "lock", "-semaphore", "3", "-n", "2", "-data", "pool", parent+"/pools/a/b/exports", "--", "sleep", "600")
	awaitQueue(t, c, parent+"/pools/a/b/exports", 2, "pool", "pool")
	start(t, env(), "elect", "-data", "leader", parent+"/leader", "--", "sleep", "600")
	awaitQueue(t, c, parent+"/leader", 1, "leader")

	stdout, stderr := expectCode(t, 0, env(), "ls", parent)
	want := [][]string{
		{"PATH", "HOLDERS", "WAITERS", "KIND", "SIZE"},
		{parent + "/config", "1", "0", "rwlock", "-"},
		{parent + "/jobs/backup", "1", "1", "mutex", "-"},
		{parent + "/leader", "1", "0", "election", "-"},
		{parent + "/pools/a/b/exports", "2", "0", "semaphore", "3"},
	}
	checkRows(t, stdout, want)
	if stderr != "" {
		t.Errorf("ls of a parent, whole, said on stderr:\n%s", stderr)
	}

	stdout, _ = expectCode(t, 0, env(), "ls", "-json", parent)
	var got []struct {
		Path             string
		Kind             string
		Holders, Waiters int
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("ls -json of a parent printed no JSON array: %v\n%s", err, stdout)
	}
	if len(got) != len(want)-1 {
		t.Fatalf("ls -json of a parent listed %d lock paths, want %d:\n%s", len(got), len(want)-1, stdout)
	}
	for i, g := range got {
		w := want[i+1]
		if g.Path != w[0] || fmt.Sprint(g.Holders) != w[1] || fmt.Sprint(g.Waiters) != w[2] || g.Kind != w[3] {
			t.Errorf("ls -json of a parent, row %d: %+v, want %q", i, g, w)
		}
	}

	// -max-depth 2 reads parent/pools/a but not what is below it; the
	// listing says it is cut.
	stdout, stderr = expectCode(t, 0, env(), "ls", "-max-depth", "2", parent)
	checkRows(t, stdout, want[:4])
	if !strings.Contains(stderr, "the listing is cut") || !strings.Contains(stderr, "-max-depth 2") {
		t.Errorf("ls -max-depth 2 does not say the listing is cut:\n%s", stderr)
	}
	_, stderr = expectCode(t, 0, env(), "ls", "-max-nodes", "3", parent)
	if !strings.Contains(stderr, "the listing is cut") {
		t.Errorf("ls -max-nodes 3 does not say the listing is cut:\n%s", stderr)
	}
}

// checkRows checks a table's rows, field by field.
func checkRows(t *testing.T, table string, want [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the table has %d lines, want %d:\n%s", len(lines), len(want), table)
	}
	for i, l := range lines {
		if f := strings.Fields(l); strings.Join(f, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d is %q, want %q", i+1, l, want[i])
		}
	}
}

// TestLsSemaphoreLayouts: ls reads Curator's and kazoo's semaphores (made
// here with the library's own Semaphores in those layouts): their lease
// holders, the acquire that waits for a lease, and those queued behind it
// on the inner lock.
func TestLsSemaphoreLayouts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	for _, tc := range []struct {
		layout zklock.SemaphoreLayout
		nodes  []string // the start of each row's NODE: holder, waiter, waiter ("-" for PATH-)
		kind   string
	}{
		{zklock.LayoutCurator, []string{"leases/_c_", "leases/_c_", "locks/_c_"}, "semaphore/curator"},
		{zklock.LayoutKazoo, []string{"", "-__lock__/", "-__lock__/"}, "semaphore/kazoo"},
	} {
		t.Run(tc.layout.String(), func(t *testing.T) {
			path, c := lockPath(t), client(t)
			if tc.layout == zklock.LayoutKazoo {
				t.Cleanup(func() { // kazoo's nodes are persistent
					_ = c.Conn().Delete(path+"-__lock__", -1)
					_ = c.Conn().Delete(path, -1)
				})
			}
			sem := func(data string) *zklock.Semaphore {
				s, err := zklock.NewSemaphore(client(t), path, 1, zklock.WithSemaphoreLayout(tc.layout), zklock.WithNodeData([]byte(data)))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			held, err := sem("holder").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx) //nolint:errcheck // the Client's close deletes it anyway
			first, second := sem("first"), sem("second")
			go func() { _, _ = first.Acquire(ctx) }()
			eventually(t, func() bool { return len(participants(t, c, path)) == 2 }, "the first waiter")
			go func() { _, _ = second.Acquire(ctx) }()
			eventually(t, func() bool { return len(participants(t, c, path)) == 3 }, "the second waiter")

			stdout, _ := expectCode(t, 0, env(), "ls", path)
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			want := []string{"holds holder", "waits first", "waits second"}
			if len(lines) != 4 {
				t.Fatalf("ls of a %v semaphore printed %d lines, want a header and 3 rows:\n%s", tc.layout, len(lines), stdout)
			}
			for i, w := range want {
				f := strings.Fields(lines[i+1])
				prefix := tc.nodes[i]
				if strings.HasPrefix(prefix, "-") {
					prefix = path + prefix // not under PATH: shown whole
				}
				if f[0]+" "+f[len(f)-1] != w || !strings.HasPrefix(f[len(f)-2], prefix) {
					t.Errorf("row %d is %q: want %s, node %s...", i+1, lines[i+1], w, prefix)
				}
			}

			// Its parent lists it as one lock path.
			stdout, _ = expectCode(t, 0, env(), "ls", filepath.Dir(path))
			checkRows(t, stdout, [][]string{{"PATH", "HOLDERS", "WAITERS", "KIND", "SIZE"}, {path, "1", "2", tc.kind, "-"}})
		})
	}
}

// TestObserveSemaphoreLayout: observe follows the holders of a Curator
// semaphore, whose leases are under PATH/leases.
func TestObserveSemaphoreLayout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	path := lockPath(t)
	sem := func(data string) *zklock.Semaphore {
		s, err := zklock.NewSemaphore(client(t), path, 2, zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithNodeData([]byte(data)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, err := sem("A").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs := start(t, env(), "observe", "-json", path)
	awaitLines(t, obs, 1)
	b, err := sem("B").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitLines(t, obs, 2)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, obs, 3)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, obs, 4)
	interrupt(t, obs)
	got := parseObserved(t, outLines(obs))
	want := []string{"A", "A,B", "B", ""}
	if len(got) != len(want) {
		t.Fatalf("observe -json printed %d lines, want %d:\n%s", len(got), len(want), obs.stdout.String())
	}
	for i, o := range got {
		if strings.Join(o.holderData(), ",") != want[i] {
			t.Errorf("line %d: %+v; want holders %q", i+1, o, want[i])
		}
	}
}

// TestLsSemaphoreSize: during a rolling resize, ls shows each participant's
// size and the size in force, the smallest; the parent's row shows it too.
func TestLsSemaphoreSize(t *testing.T) {
	parent, c := lockPath(t), client(t)
	path := parent + "/exports"
	start(t, env(), "lock", "-semaphore", "3", "-data", "old", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 1, "old")
	start(t, env(), "lock", "-semaphore", "2", "-data", "new", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 2, "old", "new")
	stdout, _ := expectCode(t, 0, env(), "ls", path)
	if !strings.Contains(stdout, "size in force: 2 (sizes queued: 3 2)") {
		t.Fatalf("ls of a semaphore of sizes 3 and 2 does not show the size in force:\n%s", stdout)
	}
	stdout, _ = expectCode(t, 0, env(), "ls", "-json", path)
	if strings.Count(stdout, `"size": 3`)+strings.Count(stdout, `"size":3`) != 1 || strings.Count(stdout, `"size": 2`)+strings.Count(stdout, `"size":2`) != 1 {
		t.Fatalf("ls -json does not give each participant's size:\n%s", stdout)
	}
	stdout, _ = expectCode(t, 0, env(), "ls", parent)
	checkRows(t, stdout, [][]string{{"PATH", "HOLDERS", "WAITERS", "KIND", "SIZE"}, {path, "2", "0", "semaphore", "2"}})
}
