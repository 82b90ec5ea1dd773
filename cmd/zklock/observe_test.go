//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// outLines returns the lines p has printed on stdout so far.
func outLines(p *proc) []string {
	s := strings.TrimSuffix(p.stdout.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// awaitLines waits until p has printed at least n lines and returns them.
func awaitLines(t *testing.T, p *proc, n int) []string {
	t.Helper()
	eventually(t, func() bool { return len(outLines(p)) >= n }, "%d lines from zklock %q; it printed:\n%s\nstderr:\n%s",
		n, p.cmd.Args[1:], p.stdout.String(), p.stderr.String())
	return outLines(p)
}

// interrupt sends p SIGINT and checks that it exits 0, as observe and
// ls -watch do when interrupted.
func interrupt(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("zklock %q exited %d when interrupted, want 0; stderr:\n%s", p.cmd.Args[1:], code, p.stderr.String())
	}
}

// gated is a shell command that waits until the file $GATE exists.
const gated = `while [ ! -e "$GATE" ]; do sleep 0.05; done`

func openGate(t *testing.T, gate string) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// observedLine is one line of observe -json.
type observedLine struct {
	Time, Path, What string
	Holders          []struct {
		Node, Name, State, Kind, Data string
		Holder                        bool
	}
}

func parseObserved(t *testing.T, lines []string) []observedLine {
	t.Helper()
	var out []observedLine
	for i, l := range lines {
		var o observedLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("line %d of observe -json is no JSON object: %v\n%s", i+1, err, l)
		}
		out = append(out, o)
	}
	return out
}

// holderData is the data of the holders of one observe -json line.
func (o observedLine) holderData() []string {
	var ds []string
	for _, h := range o.Holders {
		ds = append(ds, h.Data)
	}
	return ds
}

// lineRE matches a line of observe's text: the time, what, then the
// holders or none.
var lineRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) (leader|holders) (.+)$`)

// checkText checks observe's text lines: each says what, then the data of
// each holder with its node's name, or none.
func checkText(t *testing.T, path string, lines []string, what string, want [][]string, nodes map[string]string) {
	t.Helper()
	if len(lines) != len(want) {
		t.Fatalf("observe printed %d lines, want %d (one per change, none twice):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		m := lineRE.FindStringSubmatch(l)
		if m == nil || m[2] != what {
			t.Fatalf("line %d is %q: want the time, %q and the holders", i+1, l, what)
		}
		var parts []string
		for _, d := range want[i] {
			parts = append(parts, d+" ("+strings.TrimPrefix(nodes[d], path+"/")+")")
		}
		w := strings.Join(parts, ", ")
		if len(parts) == 0 {
			w = "none"
		}
		if m[3] != w {
			t.Errorf("line %d shows %q, want %q", i+1, m[3], w)
		}
	}
}

// TestObserveElection: observe follows an election's leader, one line per
// change, "none" when nobody leads; -election follows a path that has no
// candidate yet, and -json prints the same as JSON objects.
func TestObserveElection(t *testing.T) {
	path, c := lockPath(t), client(t)
	dir := t.TempDir()
	gateA, gateB := filepath.Join(dir, "a"), filepath.Join(dir, "b")

	js := start(t, env(), "observe", "-election", "-json", path)
	awaitLines(t, js, 1) // nobody leads yet

	start(t, env("GATE="+gateA), "elect", "-data", "A", path, "--", "sh", "-c", gated)
	ps := awaitQueue(t, c, path, 1, "A")
	nodes := map[string]string{"A": ps[0].Node}
	// Started after A leads: the candidate's node tells it is an election.
	text := start(t, env(), "observe", path)
	awaitLines(t, text, 1)
	awaitLines(t, js, 2)

	start(t, env("GATE="+gateB), "elect", "-data", "B", path, "--", "sh", "-c", gated)
	ps = awaitQueue(t, c, path, 1, "A", "B")
	nodes["B"] = ps[1].Node
	openGate(t, gateA) // A resigns: B leads
	awaitLines(t, text, 2)
	awaitLines(t, js, 3)
	openGate(t, gateB) // B resigns: nobody leads
	awaitLines(t, text, 3)
	awaitLines(t, js, 4)
	interrupt(t, text)
	interrupt(t, js)

	checkText(t, path, outLines(text), "leader", [][]string{{"A"}, {"B"}, nil}, nodes)
	got := parseObserved(t, outLines(js))
	want := [][]string{nil, {"A"}, {"B"}, nil}
	if len(got) != len(want) {
		t.Fatalf("observe -json printed %d lines, want %d:\n%s", len(got), len(want), js.stdout.String())
	}
	for i, o := range got {
		if o.Path != path || o.What != "leader" || strings.Join(o.holderData(), ",") != strings.Join(want[i], ",") {
			t.Errorf("line %d: %+v; want path %s, what leader, holders %q", i+1, o, path, want[i])
		}
		if len(o.Holders) == 1 && (o.Holders[0].Node != nodes[want[i][0]] || o.Holders[0].Kind != "latch" || !o.Holders[0].Holder) {
			t.Errorf("line %d: leader %+v, want node %s of kind latch, holding", i+1, o.Holders[0], nodes[want[i][0]])
		}
	}
}

// TestObserveLock: observe follows a lock's holders, whatever the lock: a
// waiter queueing changes no holder and prints nothing; several readers
// holding at once are one line.
func TestObserveLock(t *testing.T) {
	t.Run("mutex", func(t *testing.T) {
		path, c := lockPath(t), client(t)
		dir := t.TempDir()
		gateH, gateW := filepath.Join(dir, "h"), filepath.Join(dir, "w")
		start(t, env("GATE="+gateH), "lock", "-data", "H", path, "--", "sh", "-c", gated)
		ps := awaitQueue(t, c, path, 1, "H")
		nodes := map[string]string{"H": ps[0].Node}
		obs := start(t, env(), "observe", path)
		awaitLines(t, obs, 1)

		start(t, env("GATE="+gateW), "lock", "-data", "W", path, "--", "sh", "-c", gated)
		ps = awaitQueue(t, c, path, 1, "H", "W")
		nodes["W"] = ps[1].Node
		openGate(t, gateH)
		awaitLines(t, obs, 2)
		openGate(t, gateW)
		awaitLines(t, obs, 3)
		interrupt(t, obs)
		checkText(t, path, outLines(obs), "holders", [][]string{{"H"}, {"W"}, nil}, nodes)
	})

	t.Run("read-write json", func(t *testing.T) {
		path, c := lockPath(t), client(t)
		dir := t.TempDir()
		g1, g2, gw := filepath.Join(dir, "r1"), filepath.Join(dir, "r2"), filepath.Join(dir, "w")
		start(t, env("GATE="+g1), "lock", "-read", "-data", "R1", path, "--", "sh", "-c", gated)
		awaitQueue(t, c, path, 1, "R1")
		obs := start(t, env(), "observe", "-json", path)
		awaitLines(t, obs, 1)
		start(t, env("GATE="+g2), "lock", "-read", "-data", "R2", path, "--", "sh", "-c", gated)
		awaitQueue(t, c, path, 2, "R1", "R2")
		awaitLines(t, obs, 2)
		start(t, env("GATE="+gw), "lock", "-write", "-data", "W", path, "--", "sh", "-c", gated)
		awaitQueue(t, c, path, 2, "R1", "R2", "W")
		openGate(t, g1)
		awaitQueue(t, c, path, 1, "R2", "W")
		awaitLines(t, obs, 3)
		openGate(t, g2)
		awaitLines(t, obs, 4)
		openGate(t, gw)
		awaitLines(t, obs, 5)
		interrupt(t, obs)

		got := parseObserved(t, outLines(obs))
		want := []string{"R1", "R1,R2", "R2", "W", ""}
		if len(got) != len(want) {
			t.Fatalf("observe -json printed %d lines, want %d:\n%s", len(got), len(want), obs.stdout.String())
		}
		for i, o := range got {
			if o.What != "holders" || strings.Join(o.holderData(), ",") != want[i] {
				t.Errorf("line %d: %+v; want holders %q", i+1, o, want[i])
			}
			for _, h := range o.Holders {
				if !h.Holder || h.State != "holds" || (h.Kind == "write") != (h.Data == "W") {
					t.Errorf("line %d: holder %+v", i+1, h)
				}
			}
		}
	})
}

// TestLsWatch: ls -watch prints the list again after each change, as a
// table or as one JSON array per line, and exits 0 when interrupted.
func TestLsWatch(t *testing.T) {
	path, c := lockPath(t), client(t)
	table := start(t, env(), "ls", "-watch", path)
	js := start(t, env(), "ls", "-watch", "-json", path)
	awaitLines(t, table, 1) // the header: nobody yet
	awaitLines(t, js, 1)

	start(t, env(), "lock", "-data", "holder", path, "--", "sleep", "600")
	awaitQueue(t, c, path, 1, "holder")
	awaitLines(t, js, 2)
	start(t, env(), "lock", "-data", "waiter", path, "--", "true")
	awaitQueue(t, c, path, 1, "holder", "waiter")
	awaitLines(t, js, 3)
	awaitLines(t, table, 8) // three tables of 1, 2 and 3 lines, a blank line between each two
	interrupt(t, table)
	interrupt(t, js)

	tables := strings.Split(strings.TrimSuffix(table.stdout.String(), "\n"), "\n\n")
	wantRows := [][]string{nil, {"holds holder"}, {"holds holder", "waits waiter"}}
	if len(tables) != len(wantRows) {
		t.Fatalf("ls -watch printed %d tables, want %d:\n%s", len(tables), len(wantRows), table.stdout.String())
	}
	for i, tb := range tables {
		rows := strings.Split(tb, "\n")
		if !strings.HasPrefix(rows[0], "STATE") || len(rows)-1 != len(wantRows[i]) {
			t.Fatalf("table %d is not a header and %d rows:\n%s", i+1, len(wantRows[i]), tb)
		}
		for j, w := range wantRows[i] {
			f := strings.Fields(rows[j+1])
			if f[0]+" "+f[len(f)-1] != w {
				t.Errorf("table %d row %d is %q, want %s", i+1, j+1, rows[j+1], w)
			}
		}
	}

	lines := outLines(js)
	wantData := []string{"", "holder", "holder,waiter"}
	if len(lines) != len(wantData) {
		t.Fatalf("ls -watch -json printed %d lines, want %d:\n%s", len(lines), len(wantData), js.stdout.String())
	}
	for i, l := range lines {
		var ps []struct{ Data string }
		if err := json.Unmarshal([]byte(l), &ps); err != nil {
			t.Fatalf("line %d of ls -watch -json is no JSON array: %v\n%s", i+1, err, l)
		}
		var ds []string
		for _, p := range ps {
			ds = append(ds, p.Data)
		}
		if strings.Join(ds, ",") != wantData[i] {
			t.Errorf("line %d lists %q, want %q", i+1, ds, wantData[i])
		}
	}
}

// TestObserveReconnects: observe says on stderr when it loses the server
// and when it has it again, and goes on following the lock. The server is
// behind a proxy: its connections are dropped and no new one gets through
// until the partition heals.
func TestObserveReconnects(t *testing.T) {
	path, c := lockPath(t), client(t)
	px := newProxy(t, strings.Split(servers, ",")[0])
	obs := start(t, env(), "observe", "-servers", px.addr, path)
	awaitLines(t, obs, 1) // nobody holds

	px.Partition()
	px.Drop()
	lost := "zklock observe: connection to ZooKeeper lost; retrying\n"
	eventually(t, func() bool { return strings.Contains(obs.stderr.String(), lost) },
		"observe to say %q; stderr:\n%s", lost, obs.stderr.String())
	if strings.Contains(obs.stderr.String(), "connected again") {
		t.Fatalf("observe says it is connected again while the server is partitioned away:\n%s", obs.stderr.String())
	}

	px.Heal()
	again := "zklock observe: connected again to " + px.addr + "\n"
	eventually(t, func() bool { return strings.Contains(obs.stderr.String(), again) },
		"observe to say %q; stderr:\n%s", again, obs.stderr.String())
	if got := obs.stderr.String(); got != lost+again {
		t.Errorf("observe's stderr is %q, want the lost line, then the connected line", got)
	}

	gate := filepath.Join(t.TempDir(), "gate")
	start(t, env("GATE="+gate), "lock", "-data", "H", path, "--", "sh", "-c", gated)
	awaitQueue(t, c, path, 1, "H")
	lines := awaitLines(t, obs, 2)
	if !strings.Contains(lines[1], "holders H (") {
		t.Errorf("after reconnecting, observe printed %q, want H holding", lines[1])
	}
	openGate(t, gate)
	interrupt(t, obs)
}
