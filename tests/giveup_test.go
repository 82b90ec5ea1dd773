package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// TestGiveUpAtAReconnectLeavesNoWatch: a handoff waiter that gives up while
// cut off fires its grant watch, as it goes, only once the watch is set
// again on the new connection, so that no watch of its session is left on
// the server. go-zookeeper sets the watches again from a goroutine of its
// own after the reconnect (sendSetWatches), and the give-up, queued while
// cut off, goes first: a fire then reaches nobody, and the late setWatches
// sets the watch on the missing grant for the session's life (the
// janitor's fire, internal/session/janitor.go). The holder is still there
// when the test looks: its release would fire the grant, and hide the
// leak.
func TestGiveUpAtAReconnectLeavesNoWatch(t *testing.T) {
	for i := range 3 { // each round a reconnect: the order it tries is a race
		lock := lockPath(t) + "-" + string(rune('a'+i))
		fb := zktest.NewFaults(nil)
		t.Cleanup(fb.Close)
		a, held, b, cancel, gaveUp := waitBehind(t, lock, fb)
		queued(t, b, lock, 2)
		grant := lock + "/_g_" + held.Node()[len(held.Node())-10:] + "_"
		sid := b.SessionID()
		awaitWatches(t, "the waiter's grant watch", func(w map[string][]string) bool { return has(w[grant], sid) })

		fb.Partition() // no new connection,
		fb.Drop()      // and the one it had is gone
		cancel()
		require.True(t, errors.Is(<-gaveUp, context.Canceled))
		fb.Heal()

		noWatchLeft(t, a, b, lock, grant, sid)
		release(t, held)
		require.NoError(t, b.Close())
	}
}

// TestGiveUpAfterLostCreateReplyLeavesNoWatch: a handoff waiter whose
// create's reply was cut off finds its node again by its protected id,
// waits on its predecessor's grant, and gives up: it fires the grant watch
// before its node goes, as any give-up does. The cleanup of a create whose
// fate was unknown deletes every node of the waiter's id (a retried create
// may have left a stray); done at once, it deleted the waiter's node too,
// before the fire, which then nobody may make (handoff.go), and the watch
// stayed for the session's life (the chaos suite found 3 on one session).
func TestGiveUpAfterLostCreateReplyLeavesNoWatch(t *testing.T) {
	lock := lockPath(t)
	fb := zktest.NewFaults(nil)
	t.Cleanup(fb.Close)
	fb.DropAfter(zktest.OpCreate) // the holder's create makes the parents: the waiter's first request is its create
	a, held, b, cancel, gaveUp := waitBehind(t, lock, fb)
	queued(t, a, lock, 2)
	grant := lock + "/_g_" + held.Node()[len(held.Node())-10:] + "_"
	awaitWatches(t, "the waiter's grant watch, once it found its node", func(w map[string][]string) bool {
		return has(w[grant], b.SessionID())
	})
	sid := b.SessionID()
	cancel()
	require.True(t, errors.Is(<-gaveUp, context.Canceled))

	noWatchLeft(t, a, b, lock, grant, sid)
	release(t, held)
}

// noWatchLeft checks, once the waiter's node is gone from lock (a's view)
// and a round trip on the waiter's connection has come back (go-zookeeper
// queued the connection's setWatches as it came up, before anything sent
// now, and a session's requests are applied in order), that its session
// sid, still live, watches grant no more.
func noWatchLeft(t *testing.T, a, b *zklock.Client, lock, grant string, sid int64) {
	t.Helper()
	queued(t, a, lock, 1)
	_, err := b.Conn().Sync(lock)
	require.NoError(t, err)
	require.Equal(t, sid, b.SessionID(), "the waiter's session lives on")
	w := serverWatches(t)
	require.False(t, has(w[grant], sid), "the grant %s is still watched by the waiter's session %#x: %v", grant, sid, w[grant])
}

// waitBehind has a Client hold a Mutex on lock, and another Client, dialled
// through fb, wait behind it: the holder's Client and lease, the waiter's
// Client, the cancel of its acquire and the acquire's error once it ends
// (a lease it got is released).
func waitBehind(t *testing.T, lock string, fb *zktest.Faults) (a *zklock.Client, held *zklock.Lease, b *zklock.Client, cancel context.CancelFunc, gaveUp <-chan error) {
	t.Helper()
	a = connect(t)
	ma, err := zklock.NewMutex(a, lock)
	require.NoError(t, err)
	held, err = ma.Acquire(ctxT(t))
	require.NoError(t, err)
	b = connect(t, zklock.WithDialer(fb.Dialer()), zklock.WithSessionTimeout(30*time.Second))
	mb, err := zklock.NewMutex(b, lock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	ended := make(chan error, 1)
	go func() {
		l, err := mb.Acquire(ctx)
		if l != nil {
			_ = l.Release(ctxT(t))
		}
		ended <- err
	}()
	return a, held, b, cancel, ended
}

// serverWatches reads every server's wchp: each watched path, with the
// sessions (0x...) that watch it.
func serverWatches(t *testing.T) map[string][]string {
	t.Helper()
	w := map[string][]string{}
	for _, s := range zktest.Servers(t) {
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		out, err := zktest.FourLetter(ctx, s, "wchp")
		cancel()
		require.NoError(t, err)
		var at string
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "/"):
				at = strings.TrimSpace(line)
			case strings.TrimSpace(line) != "" && at != "":
				w[at] = append(w[at], strings.TrimSpace(line))
			}
		}
	}
	return w
}

// awaitWatches waits until the servers' watches satisfy cond.
func awaitWatches(t *testing.T, what string, cond func(map[string][]string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond(serverWatches(t)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not on the servers after 30s: %v", what, serverWatches(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// has reports whether sessions (wchp's 0x... lines) names sid.
func has(sessions []string, sid int64) bool {
	for _, s := range sessions {
		if strings.EqualFold(s, fmt.Sprintf("%#x", sid)) {
			return true
		}
	}
	return false
}
