package zklock_test

// Lease deadlines against a replicated ZooKeeper at ZooKeeper's own timing
// (tickTime=2000, syncLimit=5): what a holder's deadline promises when its
// server is cut off from the quorum while the holder still reaches it, when
// the servers restart one by one, and when the ensemble is rebuilt empty.
//
// The one real-time property asserted is the guarantee itself, as in the
// library's TestHolderSessionExpiry: another client acquires only after the
// holder's lease has ended and after the deadline it reported
// (Lease.ValidUntil). Everything runs in one process, so the monotonic clock
// orders both.
//
// These tests break their servers, so each starts an ensemble of its own;
// they are skipped in -short and when ZKLOCK_TEST_SERVERS says tests must
// not start containers. Run them with -v to see their figures.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// deadlineEnsemble starts an ensemble at ZooKeeper's own timing
// (zoo_sample.cfg: tickTime=2000, initLimit=10, syncLimit=5): an isolated
// follower keeps serving its clients for 10s, and the leader expires a
// session a timeout after it last heard of it, rounded up to a 2s tick. Its
// minSessionTimeout is lowered from two ticks to one, so that a client can
// have a 2s session (the library's bound assumes two ticks: see keeper.go).
func deadlineEnsemble(t *testing.T) *zktest.Ensemble {
	t.Helper()
	if testing.Short() {
		t.Skip("deadline: skipped in -short mode")
	}
	if zktest.External() {
		t.Skip("deadline: breaks its servers, and ZKLOCK_TEST_SERVERS is set: no containers")
	}
	return zktest.StartEnsemble(t,
		zktest.WithTickTime(2*time.Second),
		zktest.WithConfig("initLimit", "10"),
		zktest.WithConfig("syncLimit", "5"),
		zktest.WithConfig("minSessionTimeout", "2000"),
	)
}

// isolationTimeouts are the session timeouts the isolation tests ask for:
// one tick (below ZooKeeper's default minimum), two ticks (the default
// minimum) and the library's default.
var isolationTimeouts = []time.Duration{2 * time.Second, 4 * time.Second, 10 * time.Second}

// Runs per timeout, as many as fit in about three minutes: the two
// isolation tests run side by side (and beside the module's other tests), so
// the longer one sets the time. A follower run takes about the session
// timeout and a tick or two (about 8s on average over the three timeouts),
// so 6 runs each come to about 2.5 minutes; a leader run adds the 10s the
// followers wait before they elect a new leader, and the old leader's rejoin
// (about 18s on average), so 3 runs each come to about 3 minutes. The
// smallest margins come from the follower runs: the leader runs' margin is
// the election's 10s or more.
const (
	followerRuns = 6
	leaderRuns   = 3
)

// A holder connected only to a follower that is cut off from the other two
// servers: the follower keeps answering its heartbeats for syncLimit (10s),
// while the leader hears nothing of the session and expires it a timeout
// later. The holder's lease must end, and its deadline pass, before a client
// of the other two servers acquires.
func TestDeadlineFollowerIsolation(t *testing.T) {
	t.Parallel()
	e := deadlineEnsemble(t)
	testIsolation(t, e, "follower", followerRuns)
}

// The same with the holder connected only to the leader, which is cut off:
// it keeps its clients until it steps down after syncLimit, and the other two
// elect a new leader, which starts every session afresh.
func TestDeadlineLeaderIsolation(t *testing.T) {
	t.Parallel()
	e := deadlineEnsemble(t)
	testIsolation(t, e, "leader", leaderRuns)
}

// isolationFigures are one session timeout's results.
type isolationFigures struct {
	runs, doubles     int
	behind            int           // runs in which B queued behind A's node
	granted           time.Duration // the server's, for the last run (each run checks it is what was asked)
	margin            time.Duration // smallest: B's acquire minus A's ValidUntil
	lag               time.Duration // longest: A's Done closing minus its ValidUntil
	ended, acquired   [2]time.Duration
	expired, sessions int // A's lease lost with ErrLeaseExpired, ErrSessionExpired
}

func (f *isolationFigures) add(r isolationResult) {
	if f.runs == 0 || r.margin < f.margin {
		f.margin = r.margin
	}
	f.lag = max(f.lag, r.lag)
	if f.runs == 0 {
		f.ended, f.acquired = [2]time.Duration{r.ended, r.ended}, [2]time.Duration{r.acquired, r.acquired}
	}
	f.ended = [2]time.Duration{min(f.ended[0], r.ended), max(f.ended[1], r.ended)}
	f.acquired = [2]time.Duration{min(f.acquired[0], r.acquired), max(f.acquired[1], r.acquired)}
	f.runs++
	if r.behind {
		f.behind++
	}
	if r.double {
		f.doubles++
	}
	f.granted = r.granted
	switch {
	case errors.Is(r.err, zklock.ErrLeaseExpired):
		f.expired++
	case errors.Is(r.err, zklock.ErrSessionExpired):
		f.sessions++
	}
}

func testIsolation(t *testing.T, e *zktest.Ensemble, victim string, runs int) {
	began := time.Now()
	figures := make([]isolationFigures, len(isolationTimeouts))
	for i, timeout := range isolationTimeouts {
		for run := range runs {
			r := isolationRun(t, e, victim, timeout, run)
			figures[i].add(r)
		}
	}
	t.Logf("%s isolation at tickTime=2000 syncLimit=5, %v in all:", victim, time.Since(began).Round(time.Second))
	t.Logf("| session asked | granted | runs | double holders | smallest margin (B acquired - A's ValidUntil) | " +
		"longest lag of A's Done after its ValidUntil | A's Done after isolation | B acquired after isolation | A lost with | B queued behind A |")
	for i, f := range figures {
		t.Logf("| %v | %v | %d | %d | %v | %v | %v..%v | %v..%v | lease expired %d, session expired %d | %d of %d |",
			isolationTimeouts[i], f.granted, f.runs, f.doubles, f.margin.Round(time.Millisecond), f.lag.Round(time.Millisecond),
			f.ended[0].Round(time.Millisecond), f.ended[1].Round(time.Millisecond),
			f.acquired[0].Round(time.Millisecond), f.acquired[1].Round(time.Millisecond), f.expired, f.sessions, f.behind, f.runs)
	}
}

// isolationResult is one run's: the timeout the server granted A, and, from
// the moment the server was isolated, when A's lease ended (Done closed) and
// when B acquired; margin is B's acquisition minus A's ValidUntil, lag A's
// Done closing minus A's ValidUntil.
type isolationResult struct {
	behind          bool // B queued behind A's node, rather than finding it gone
	granted         time.Duration
	ended, acquired time.Duration
	margin, lag     time.Duration
	double          bool
	err             error // why A's lease ended
}

// isolationRun: client A, connected only to the victim (the leader, or a
// follower), holds a Mutex with a session of timeout; client B, connected
// to the other two servers, waits for it (from before the isolation of a
// follower, from the new leader's election after that of the leader); the
// victim is isolated. B must
// acquire only once A's lease has ended (Done closed) and after A's
// ValidUntil, and with a greater token. The victim is healed and the
// ensemble whole again before the run returns.
func isolationRun(t *testing.T, e *zktest.Ensemble, victim string, timeout time.Duration, run int) isolationResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	require.NoError(t, awaitServing(ctx, e))
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	v := leader
	if victim == "follower" {
		v = (leader + 1 + run%2) % zktest.EnsembleSize
	}
	var others []string
	for i, c := range e.Nodes() {
		if i != v {
			others = append(others, c.ClientEndpoint())
		}
	}

	a, err := zklock.Connect(ctx, []string{e.Node(v).ClientEndpoint()}, zklock.WithSessionTimeout(timeout))
	require.NoError(t, err)
	defer a.Close()
	granted, err := grantedTimeout(ctx, e.Node(v), a.SessionID())
	require.NoError(t, err)
	require.Equal(t, timeout, granted, "the session timeout the server granted A (minSessionTimeout=2000)")

	path := lockPath(t)
	am, err := zklock.NewMutex(a, path)
	require.NoError(t, err)
	held, err := am.Acquire(ctx)
	require.NoError(t, err)

	// When A's lease ends, as its holder would see it: Done closing.
	endedAt := make(chan time.Time, 1)
	go func() {
		select {
		case <-held.Done():
			endedAt <- time.Now()
		case <-ctx.Done():
		}
	}()
	type acquired struct {
		lease    *zklock.Lease
		err      error
		at       time.Time
		heldDone bool // A's Done was closed when B's Acquire returned
	}
	got := make(chan acquired, 1)
	var b *zklock.Client
	defer func() {
		if b != nil {
			_ = b.Close()
		}
	}()
	// queueB connects B to the other two servers and starts its Acquire. It
	// reports whether B queued behind A's node (it did not if A's node had
	// gone by then, and B acquired at once).
	queueB := func() bool {
		var err error
		b, err = zklock.Connect(ctx, others, zklock.WithSessionTimeout(10*time.Second))
		require.NoError(t, err)
		bm, err := zklock.NewMutex(b, path)
		require.NoError(t, err)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			l, err := bm.Acquire(ctx)
			at := time.Now()
			got <- acquired{l, err, at, closed(held.Done())}
		}()
		for len(children(t, b, path)) < 2 {
			select {
			case <-returned:
				return false
			case <-ctx.Done():
				t.Fatalf("%s isolation, session %v, run %d: B never queued", victim, timeout, run)
			case <-time.After(5 * time.Millisecond):
			}
		}
		return true
	}

	// B waits behind A before the isolation; but when the leader is
	// isolated, B joins once the other two have elected a new one, which
	// starts A's session afresh, a full timeout from its start. (B queued
	// earlier would lose its server to the election and reconnect with its
	// watches set, which trips a data race in go-zookeeper v1.0.4 under
	// -race: Conn.lastZxid, written by recvLoop while sendSetWatches reads
	// it; upstream samuel/go-zookeeper#178 and #260, go-zookeeper/zk#35.)
	var behind bool
	if victim == "follower" {
		require.True(t, queueB(), "B queues behind A's live lease")
	}
	isolated := time.Now()
	require.NoError(t, e.Isolate(ctx, v))
	if victim == "leader" {
		for !slices.ContainsFunc(otherModes(ctx, e, v), func(m string) bool { return m == "leader" }) {
			select {
			case <-ctx.Done():
				t.Fatalf("leader isolation, session %v, run %d: the other two elected no leader", timeout, run)
			case <-time.After(50 * time.Millisecond):
			}
		}
		behind = queueB()
	} else {
		behind = true
	}
	var g acquired
	select {
	case g = <-got:
	case <-ctx.Done():
		t.Fatalf("%s isolation, session %v, run %d: B did not acquire within the run's bound (A's lease: %v)",
			victim, timeout, run, held.Err())
	}
	require.NoError(t, g.err, "B's Acquire")
	var ended time.Time
	select {
	case ended = <-endedAt:
	case <-ctx.Done():
		t.Fatalf("%s isolation, session %v, run %d: A's lease never ended (Err %v)", victim, timeout, run, held.Err())
	}
	r := isolationResult{
		behind:   behind,
		granted:  granted,
		ended:    ended.Sub(isolated),
		acquired: g.at.Sub(isolated),
		margin:   g.at.Sub(held.ValidUntil()),
		lag:      ended.Sub(held.ValidUntil()),
		err:      held.Err(),
	}
	r.double = !g.heldDone || r.margin <= 0
	t.Logf("%s isolation, session %v (granted %v), run %d: A's lease ended (Done) %v after the isolation (%v), ValidUntil %v after; "+
		"B acquired %v after (queued behind A: %v): margin %v; tokens %#x then %#x",
		victim, timeout, granted, run, r.ended.Round(time.Millisecond), r.err,
		held.ValidUntil().Sub(isolated).Round(time.Millisecond), r.acquired.Round(time.Millisecond), behind,
		r.margin.Round(time.Millisecond), held.Token(), g.lease.Token())
	if r.double {
		t.Errorf("%s isolation, session %v (granted %v), run %d: TWO HOLDERS: B acquired at +%v after the isolation, "+
			"A's lease Done closed then: %v, A's ValidUntil +%v, A's lease ended at +%v with %v; A's node %s, token %#x; B's %s, token %#x",
			victim, timeout, granted, run, r.acquired, g.heldDone, held.ValidUntil().Sub(isolated), r.ended, r.err,
			held.Node(), held.Token(), g.lease.Node(), g.lease.Token())
	}
	if !errors.Is(r.err, zklock.ErrLeaseExpired) && !errors.Is(r.err, zklock.ErrSessionExpired) {
		t.Errorf("%s isolation, session %v, run %d: A's lease ended with %v, want a lease or session expiry", victim, timeout, run, r.err)
	}
	if g.lease.Token() <= held.Token() {
		t.Errorf("%s isolation, session %v, run %d: tokens must increase: %#x after %#x", victim, timeout, run,
			g.lease.Token(), held.Token())
	}
	require.NoError(t, g.lease.Release(ctx))
	require.NoError(t, e.Heal(ctx, v))
	require.NoError(t, awaitServing(ctx, e), "the healed server rejoins")
	return r
}

// otherModes is serverModes for every server of e but server v.
func otherModes(ctx context.Context, e *zktest.Ensemble, v int) []string {
	modes := serverModes(ctx, e)
	return slices.Delete(modes, v, v+1)
}

var consSession = regexp.MustCompile(`sid=0x([0-9a-f]+),.*?to=(\d+)`)

// grantedTimeout reads the session timeout server c granted session sid
// (cons). The lease's deadline is derived from it, not from what the client
// asked for.
func grantedTimeout(ctx context.Context, c *zktest.Container, sid int64) (time.Duration, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := c.FourLetter(qctx, "cons")
	if err != nil {
		return 0, err
	}
	for _, m := range consSession.FindAllStringSubmatch(out, -1) {
		id, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil || int64(id) != sid {
			continue
		}
		ms, err := strconv.Atoi(m[2])
		if err != nil {
			return 0, err
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	return 0, fmt.Errorf("session %#x not in cons: %q", sid, out)
}

// A rolling restart (each server stopped and started in turn, each back
// before the next goes) costs no lease of a client whose session survives:
// the leases ride out the disconnects. Clients with WithLossOnDisconnect, in
// the same run, lose theirs at the first disconnect; their count is
// reported, not asserted. One waiter queues behind every holder: it must
// not acquire while the holder's lease is live.
func TestDeadlineRollingRestart(t *testing.T) {
	t.Parallel()
	e := deadlineEnsemble(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	require.NoError(t, awaitServing(ctx, e))

	const perPolicy = 4
	type holder struct {
		policy  string
		c       *zklock.Client
		session int64
		lease   *zklock.Lease
		waiter  chan acquireResult
	}
	waiters, err := zklock.Connect(ctx, e.Servers(), zklock.WithSessionTimeout(10*time.Second))
	require.NoError(t, err)
	defer waiters.Close()
	var holders []*holder
	for _, policy := range chaosPolicies {
		for range perPolicy {
			// A lease lives until its deadline, the session timeout less a
			// twentieth after the last write the quorum confirmed. The
			// restart takes about 11 s here (three servers, each back in 2 to
			// 5 s), and a client may hop from one restarting server to the
			// next: with 10 s sessions a holder could go 9.5 s without a
			// quorum and lose its lease, rightly, while the session (whose
			// expiry a new leader counts afresh) survived. The claim is that
			// a restart within the deadline costs no lease: 20 s sessions
			// (ZooKeeper allows up to 40 s at this tickTime) make every such
			// run one.
			opts := []zklock.Option{zklock.WithSessionTimeout(20 * time.Second)}
			if policy == chaosLossOnDisconnect {
				opts = append(opts, zklock.WithLossOnDisconnect())
			}
			c, err := zklock.Connect(ctx, e.Servers(), opts...)
			require.NoError(t, err)
			defer c.Close()
			path := lockPath(t)
			m, err := zklock.NewMutex(c, path)
			require.NoError(t, err)
			l, err := m.Acquire(ctx)
			require.NoError(t, err)
			h := &holder{policy: policy, c: c, session: c.SessionID(), lease: l, waiter: make(chan acquireResult, 1)}
			wm, err := zklock.NewMutex(waiters, path)
			require.NoError(t, err)
			go func() { h.waiter <- acquireTimed(ctx, wm) }()
			queued(t, waiters, path, 2)
			holders = append(holders, h)
		}
	}

	began := time.Now()
	for i := range zktest.EnsembleSize {
		step := time.Now()
		require.NoError(t, e.Restart(ctx, i), "restart server %d", i)
		t.Logf("rolling restart: server %d back after %v", i, time.Since(step).Round(time.Millisecond))
	}
	t.Logf("rolling restart: %v in all", time.Since(began).Round(time.Millisecond))
	require.NoError(t, awaitServing(ctx, e))

	// Every client has a session again: the one it had, or a new one.
	for _, h := range holders {
		require.Eventually(t, func() bool { return h.c.SessionID() != 0 }, long, 10*time.Millisecond)
	}
	lost := map[string]int{}
	sessionsLost := map[string]int{}
	for i, h := range holders {
		survived := h.c.SessionID() == h.session
		if !survived {
			sessionsLost[h.policy]++
		}
		err := h.lease.Err()
		if err != nil {
			lost[h.policy]++
			if h.policy == chaosDefault && survived {
				t.Errorf("holder %d (default policy): lease lost with %v although its session %#x survived", i, err, h.session)
			}
		}
		select {
		case w := <-h.waiter:
			// Only a lost lease lets the waiter in, and only after its end.
			if err == nil {
				t.Errorf("holder %d (%s): TWO HOLDERS: the waiter acquired (%v) while the lease is live", i, h.policy, w.err)
			} else if w.err == nil && !w.at.After(h.lease.ValidUntil()) {
				t.Errorf("holder %d (%s): TWO HOLDERS: the waiter acquired %v before the lost lease's ValidUntil",
					i, h.policy, h.lease.ValidUntil().Sub(w.at))
			}
			h.waiter <- w // for the hand-off below
		default:
		}
	}
	for _, p := range chaosPolicies {
		t.Logf("rolling restart: %s policy: %d holders, %d leases lost, %d sessions lost", p, perPolicy, lost[p], sessionsLost[p])
	}

	// Hand-off: every lock goes to its waiter, with a greater token.
	for i, h := range holders {
		if h.lease.Err() == nil {
			require.NoError(t, h.lease.Release(ctx))
		}
		var w acquireResult
		select {
		case w = <-h.waiter:
		case <-ctx.Done():
			t.Fatalf("holder %d (%s): the waiter never acquired", i, h.policy)
		}
		require.NoError(t, w.err, "holder %d's waiter", i)
		require.Greater(t, w.lease.Token(), h.lease.Token(), "tokens increase")
		require.NoError(t, w.lease.Release(ctx))
	}
}

// acquireResult is an Acquire's outcome and when it returned.
type acquireResult struct {
	lease *zklock.Lease
	err   error
	at    time.Time
}

func acquireTimed(ctx context.Context, l zklock.Locker) acquireResult {
	lease, err := l.Acquire(ctx)
	return acquireResult{lease, err, time.Now()}
}

// An ensemble rebuilt from nothing refuses the old session and the zxid the
// client has seen, on every server, forever. The holder's lease ends at its
// deadline (or with the session); a waiter of the same client, whose node
// went with the old ensemble, queues again once the client has opened a new
// connection, and acquires in the new session.
func TestDeadlineRebuiltEnsemble(t *testing.T) {
	t.Parallel()
	e := deadlineEnsemble(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	require.NoError(t, awaitServing(ctx, e))

	const timeout = 4 * time.Second
	c, err := zklock.Connect(ctx, e.Servers(), zklock.WithSessionTimeout(timeout))
	require.NoError(t, err)
	defer c.Close()
	path := lockPath(t)
	m, err := zklock.NewMutex(c, path)
	require.NoError(t, err)
	held, err := m.Acquire(ctx)
	require.NoError(t, err)
	old := c.SessionID()
	waiter := make(chan acquireResult, 1)
	go func() { waiter <- acquireTimed(ctx, m) }()
	queued(t, c, path, 2)

	var endedAt time.Time
	var ended sync.WaitGroup
	ended.Go(func() {
		select {
		case <-held.Done():
			endedAt = time.Now()
		case <-ctx.Done():
		}
	})
	began := time.Now()
	require.NoError(t, e.Rebuild(ctx))
	t.Logf("rebuilt in %v", time.Since(began).Round(time.Millisecond))
	ended.Wait()
	require.False(t, endedAt.IsZero(), "the lease never ended: %v", held.Err())
	lost := held.Err()
	require.True(t, errors.Is(lost, zklock.ErrLeaseExpired) || errors.Is(lost, zklock.ErrSessionExpired),
		"the lease ended with %v, want a lease or session expiry", lost)

	var w acquireResult
	select {
	case w = <-waiter:
	case <-ctx.Done():
		t.Fatalf("the waiter never acquired (client session %#x, was %#x)", c.SessionID(), old)
	}
	require.NoError(t, w.err, "the waiter")
	now := c.SessionID()
	require.NotEqual(t, old, now, "a new session")
	require.NotZero(t, now)
	require.True(t, w.at.After(held.ValidUntil()), "the waiter acquired after the lost lease's ValidUntil")
	require.NoError(t, w.lease.Err(), "the waiter's lease is live")
	_, st, err := c.Conn().Get(w.lease.Node())
	require.NoError(t, err, "the waiter's node is in the rebuilt ensemble")
	require.Equal(t, now, st.EphemeralOwner, "the waiter's node belongs to the new session")
	require.Equal(t, []string{strings.TrimPrefix(w.lease.Node(), path+"/")}, children(t, c, path),
		"only the waiter's node is under the lock path")
	t.Logf("rebuilt ensemble: lease ended %v after the rebuild began (%v); session %#x -> %#x; "+
		"waiter acquired %v after the rebuild began, token %#x (the old holder's was %#x: a rebuilt ensemble counts zxids from its own first epoch)",
		endedAt.Sub(began).Round(time.Millisecond), lost, old, now, w.at.Sub(began).Round(time.Millisecond),
		w.lease.Token(), held.Token())
	require.Error(t, held.Release(ctx), "releasing the lost lease")
	require.NoError(t, w.lease.Release(ctx))
}
