package zklock_test

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// swapWatch records what a Client's trace and logger say of a swapped
// session, and in what order: the trace is called in order, under the
// Session's lock (trace.go).
type swapWatch struct {
	mu         sync.Mutex
	old        int64
	events     int            // trace calls so far
	handshake  chan time.Time // when a session other than old was reported...
	handshakeN int            // ...as the events'th trace call
	lost       []zklock.LeaseInfo
	lostAt     []time.Time
	lostN      []int    // each Lost's place among the trace calls
	warns      []string // Warn records, with their attributes
}

func (w *swapWatch) trace() *zklock.Trace {
	return &zklock.Trace{
		Session: func(si zklock.SessionInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events++
			if si.State == zklock.SessionConnected && w.old != 0 && si.SessionID != w.old {
				select {
				case w.handshake <- time.Now():
					w.handshakeN = w.events
				default:
				}
			}
		},
		Lost: func(li zklock.LeaseInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events++
			w.lost, w.lostAt, w.lostN = append(w.lost, li), append(w.lostAt, time.Now()), append(w.lostN, w.events)
		},
	}
}

// Handle makes swapWatch a slog.Handler that keeps the Warn records.
func (w *swapWatch) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *swapWatch) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	w.mu.Lock()
	w.warns = append(w.warns, s)
	w.mu.Unlock()
	return nil
}
func (w *swapWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *swapWatch) WithGroup(string) slog.Handler      { return w }

// A server that hands out a new session on reconnect (ClickHouse Keeper
// does; zktest's Forwarder plays one): at the new session's handshake,
// every lease of the old session ends with ErrSessionReplaced (which is an
// ErrSessionExpired too), and so does an acquire waiting in it; the loss is
// logged once, naming both sessions; the old session's nodes are deleted,
// so another Client acquires while the old session still lives on the
// server (an ephemeral node of it, made behind the library's back, is still
// there); and the Client's next lease works, in the new session.
// It is not parallel: it also checks that nothing of the Clients or the
// Forwarder is left running.
func TestSessionReplacedOnReconnect(t *testing.T) {
	servers := zktest.Servers(t) // the shared server, before the snapshot
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after every other cleanup
	ctx := ctxT(t)
	fw := zktest.Forward(t, servers[0])
	w := &swapWatch{handshake: make(chan time.Time, 1)}
	// A long session timeout: the old session outlives the test's waits,
	// so only the Client's deletes can let the other Client in.
	a, err := zklock.Connect(ctx, []string{fw.Addr()}, zklock.WithSessionTimeout(20*time.Second),
		zklock.WithTrace(w.trace()), zklock.WithLogger(slog.New(w)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b := connect(t)

	held, waited, sem := lockPath(t), lockPath(t)+"-waited", lockPath(t)+"-sem"
	ma, err := zklock.NewMutex(a, held)
	require.NoError(t, err)
	la, err := ma.Acquire(ctx)
	require.NoError(t, err)
	sa, err := zklock.NewSemaphore(a, sem, 2)
	require.NoError(t, err)
	ls, err := sa.AcquireN(ctx, 2)
	require.NoError(t, err)
	leases := append([]*zklock.Lease{la}, ls...)

	// A waits on a lock B holds; B waits on A's.
	mbw, err := zklock.NewMutex(b, waited)
	require.NoError(t, err)
	lbw, err := mbw.Acquire(ctx)
	require.NoError(t, err)
	maw, err := zklock.NewMutex(a, waited)
	require.NoError(t, err)
	waitErr := make(chan error, 1)
	waitEnd := make(chan time.Time, 1)
	// Whether the old session still lived when the wait ended: an
	// ephemeral node of it, made below behind the library's back, was
	// still there.
	waitOldLived := make(chan bool, 1)
	old := a.SessionID()
	marker := path.Dir(held) + "/old-session-marker"
	go func() {
		l, err := maw.Acquire(ctx)
		waitEnd <- time.Now()
		_, st, merr := b.Conn().Get(marker)
		waitOldLived <- merr == nil && st.EphemeralOwner == old
		if l != nil {
			_ = l.Release(ctx)
		}
		waitErr <- err
	}()
	mb, err := zklock.NewMutex(b, held)
	require.NoError(t, err)
	type got struct {
		l               *zklock.Lease
		err             error
		leasesEnded     bool
		oldSessionLived bool
	}
	bGot := make(chan got, 1)
	go func() {
		l, err := mb.Acquire(ctx)
		g := got{l: l, err: err, leasesEnded: true}
		for _, l := range leases {
			g.leasesEnded = g.leasesEnded && closed(l.Done())
		}
		_, st, serr := b.Conn().Get(marker)
		g.oldSessionLived = serr == nil && st.EphemeralOwner == old
		bGot <- g
	}()
	queued(t, b, waited, 2)
	queued(t, b, held, 2)
	// An ephemeral node of the old session that the library does not know:
	// it lives as long as the old session does.
	_, err = a.Conn().Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Conn().Delete(marker, -1) })

	w.mu.Lock()
	w.old = old
	w.mu.Unlock()
	fw.SwapSessions(true)
	fw.Drop()

	var handshake time.Time
	select {
	case handshake = <-w.handshake:
	case <-ctx.Done():
		t.Fatal("the Client reported no new session")
	}
	require.NotEqual(t, old, a.SessionID())
	require.Equal(t, 1, fw.Swapped(), "the forwarder gave the Client one new session")
	fw.SwapSessions(false)

	for _, l := range leases {
		select {
		case <-l.Done():
		case <-ctx.Done():
			t.Fatalf("lease %s outlived its session", l.Node())
		}
		require.ErrorIs(t, l.Err(), zklock.ErrSessionReplaced)
		require.ErrorIs(t, l.Err(), zklock.ErrSessionExpired)
	}
	select {
	case err := <-waitErr:
		require.ErrorIs(t, err, zklock.ErrSessionReplaced, "a wait of the old session")
		require.ErrorIs(t, err, zklock.ErrSessionExpired)
		waited := (<-waitEnd).Sub(handshake)
		t.Logf("the wait of the old session ended %v after the handshake", waited)
		// Ended by the swap, not by the old session's expiry (which would
		// end it too, with the same error, once the keeper found its node
		// gone): nothing else wakes it while the old session lives.
		require.True(t, <-waitOldLived, "the wait ended only once the old session had expired")
	case <-ctx.Done():
		t.Fatal("the wait of the old session never ended")
	}
	// Copied out, so that a failed assertion does not leave w.mu held
	// (the Client's Close reports to the trace, and would wait for it).
	w.mu.Lock()
	lost, lostAt, lostN, handshakeN := w.lost, w.lostAt, w.lostN, w.handshakeN
	var swapWarns []string
	for _, s := range w.warns {
		if strings.Contains(s, "another session") {
			swapWarns = append(swapWarns, s)
		}
	}
	w.mu.Unlock()
	require.Len(t, lost, len(leases), "Lost reports each lease once")
	for i, li := range lost {
		require.ErrorIs(t, li.Err, zklock.ErrSessionReplaced)
		t.Logf("lease %s ended %v after the handshake", li.Node, lostAt[i].Sub(handshake))
		require.Less(t, lostN[i], handshakeN, "the lease ended at the handshake, before the new session was reported")
	}
	require.Len(t, swapWarns, 1, "the swap is logged once at Warn")
	require.Contains(t, swapWarns[0], fmt.Sprintf("0x%x", old))
	require.Contains(t, swapWarns[0], fmt.Sprintf("0x%x", a.SessionID()))

	// B gets the lock the old session held, after A's leases ended, while
	// the old session still lives: its nodes were deleted, not expired.
	var g got
	select {
	case g = <-bGot:
	case <-ctx.Done():
		t.Fatal("B never acquired the old session's lock")
	}
	require.NoError(t, g.err)
	require.True(t, g.leasesEnded, "B acquired before A's leases ended")
	require.True(t, g.oldSessionLived, "B acquired only once the old session had ended: its nodes were not deleted")
	queued(t, b, waited, 1) // the old session's waiting node is gone too
	queued(t, b, sem, 0)

	// The Client goes on in its new session.
	release(t, g.l)
	release(t, lbw)
	la2, err := ma.Acquire(ctx)
	require.NoError(t, err)
	_, st, err := b.Conn().Get(la2.Node())
	require.NoError(t, err)
	require.Equal(t, a.SessionID(), st.EphemeralOwner)
	release(t, la2)
	ls2, err := sa.AcquireN(ctx, 2)
	require.NoError(t, err)
	for _, l := range ls2 {
		release(t, l)
	}
	for _, l := range leases {
		require.ErrorIs(t, l.Release(ctx), zklock.ErrSessionReplaced, "a lost lease's Release says why")
	}
}
