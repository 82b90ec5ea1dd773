package zklock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

// recorder keeps every event a Trace reports.
type recorder struct {
	mu       sync.Mutex
	queued   []zklock.AcquireInfo
	acquired []zklock.AcquireInfo
	failed   []zklock.AcquireInfo
	released []zklock.LeaseInfo
	lost     []zklock.LeaseInfo
	sessions []zklock.SessionInfo
}

func (r *recorder) trace() *zklock.Trace {
	add := func(f func()) { r.mu.Lock(); f(); r.mu.Unlock() }
	return &zklock.Trace{
		Queued:   func(i zklock.AcquireInfo) { add(func() { r.queued = append(r.queued, i) }) },
		Acquired: func(i zklock.AcquireInfo) { add(func() { r.acquired = append(r.acquired, i) }) },
		Failed:   func(i zklock.AcquireInfo) { add(func() { r.failed = append(r.failed, i) }) },
		Released: func(i zklock.LeaseInfo) { add(func() { r.released = append(r.released, i) }) },
		Lost:     func(i zklock.LeaseInfo) { add(func() { r.lost = append(r.lost, i) }) },
		Session:  func(i zklock.SessionInfo) { add(func() { r.sessions = append(r.sessions, i) }) },
	}
}

// snapshot returns a copy of what r has recorded so far.
func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{
		queued: append([]zklock.AcquireInfo(nil), r.queued...), acquired: append([]zklock.AcquireInfo(nil), r.acquired...),
		failed: append([]zklock.AcquireInfo(nil), r.failed...), released: append([]zklock.LeaseInfo(nil), r.released...),
		lost: append([]zklock.LeaseInfo(nil), r.lost...), sessions: append([]zklock.SessionInfo(nil), r.sessions...),
	}
}

func (r *recorder) states() []zklock.SessionState {
	s := r.snapshot()
	var out []zklock.SessionState
	for _, i := range s.sessions {
		out = append(out, i.State)
	}
	return out
}

// A contended mutex: the first acquire holds at once, the second queues
// behind it and holds once the first is released; each event says where,
// which node, how far back and with which token.
func TestTraceAcquireQueueRelease(t *testing.T) {
	var ra, rb recorder
	a, b := connect(t, zklock.WithTrace(ra.trace())), connect(t, zklock.WithTrace(rb.trace()))
	path := lockPath(t)
	ctx := ctxT(t)
	la, err := newMutex(t, a, path).Acquire(ctx)
	must(t, err)
	ch := async(newMutex(t, b, path).Acquire, ctx)
	eventually(t, func() bool { return len(rb.snapshot().queued) == 1 }, "b reports that it queued")
	release(t, la)
	lb := await(t, ch)
	release(t, lb)

	sa, sb := ra.snapshot(), rb.snapshot()
	if len(sa.acquired) != 1 || len(sa.queued) != 0 || len(sa.released) != 1 {
		t.Fatalf("a: acquired %v, queued %v, released %v; want one acquire held at once, one release", sa.acquired, sa.queued, sa.released)
	}
	acq := sa.acquired[0]
	if acq.Path != path || acq.Node != la.Node() || acq.Kind != zklock.KindMutex || acq.Ahead != 0 || acq.Token != la.Token() || acq.Err != nil || acq.Queued {
		t.Errorf("a's Acquired = %+v; want path %s, node %s, kind mutex, ahead 0, token %d", acq, path, la.Node(), la.Token())
	}
	rel := sa.released[0]
	if rel.Path != path || rel.Node != la.Node() || rel.Token != la.Token() || rel.Held <= 0 || !errors.Is(rel.Err, zklock.ErrReleased) {
		t.Errorf("a's Released = %+v", rel)
	}
	q := sb.queued[0]
	if q.Node != lb.Node() || q.Ahead != 1 || q.Kind != zklock.KindMutex || q.Token != 0 {
		t.Errorf("b's Queued = %+v; want node %s, ahead 1", q, lb.Node())
	}
	if len(sb.acquired) != 1 {
		t.Fatalf("b's Acquired: %v", sb.acquired)
	}
	if acq := sb.acquired[0]; acq.Node != lb.Node() || acq.Ahead != 1 || acq.Token != lb.Token() || acq.Token <= la.Token() || acq.Waited < q.Waited || !acq.Queued {
		t.Errorf("b's Acquired = %+v; want node %s, ahead 1, token %d > %d, waited at least %v", acq, lb.Node(), lb.Token(), la.Token(), q.Waited)
	}
	if len(sa.failed)+len(sb.failed)+len(sa.lost)+len(sb.lost) != 0 {
		t.Errorf("failed %v %v, lost %v %v: want none", sa.failed, sb.failed, sa.lost, sb.lost)
	}
}

// Failures: a TryAcquire that finds the lock taken, a cancelled acquire,
// and an AcquireN that reports each of its leases.
func TestTraceFailedAndAcquireN(t *testing.T) {
	var r recorder
	c := connect(t, zklock.WithTrace(r.trace()))
	path := lockPath(t)
	ctx := ctxT(t)
	m := newMutex(t, c, path)
	l, err := m.Acquire(ctx)
	must(t, err)
	_, err = m.TryAcquire(ctx)
	mustIs(t, err, zklock.ErrLocked)
	cctx, cancel := context.WithCancel(ctx)
	ch := async(m.Acquire, cctx)
	eventually(t, func() bool { return len(r.snapshot().queued) == 1 }, "the second acquire queues")
	cancel()
	mustIs(t, returned(t, ch).err, context.Canceled)
	release(t, l)

	s := r.snapshot()
	if len(s.failed) != 2 {
		t.Fatalf("Failed: %v; want the TryAcquire and the cancelled acquire", s.failed)
	}
	if f := s.failed[0]; !errors.Is(f.Err, zklock.ErrLocked) || f.Path != path || f.Ahead != 1 || f.Queued {
		t.Errorf("TryAcquire's Failed = %+v", f)
	}
	if f := s.failed[1]; !errors.Is(f.Err, context.Canceled) || f.Node != s.queued[0].Node || f.Waited < s.queued[0].Waited || !f.Queued {
		t.Errorf("cancelled acquire's Failed = %+v, its Queued %+v", f, s.queued[0])
	}

	sem, err := zklock.NewSemaphore(c, lockPath(t), 3)
	must(t, err)
	leases, err := sem.AcquireN(ctx, 3)
	must(t, err)
	s = r.snapshot()
	got := s.acquired[len(s.acquired)-3:]
	for i, l := range leases {
		if got[i].Node != l.Node() || got[i].Kind != zklock.KindLease || got[i].Token != l.Token() {
			t.Errorf("AcquireN lease %d: Acquired %+v, lease node %s", i, got[i], l.Node())
		}
		if got[i].Queued {
			t.Errorf("AcquireN lease %d, which did not wait: Queued", i)
		}
		release(t, l)
	}

	// An AcquireN that waits: one Queued, and one end that says so (its
	// first lease's), so that a count of waiting acquires comes back to 0.
	one, err := sem.Acquire(ctx)
	must(t, err)
	queuedBefore := len(r.snapshot().queued)
	chn := make(chan []*zklock.Lease, 1)
	go func() {
		ls, err := sem.AcquireN(ctx, 3)
		if err != nil {
			t.Error(err)
		}
		chn <- ls
	}()
	eventually(t, func() bool { return len(r.snapshot().queued) == queuedBefore+1 }, "AcquireN queues")
	release(t, one)
	leases = <-chn
	s = r.snapshot()
	got = s.acquired[len(s.acquired)-3:]
	for i, l := range leases {
		if got[i].Queued != (i == 0) {
			t.Errorf("waiting AcquireN lease %d: Queued = %v, want %v", i, got[i].Queued, i == 0)
		}
		release(t, l)
	}
}

// Losses by cause, each also logged at Warn: a deleted node, and a session
// that expires and comes back (Session reports the expiry and the new
// session's id).
func TestTraceLostAndSession(t *testing.T) {
	var r recorder
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, f := faulty(t, time.Second, zklock.WithTrace(r.trace()), zklock.WithLogger(log))
	other := connect(t)
	ctx := ctxT(t)
	first := c.SessionID()
	if s := r.snapshot().sessions; len(s) != 1 || s[0].State != zklock.SessionConnected || s[0].SessionID != first || s[0].Server == "" {
		t.Fatalf("Session events after Connect: %+v; want one SessionConnected with id %x and a server", s, first)
	}

	path := lockPath(t)
	l, err := newMutex(t, c, path).Acquire(ctx)
	must(t, err)
	deleteNode(t, other, l.Node())
	ended(t, l)
	eventually(t, func() bool { return len(r.snapshot().lost) == 1 }, "Lost for the deleted node")
	if lost := r.snapshot().lost[0]; lost.Node != l.Node() || lost.Path != path || !errors.Is(lost.Err, zklock.ErrNodeDeleted) || lost.Token != l.Token() {
		t.Errorf("Lost = %+v; want node %s, cause ErrNodeDeleted", lost, l.Node())
	}

	l, err = newMutex(t, c, path).Acquire(ctx)
	must(t, err)
	must(t, f.ExpireSession(ctx), "expire the session")
	ended(t, l)
	eventually(t, func() bool { id := c.SessionID(); return id != 0 && id != first }, "a new session")
	eventually(t, func() bool {
		s := r.snapshot().sessions
		return len(s) > 0 && s[len(s)-1].State == zklock.SessionConnected && s[len(s)-1].SessionID == c.SessionID()
	}, "SessionConnected with the new session's id")
	states := r.states()
	if !containsInOrder(states, zklock.SessionExpired, zklock.SessionConnected) {
		t.Errorf("session states %v; want an expiry, then connected", states)
	}
	s := r.snapshot()
	if len(s.lost) != 2 || !errors.Is(s.lost[1].Err, zklock.ErrSessionExpired) && !errors.Is(s.lost[1].Err, zklock.ErrLeaseExpired) {
		t.Errorf("Lost: %+v; want the second lost to its session", s.lost)
	}
	for _, want := range []string{"lease lost", path, "node deleted"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("Warn log %q lacks %q", logs.String(), want)
		}
	}

	c.Close()
	if st := r.states(); st[len(st)-1] != zklock.SessionClosed {
		t.Errorf("session states %v; want SessionClosed last", st)
	}
}

// A disconnect that the session survives: Disconnected, then Connected
// with the same session id.
func TestTraceDisconnect(t *testing.T) {
	var r recorder
	c, f := faulty(t, 4*time.Second, zklock.WithTrace(r.trace()))
	id := c.SessionID()
	f.Drop()
	eventually(t, func() bool {
		s := r.snapshot().sessions
		return len(s) >= 3 && s[len(s)-1].State == zklock.SessionConnected
	}, "reconnect")
	s := r.snapshot().sessions
	if d := s[len(s)-2]; d.State != zklock.SessionDisconnected || d.Server != "" {
		t.Errorf("session events %+v; want Disconnected before the reconnect", s)
	}
	if last := s[len(s)-1]; last.SessionID != id {
		t.Errorf("reconnected with session %x, want %x", last.SessionID, id)
	}
}

func containsInOrder(states []zklock.SessionState, want ...zklock.SessionState) bool {
	for _, s := range states {
		if len(want) > 0 && s == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
