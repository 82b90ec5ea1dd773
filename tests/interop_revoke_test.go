package zklock_test

// Revocation across languages: zklock and Apache Curator (the Java peers,
// 5.4 and 5.7.1, of tools/peers) ask each other's holders to let go.
// Curator's convention, which zklock follows: the revoker writes
// "__REVOKE__" into the holder's node (Revoker.attemptRevoke, zklock.Revoke);
// a Curator lock made revocable (InterProcessMutex.makeRevocable) watches
// its own node's data and calls its RevocationListener, a zklock lease
// closes Lease.Revoked. Revocation is a request: the holder decides when to
// release. kazoo has no revocation convention, so the Python peer has no
// part here.

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// revokeCase is a holder's recipe and a recipe that conflicts with it, for
// the participants that queue behind the holder.
type revokeCase struct{ holder, waiter string }

var revokeCases = []revokeCase{
	{holder: "mutex", waiter: "mutex"},
	{holder: "read", waiter: "write"},
	{holder: "write", waiter: "read"},
}

// goLocker returns zklock's lock of the given recipe on path.
func goLocker(t *testing.T, c *zklock.Client, path, recipe string) zklock.Locker {
	t.Helper()
	switch recipe {
	case "mutex":
		m, err := zklock.NewMutex(c, path)
		require.NoError(t, err)
		return m
	case "read", "write":
		rw, err := zklock.NewRWMutex(c, path)
		require.NoError(t, err)
		if recipe == "read" {
			return rw.ReadLock()
		}
		return rw.WriteLock()
	}
	t.Fatalf("no recipe %q", recipe)
	return nil
}

// curatorRevoke runs the Java peer java's `revoke --node node`:
// Revoker.attemptRevoke(client, node) in a process and session of its own.
// It requires DONE and a clean exit. Like Revoker, the peer is silent about
// a node that does not exist.
func curatorRevoke(t *testing.T, java peerLang, node string) {
	t.Helper()
	buildPeers(t)
	ctx, cancel := context.WithTimeout(ctxT(t), long)
	defer cancel()
	argv := append(slices.Clone(java.argv), "revoke",
		"--servers", strings.Join(zktest.Servers(t), ","), "--node", node, "--id", "java-revoker")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "zkpeer revoke %s: stdout %q; stderr:\n%s", node, out, stderr.String())
	require.Equal(t, "DONE java-revoker 1\n", string(out), "zkpeer revoke %s; stderr:\n%s", node, stderr.String())
}

// expect waits for the next line of a peer and requires it to be of kind.
// Unlike peer.next it also reads "REVOKED <id> <recipe> <unix_nanos>", which
// a --revocable peer prints when its RevocationListener fires.
func (p *peer) expect(t *testing.T, kind string) event {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		require.True(t, ok, "peer %s exited early; stderr:\n%s", p.id, p.stderr.String())
		ev, err := parseRevocationEvent(line)
		require.NoError(t, err, "stderr:\n%s", p.stderr.String())
		require.Equal(t, kind, ev.kind, "peer %s: unexpected line %q", p.id, line)
		return ev
	case <-time.After(long):
		t.Fatalf("peer %s said nothing for %v; stderr:\n%s", p.id, long, p.stderr.String())
		return event{}
	}
}

func parseRevocationEvent(line string) (event, error) {
	f := strings.Fields(line)
	if len(f) == 4 && f[0] == "REVOKED" {
		at, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return event{}, fmt.Errorf("peer line %q: %w", line, err)
		}
		return event{kind: f[0], id: f[1], recipe: f[2], at: at}, nil
	}
	return parseEvent(line)
}

// awaitRevoked waits until ch is closed.
func awaitRevoked(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(long):
		t.Fatalf("%s: Revoked not closed after %v", msg, long)
	}
}

// awaitWatch waits until a server holds a watch on node, by its wchp
// (watches by path) four-letter command.
func awaitWatch(t *testing.T, node string) {
	t.Helper()
	ctx, servers := ctxT(t), zktest.Servers(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var lines []string
		for _, s := range servers {
			probe, cancel := context.WithTimeout(ctx, 5*time.Second)
			out, err := zktest.FourLetter(probe, s, "wchp")
			cancel()
			if !assert.NoError(c, err) {
				return
			}
			lines = append(lines, strings.Split(out, "\n")...)
		}
		assert.Contains(c, lines, node)
	}, long, 5*time.Millisecond, "no watch on %s", node)
}

// TestInteropRevokeByCurator: Curator's Revoker.attemptRevoke, run in
// another process, on a zklock holder's node closes the lease's Revoked
// channel; the lease stays held, for zklock and Curator waiters alike, until
// it is released.
func TestInteropRevokeByCurator(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			for _, tc := range revokeCases {
				t.Run(tc.holder, func(t *testing.T) {
					t.Parallel()
					ctx := ctxT(t)
					path := lockPath(t)
					c := connect(t)
					tidy(t, c, path)
					held, err := goLocker(t, c, path, tc.holder).Acquire(ctx)
					require.NoError(t, err)
					revoked := held.Revoked()

					// A Go waiter right behind the holder (it watches the holder's
					// node, whose data the revocation changes), then a Curator one.
					goWaiter := acquireAt(ctx, goLocker(t, connect(t), path, tc.waiter).Acquire)
					ours := newChild(t, c, path, base(held.Node()))
					p := startPeer(t, java, "java", path, tc.waiter, "--count", "1", "--hold-ms", "0")
					theirs := newChild(t, c, path, base(held.Node()), ours)
					require.Regexp(t, curatorNodes[tc.waiter], theirs)
					require.False(t, closed(revoked), "Revoked closed before anyone revoked")

					curatorRevoke(t, java, held.Node())
					awaitRevoked(t, revoked, "after Curator's Revoker")
					data, _, err := c.Conn().Get(held.Node())
					require.NoError(t, err)
					require.Equal(t, "__REVOKE__", string(data), "what Curator's Revoker wrote")
					require.Equal(t, revoked, held.Revoked(), "Revoked returns one channel")

					// Revocation is a request: the lease is still held.
					require.NoError(t, held.Err())
					require.False(t, closed(held.Done()))
					_, err = goLocker(t, c, path, tc.waiter).TryAcquire(ctx)
					require.ErrorIs(t, err, zklock.ErrLocked)
					require.ElementsMatch(t, []string{base(held.Node()), ours, theirs}, children(t, c, path))
					pendingAt(t, goWaiter)
					p.silent(t)

					released := releaseAt(t, held)
					got := awaitAt(t, goWaiter)
					require.Greater(t, got.at, released, "our waiter acquired before the revoked holder released")
					require.Equal(t, path+"/"+ours, got.lease.Node())
					if tc.waiter == "read" {
						acq := p.next(t, "ACQ") // readers share
						require.Greater(t, acq.at, released, "the Curator waiter acquired before the revoked holder released")
						release(t, got.lease)
					} else {
						ourRelease := releaseAt(t, got.lease)
						acq := p.next(t, "ACQ")
						require.Greater(t, acq.at, ourRelease, "the Curator waiter acquired before the Go waiter ahead of it released")
					}
					p.next(t, "REL")
					p.finish(t, 1)

					// The node is gone: zklock says so, Curator's Revoker does not.
					require.ErrorIs(t, zklock.Revoke(ctx, c, held.Node()), zk.ErrNoNode)
					curatorRevoke(t, java, held.Node())
				})
			}
		})
	}
}

// TestInteropRevokeCurator: zklock.Revoke on the node of a Curator holder
// made revocable fires its RevocationListener; the peer's listener has the
// holder release, and a zklock waiter on the path gets the lock.
func TestInteropRevokeCurator(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			for _, tc := range revokeCases {
				t.Run(tc.holder, func(t *testing.T) {
					t.Parallel()
					ctx := ctxT(t)
					path := lockPath(t)
					c := connect(t)
					tidy(t, c, path)
					p := startPeer(t, java, "java", path, tc.holder, "--once-then-wait", "--revocable")
					p.expect(t, "ACQ")
					theirs := newChild(t, c, path)
					require.Regexp(t, curatorNodes[tc.holder], theirs)

					goWaiter := acquireAt(ctx, goLocker(t, connect(t), path, tc.waiter).Acquire)
					ours := newChild(t, c, path, theirs)
					pendingAt(t, goWaiter)
					p.silent(t)

					before := time.Now().UnixNano()
					require.NoError(t, zklock.Revoke(ctx, c, path+"/"+theirs))
					rv := p.expect(t, "REVOKED")
					require.Greater(t, rv.at, before, "the listener fired before we revoked")
					rel := p.expect(t, "REL")
					got := awaitAt(t, goWaiter)
					require.Greater(t, got.at, rel.at, "our waiter acquired before the revoked Curator holder released")
					require.Equal(t, path+"/"+ours, got.lease.Node())
					p.finish(t, 1)
					release(t, got.lease)

					require.ErrorIs(t, zklock.Revoke(ctx, c, path+"/"+theirs), zk.ErrNoNode,
						"revoking a node that is gone")
				})
			}
		})
	}
}

// TestInteropRevokeWaiter revokes a participant that is still waiting.
// Curator sets its revocation watch when it starts waiting, so a revocable
// Curator waiter's listener fires at once, before it holds (the peer then
// releases as soon as it acquires). A zklock waiter's node keeps the
// request: the data change does not move the waiter in the queue, and the
// lease's Revoked is closed from the moment it is granted.
//
// Curator 5.4 sets that watch with a getData on its node after creating it
// and discards the data the getData returns (LockInternals.internalLockLoop),
// so a revocation written between the create and that getData is lost: the
// listener never fires. The test waits for the watch (the server's wchp)
// before revoking: without that wait, revoking as soon as the node showed up
// in the children, the peer missed the revocation in 5 of 6 tries on a
// 2-core machine. zklock's Revoked reads the node's data first, so it loses
// none.
func TestInteropRevokeWaiter(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			for _, tc := range revokeCases {
				t.Run(tc.holder, func(t *testing.T) {
					t.Parallel()
					t.Run("GoRevokesCurator", func(t *testing.T) {
						t.Parallel()
						ctx := ctxT(t)
						path := lockPath(t)
						c := connect(t)
						tidy(t, c, path)
						held, err := goLocker(t, c, path, tc.holder).Acquire(ctx)
						require.NoError(t, err)
						p := startPeer(t, java, "java", path, tc.waiter, "--once-then-wait", "--revocable")
						theirs := newChild(t, c, path, base(held.Node()))
						require.Regexp(t, curatorNodes[tc.waiter], theirs)
						awaitWatch(t, path+"/"+theirs) // Curator's revocation watch, and only it

						before := time.Now().UnixNano()
						require.NoError(t, zklock.Revoke(ctx, c, path+"/"+theirs))
						rv := p.expect(t, "REVOKED") // while it waits
						require.Greater(t, rv.at, before, "the listener fired before we revoked")
						require.NoError(t, held.Err())
						p.silent(t)

						released := releaseAt(t, held)
						acq := p.expect(t, "ACQ")
						require.Greater(t, acq.at, released, "the Curator waiter acquired before we released")
						p.expect(t, "REL") // the revocation ends its hold, without a line on stdin
						p.finish(t, 1)
					})
					t.Run("CuratorRevokesGo", func(t *testing.T) {
						t.Parallel()
						ctx := ctxT(t)
						path := lockPath(t)
						c := connect(t)
						tidy(t, c, path)
						p := startPeer(t, java, "java", path, tc.holder, "--once-then-wait")
						p.next(t, "ACQ")
						theirs := newChild(t, c, path)

						goWaiter := acquireAt(ctx, goLocker(t, connect(t), path, tc.waiter).Acquire)
						ours := newChild(t, c, path, theirs)
						curatorRevoke(t, java, path+"/"+ours)
						pendingAt(t, goWaiter)
						require.ElementsMatch(t, []string{theirs, ours}, children(t, c, path))

						p.letGo(t)
						rel := p.next(t, "REL")
						got := awaitAt(t, goWaiter)
						require.Greater(t, got.at, rel.at, "our waiter acquired before the Curator holder released")
						require.Equal(t, path+"/"+ours, got.lease.Node(), "the revoked waiter kept its place in the queue")
						awaitRevoked(t, got.lease.Revoked(), "a revocation written while it waited")
						require.NoError(t, got.lease.Err())
						p.finish(t, 1)
						release(t, got.lease)
					})
				})
			}
		})
	}
}
