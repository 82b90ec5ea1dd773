package zklock_test

// The zklock command with Curator's and kazoo's semaphores, with the peers
// of tools/peers: ls reads their holders and waiters, and lock -semaphore
// -layout curator takes part in an InterProcessSemaphoreV2.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// buildZklock builds the zklock command into the test's temporary
// directory and returns its path.
func buildZklock(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "zklock")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/zklock").CombinedOutput()
	require.NoError(t, err, "go build ../cmd/zklock:\n%s", out)
	return bin
}

// zklock is the zklock command, built for the test, and the ZooKeeper it
// runs against.
type zklockCmd struct {
	bin, servers string
}

func newZklock(t *testing.T) zklockCmd {
	return zklockCmd{bin: buildZklock(t), servers: strings.Join(zktest.Servers(t), ",")}
}

// run runs the zklock command with extra environment, and returns its exit
// code and output. It is killed (by its own handle) if it runs longer than
// long.
func (z zklockCmd) run(environ []string, args ...string) (code int, stdout, stderr string) {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	cmd := exec.CommandContext(ctx, z.bin, args...)
	cmd.Env = append(os.Environ(), append([]string{"ZKLOCK_SERVERS=" + z.servers}, environ...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if cmd.ProcessState == nil {
		return -1, "", err.Error()
	}
	if ctx.Err() != nil {
		return -1, out.String(), fmt.Sprintf("killed after %v; stderr:\n%s", long, errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// lsEntry is a participant in zklock ls -json.
type lsEntry struct {
	Node, State, Kind, Data string
	Holder                  bool
}

// TestInteropCommandLs: zklock ls lists a real Curator InterProcessSemaphoreV2
// and a real kazoo Semaphore: two peers holding its two leases, in the
// order they came, and a third waiting (Curator's with its lease node,
// while it holds the inner mutex; kazoo's on the lock next to the path);
// the parent lists the semaphore as one lock path of its layout.
func TestInteropCommandLs(t *testing.T) {
	t.Parallel()
	z := newZklock(t)
	type lsCase struct {
		lang   peerLang
		waiter string // where the waiter's node is
		data   string // the waiter's node data, of its id
		kind   string
	}
	var cases []lsCase
	for _, java := range javaPeers {
		cases = append(cases, lsCase{java, "/leases/_c_", "%s", "semaphore/curator"})
	}
	for _, python := range pythonPeers {
		// kazoo's Semaphore (2.8 and 2.9.0) hands its lock the identifier
		// already encoded, and the lock writes str() of those bytes.
		cases = append(cases, lsCase{python, "-__lock__/", "b'%s'", "semaphore/kazoo"})
	}
	for _, tc := range cases {
		t.Run(tc.lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			c := connect(t)
			tidySemaphore(t, c, path)
			id := func(i int) string { return fmt.Sprintf("%s-%d", tc.lang.name, i) }
			var peers []*peer
			for i := 1; i <= 3; i++ {
				p := startPeer(t, tc.lang, id(i), path, "semaphore", "--once-then-wait", "--leases", "2")
				if i < 3 {
					p.next(t, "ACQ")
				}
				peers = append(peers, p)
			}
			require.Eventually(t, func() bool {
				ps, err := zklock.Participants(ctxT(t), c, path)
				require.NoError(t, err)
				return len(ps) == 3 && strings.HasPrefix(ps[2].Node, path+tc.waiter)
			}, long, 10*time.Millisecond, "the third peer to wait, its node at %s...", path+tc.waiter)

			code, stdout, stderr := z.run(nil, "ls", "-json", path)
			require.Equal(t, 0, code, "zklock ls -json %s; stderr:\n%s", path, stderr)
			var got []lsEntry
			require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
			require.Len(t, got, 3, stdout)
			for i, e := range got {
				holds := i < 2
				data := id(i + 1)
				if !holds {
					data = fmt.Sprintf(tc.data, data)
				}
				require.Equal(t, data, e.Data, "participant %d: %+v", i, e)
				require.Equal(t, holds, e.Holder, "participant %d: %+v", i, e)
				if !holds {
					require.True(t, strings.HasPrefix(e.Node, path+tc.waiter), "the waiter's node %s, want %s...", e.Node, path+tc.waiter)
				}
			}

			code, stdout, stderr = z.run(nil, "ls", filepath.Dir(path))
			require.Equal(t, 0, code, "zklock ls %s; stderr:\n%s", filepath.Dir(path), stderr)
			require.Equal(t, []string{path, "2", "1", tc.kind, "-"}, strings.Fields(strings.Split(stdout, "\n")[1]), stdout)

			peers[0].letGo(t)
			peers[0].next(t, "REL")
			peers[0].finish(t, 1)
			peers[2].next(t, "ACQ")
			for _, p := range peers[1:] {
				p.letGo(t)
				p.next(t, "REL")
				p.finish(t, 1)
			}
		})
	}
}

// TestInteropCommandCuratorSemaphore: zklock lock -semaphore 2 -layout
// curator shares the leases of a Curator InterProcessSemaphoreV2 process.
// While a Curator peer holds one lease and a zklock command the other,
// the semaphore is full (lock -try exits 124) and a second Curator peer
// waits until the command ends. Then Curator peers and zklock commands
// contend, every hold logged inside the real one (the peers' ACQ after the
// acquire, REL before the release; the command's lines while it runs), and
// never more than 2 hold at once.
func TestInteropCommandCuratorSemaphore(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			z := newZklock(t)
			path := lockPath(t)
			c := connect(t)
			tidySemaphore(t, c, path)
			lock := []string{"lock", "-semaphore", "2", "-layout", "curator"}

			t.Run("full", func(t *testing.T) {
				p := startPeer(t, java, "java-1", path, "semaphore", "--once-then-wait", "--leases", "2")
				p.next(t, "ACQ")
				gate := filepath.Join(t.TempDir(), "gate")
				done := make(chan string, 1)
				go func() {
					code, _, stderr := z.run([]string{"GATE=" + gate}, append(lock, "-data", "command", path, "--",
						"sh", "-c", `while [ ! -e "$GATE" ]; do sleep 0.05; done`)...)
					done <- fmt.Sprintf("exit %d; stderr:\n%s", code, stderr)
				}()
				require.Eventually(t, func() bool {
					ps, err := zklock.Participants(ctxT(t), c, path)
					require.NoError(t, err)
					return len(ps) == 2 && ps[1].Holder && string(ps[1].Data) == "command"
				}, long, 10*time.Millisecond, "the command to hold the second lease")

				code, _, stderr := z.run(nil, append(lock, "-try", path, "--", "true")...)
				require.Equal(t, 124, code, "lock -try on a full semaphore; stderr:\n%s", stderr)
				p2 := startPeer(t, java, "java-2", path, "semaphore", "--count", "1", "--hold-ms", "0", "--leases", "2")
				queued(t, c, path+"/leases", 3)
				p2.silent(t)
				require.NoError(t, os.WriteFile(gate, nil, 0o644))
				select {
				case out := <-done:
					require.Equal(t, "exit 0; stderr:\n", out)
				case <-time.After(long):
					t.Fatal("the command's zklock did not exit")
				}
				p2.next(t, "ACQ")
				p2.next(t, "REL")
				p2.finish(t, 1)
				p.letGo(t)
				p.next(t, "REL")
				p.finish(t, 1)
			})

			t.Run("contend", func(t *testing.T) {
				const peerCount, commands, minRuns = 15, 2, 5
				out := filepath.Join(t.TempDir(), "holds")
				script := `echo "ACQ $ID semaphore $(date +%s%N)" >> "$OUT"; sleep 0.06; echo "REL $ID semaphore $(date +%s%N)" >> "$OUT"`
				var (
					log       holdLog
					pwg, cwg  sync.WaitGroup
					peersDone = make(chan struct{})
					errs      = make(chan error, 4+commands)
				)
				for i := 1; i <= 2; i++ {
					p := startPeer(t, java, fmt.Sprintf("java-%d", i), path, "semaphore", "--count", strconv.Itoa(peerCount),
						"--hold-ms", semHoldMs, "--acquire-timeout-ms", peerTimeoutMs, "--leases", "2")
					pwg.Go(func() {
						holds, err := p.collect("java", func() {})
						for _, h := range holds {
							log.add(h)
						}
						if err != nil {
							errs <- err
						}
					})
				}
				for i := 1; i <= commands; i++ {
					id := fmt.Sprintf("zklock-%d", i)
					cwg.Go(func() {
						for n := 0; n < minRuns || !closed(peersDone); n++ {
							code, _, stderr := z.run([]string{"OUT=" + out, "ID=" + id}, append(lock, path, "--", "sh", "-c", script)...)
							if code != 0 {
								errs <- fmt.Errorf("%s: zklock lock exited %d; stderr:\n%s", id, code, stderr)
								return
							}
						}
					})
				}
				pwg.Wait()
				close(peersDone)
				cwg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				holds := append(log.holds, commandHolds(t, out)...)
				n := counts(holds)
				most := mostAtOnce(holds)
				t.Logf("%d holds (%v), most at once %d; %d handoffs between Curator and the command", len(holds), n, most, handoffs(holds))
				requireAtMost(t, holds, 2, "semaphore")
				require.Equal(t, 2*peerCount, n["java semaphore"])
				require.GreaterOrEqual(t, n["zklock semaphore"], commands*minRuns)
				require.Empty(t, children(t, c, path+"/leases"), "leases left behind")
			})
		})
	}
}

// commandHolds reads the holds that zklock's commands logged in file: an
// ACQ line, then a REL line, of each command.
func commandHolds(t *testing.T, file string) []hold {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	open := map[string]*event{}
	var holds []hold
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		ev, err := parseEvent(line)
		require.NoError(t, err)
		switch ev.kind {
		case "ACQ":
			require.Nil(t, open[ev.id], "%s acquired twice", ev.id)
			open[ev.id] = &ev
		case "REL":
			acq := open[ev.id]
			require.NotNil(t, acq, "%s released without acquiring", ev.id)
			holds = append(holds, hold{who: ev.id, lang: "zklock", recipe: "semaphore", from: acq.at, to: ev.at})
			delete(open, ev.id)
		}
	}
	require.Empty(t, open, "holds without a release")
	return holds
}
