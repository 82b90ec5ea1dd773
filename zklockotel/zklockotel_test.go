package zklockotel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/faults"
	"github.com/zkrecipes/zklock/zklockotel"
	"github.com/zkrecipes/zklock/zktest"
)

// One ZooKeeper per test binary (or ZKLOCK_TEST_SERVERS), terminated at the
// end.
func TestMain(m *testing.M) { zktest.Main(m) }

// long bounds every wait: far above what any step needs, so that a hang
// fails instead of blocking the run.
const long = 30 * time.Second

// otelT is a Trace from zklockotel on the SDK: a ManualReader for the
// metrics and a SpanRecorder for the spans.
type otelT struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	trace  *zklock.Trace
}

func newOtel(t *testing.T) *otelT {
	t.Helper()
	o := &otelT{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	var err error
	o.trace, err = zklockotel.NewTrace(zklockotel.WithMeterProvider(mp), zklockotel.WithTracerProvider(tp))
	require.NoError(t, err)
	return o
}

// metrics collects every instrument, by name. No data point of any may
// carry the lock's path.
func (o *otelT) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, o.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, "github.com/zkrecipes/zklock/zklockotel", sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
			for _, s := range attrSets(m.Data) {
				_, ok := s.Value("zklock.path")
				require.False(t, ok, "%s carries the path: %v", m.Name, s)
			}
		}
	}
	return out
}

func attrSets(a metricdata.Aggregation) []attribute.Set {
	var sets []attribute.Set
	switch d := a.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}

// sum is the value of the counter name at exactly the attributes kv (0 if
// it has no such point).
func (o *otelT) sum(t *testing.T, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	want := attribute.NewSet(kv...)
	a, ok := o.metrics(t)[name]
	if !ok {
		return 0
	}
	s, ok := a.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", name, a)
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// hist is the count and the sum of the histogram name at exactly the
// attributes kv.
func (o *otelT) hist(t *testing.T, name string, kv ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	want := attribute.NewSet(kv...)
	a, ok := o.metrics(t)[name]
	if !ok {
		return 0, 0
	}
	h, ok := a.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, not a float64 histogram", name, a)
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Count, p.Sum
		}
	}
	return 0, 0
}

// acquireSpans returns the ended zklock.acquire spans.
func (o *otelT) acquireSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.spans.Ended() {
		require.Equal(t, "zklock.acquire", s.Name())
		out = append(out, s)
	}
	return out
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

var (
	kindMutex = attribute.String("zklock.kind", "mutex")
	kindRead  = attribute.String("zklock.kind", "read")
	acquired  = attribute.String("zklock.outcome", "acquired")
	failed    = attribute.String("zklock.outcome", "failed")
	released  = attribute.String("zklock.end", "released")
	lost      = attribute.String("zklock.end", "lost")
)

func state(s string) attribute.KeyValue { return attribute.String("zklock.state", s) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*long)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	c, err := zklock.Connect(ctxT(t), zktest.Servers(t), opts...)
	require.NoError(t, err, "connect")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockPath returns a path of the test's own.
func lockPath(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "/zklockotel-test/" + name + "-" + hex.EncodeToString(b[:]) + "/lock"
}

func newMutex(t testing.TB, c *zklock.Client, path string) *zklock.Mutex {
	t.Helper()
	m, err := zklock.NewMutex(c, path)
	require.NoError(t, err)
	return m
}

type result struct {
	lease *zklock.Lease
	err   error
}

func async(ctx context.Context, acquire func(context.Context) (*zklock.Lease, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- result{l, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) *zklock.Lease {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err, "acquire")
		return r.lease
	case <-time.After(long):
		t.Fatal("the acquire did not return")
		return nil
	}
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	require.Eventually(t, cond, long, 5*time.Millisecond, what)
}

// An uncontended acquire and release: one acquire held at once, one lease
// held and then released, nothing waiting, and a span from the call to the
// return with the path, the kind, nobody ahead and the token.
func TestUncontended(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	ctx := ctxT(t)
	path := lockPath(t)
	before := time.Now()
	l, err := newMutex(t, c, path).Acquire(ctx)
	require.NoError(t, err)
	after := time.Now()

	n, waited := o.hist(t, "zklock.acquire.duration", kindMutex, acquired)
	require.Equal(t, uint64(1), n, "acquires recorded")
	require.Greater(t, waited, 0.0)
	require.LessOrEqual(t, waited, after.Sub(before).Seconds())
	require.Equal(t, int64(1), o.sum(t, "zklock.leases.held", kindMutex))
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindMutex))

	require.NoError(t, l.Release(ctx))
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindMutex))
	n, held := o.hist(t, "zklock.lease.duration", kindMutex, released)
	require.Equal(t, uint64(1), n, "leases ended")
	require.Greater(t, held, 0.0)
	n, _ = o.hist(t, "zklock.lease.duration", kindMutex, lost)
	require.Zero(t, n, "leases lost")
	n, _ = o.hist(t, "zklock.acquire.duration", kindMutex, failed)
	require.Zero(t, n, "acquires failed")

	spans := o.acquireSpans(t)
	require.Len(t, spans, 1)
	s := spans[0]
	a := spanAttrs(s)
	require.Equal(t, path, a["zklock.path"].AsString())
	require.Equal(t, "mutex", a["zklock.kind"].AsString())
	require.Equal(t, int64(0), a["zklock.ahead"].AsInt64())
	require.Equal(t, l.Token(), a["zklock.token"].AsInt64())
	require.Len(t, a, 4)
	require.Equal(t, codes.Unset, s.Status().Code)
	// The span starts at the call and lasts as long as the acquire.
	require.False(t, s.StartTime().Before(before), "span starts %v, before the call at %v", s.StartTime(), before)
	require.Equal(t, waited, s.EndTime().Sub(s.StartTime()).Seconds(), "span's length = the recorded acquire duration")
}

// A contended acquire waits (acquires.waiting 1) and is granted when the
// holder releases (0 again). Acquires with others ahead that never queue
// leave the count alone: a reader behind a reader, and a TryAcquire that
// finds the lock taken while another acquire of the same Client waits.
func TestContended(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	holder := connect(t)
	ctx := ctxT(t)
	path := lockPath(t)

	hl, err := newMutex(t, holder, path).Acquire(ctx)
	require.NoError(t, err)
	m := newMutex(t, c, path)
	ch := async(ctx, m.Acquire)
	eventually(t, func() bool { return o.sum(t, "zklock.acquires.waiting", kindMutex) == 1 }, "the acquire waits")

	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked)
	require.Equal(t, int64(1), o.sum(t, "zklock.acquires.waiting", kindMutex), "a failed TryAcquire does not end the wait of another")
	n, _ := o.hist(t, "zklock.acquire.duration", kindMutex, failed)
	require.Equal(t, uint64(1), n)

	require.NoError(t, hl.Release(ctx))
	l := await(t, ch)
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindMutex))
	require.Equal(t, int64(1), o.sum(t, "zklock.leases.held", kindMutex))
	n, _ = o.hist(t, "zklock.acquire.duration", kindMutex, acquired)
	require.Equal(t, uint64(1), n)
	var granted sdktrace.ReadOnlySpan
	for _, s := range o.acquireSpans(t) {
		if _, ok := spanAttrs(s)["zklock.token"]; ok {
			granted = s
		}
	}
	require.NotNil(t, granted, "the granted acquire's span")
	require.Equal(t, int64(1), spanAttrs(granted)["zklock.ahead"].AsInt64())
	require.Equal(t, l.Token(), spanAttrs(granted)["zklock.token"].AsInt64())
	require.NoError(t, l.Release(ctx))

	// Readers share: the second holds at once with one ahead, never queued.
	rw, err := zklock.NewRWMutex(c, lockPath(t))
	require.NoError(t, err)
	r1, err := rw.ReadLock().Acquire(ctx)
	require.NoError(t, err)
	r2, err := rw.ReadLock().Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindRead), "readers that share never wait")
	require.Equal(t, int64(2), o.sum(t, "zklock.leases.held", kindRead))
	var aheads []int64
	for _, s := range o.acquireSpans(t) {
		if spanAttrs(s)["zklock.kind"].AsString() == "read" {
			aheads = append(aheads, spanAttrs(s)["zklock.ahead"].AsInt64())
		}
	}
	require.Equal(t, []int64{0, 1}, aheads, "zklock.ahead of the readers")
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindRead))
	n, _ = o.hist(t, "zklock.lease.duration", kindRead, released)
	require.Equal(t, uint64(2), n)
}

// A TryAcquire that finds the lock taken: outcome failed, a span with an
// error status and no token, and no lease.
func TestTryAcquireFailed(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	holder := connect(t)
	ctx := ctxT(t)
	path := lockPath(t)
	hl, err := newMutex(t, holder, path).Acquire(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, hl.Release(ctx)) }()

	_, err = newMutex(t, c, path).TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked)
	n, _ := o.hist(t, "zklock.acquire.duration", kindMutex, failed)
	require.Equal(t, uint64(1), n)
	n, _ = o.hist(t, "zklock.acquire.duration", kindMutex, acquired)
	require.Zero(t, n)
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindMutex))
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindMutex))

	spans := o.acquireSpans(t)
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, codes.Error, s.Status().Code)
	require.Equal(t, err.Error(), s.Status().Description)
	a := spanAttrs(s)
	require.Equal(t, path, a["zklock.path"].AsString())
	require.Equal(t, int64(1), a["zklock.ahead"].AsInt64())
	_, hasToken := a["zklock.token"]
	require.False(t, hasToken, "a failed acquire's span has no token")
}

// A held node that someone deletes: the lease is lost with cause
// node_deleted, and its duration is recorded with end=lost.
func TestLostNodeDeleted(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	other := connect(t)
	ctx := ctxT(t)
	l, err := newMutex(t, c, lockPath(t)).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, other.Conn().Delete(l.Node(), -1))
	requireLost(t, o, l, zklock.ErrNodeDeleted, "node_deleted")
	n, _ := o.hist(t, "zklock.lease.duration", kindMutex, lost)
	require.Equal(t, uint64(1), n)
	n, _ = o.hist(t, "zklock.lease.duration", kindMutex, released)
	require.Zero(t, n)
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindMutex))
}

// A server that hands out a new session on reconnect (zktest's Forwarder
// plays one): the lease is lost with cause session_replaced, not
// session_expired, though its error is an ErrSessionExpired too.
func TestLostSessionReplaced(t *testing.T) {
	o := newOtel(t)
	fw := zktest.Forward(t, zktest.Servers(t)[0])
	ctx := ctxT(t)
	c, err := zklock.Connect(ctx, []string{fw.Addr()}, zklock.WithTrace(o.trace))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := newMutex(t, c, lockPath(t)).Acquire(ctx)
	require.NoError(t, err)
	fw.SwapSessions(true)
	fw.Drop()
	requireLost(t, o, l, zklock.ErrSessionReplaced, "session_replaced")
}

// requireLost waits for mutex lease l to end with an error that is
// sentinel, and for lease.lost to count it, once, under cause and no other.
func requireLost(t *testing.T, o *otelT, l *zklock.Lease, sentinel error, cause string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(long):
		t.Fatal("the lease did not end")
	}
	require.ErrorIs(t, l.Err(), sentinel)
	kv := attribute.String("zklock.cause", cause)
	eventually(t, func() bool { return o.sum(t, "zklock.lease.lost", kindMutex, kv) == 1 }, "lease.lost with cause "+cause)
	lostMetric, ok := o.metrics(t)["zklock.lease.lost"].(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, lostMetric.DataPoints, 1, "no loss of any other cause")
}

// Session changes are counted by state, exactly as the Client reports
// them: connected, a dropped connection and its reconnect, an expiry and
// the new session, and the close. An acquire waiting across the expiry
// queues again with a new node, and the count of waiting acquires still
// comes back to 0 when it is granted.
func TestSessionStates(t *testing.T) {
	o := newOtel(t)
	var mu sync.Mutex
	seen := map[zklock.SessionState]int64{}
	var order []zklock.SessionState
	inner := o.trace.Session
	o.trace.Session = func(i zklock.SessionInfo) {
		mu.Lock()
		seen[i.State]++
		order = append(order, i.State)
		mu.Unlock()
		inner(i)
	}
	count := func(s zklock.SessionState) int64 { mu.Lock(); defer mu.Unlock(); return seen[s] }

	f := faults.New(nil)
	t.Cleanup(f.Close)
	c := connect(t, zklock.WithDialer(f.Dialer()), zklock.WithSessionTimeout(4*time.Second), zklock.WithTrace(o.trace))
	holder := connect(t)
	ctx := ctxT(t)
	require.Equal(t, int64(1), o.sum(t, "zklock.session.state_changes", state("connected")))

	f.Drop()
	eventually(t, func() bool { return count(zklock.SessionConnected) == 2 }, "reconnect")
	require.Equal(t, int64(1), o.sum(t, "zklock.session.state_changes", state("disconnected")))

	path := lockPath(t)
	hl, err := newMutex(t, holder, path).Acquire(ctx)
	require.NoError(t, err)
	ch := async(ctx, newMutex(t, c, path).Acquire)
	eventually(t, func() bool { return o.sum(t, "zklock.acquires.waiting", kindMutex) == 1 }, "the acquire waits")
	first := c.SessionID()
	require.NoError(t, f.ExpireSession(ctx), "expire the session")
	eventually(t, func() bool { id := c.SessionID(); return id != 0 && id != first }, "a new session")
	eventually(t, func() bool {
		ps, err := newMutex(t, holder, path).Participants(ctx)
		return err == nil && len(ps) == 2
	}, "the acquire queued again in the new session")
	require.Equal(t, int64(1), o.sum(t, "zklock.acquires.waiting", kindMutex), "still one waiting")
	require.NoError(t, hl.Release(ctx))
	l := await(t, ch)
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindMutex), "the requeued acquire's end")
	require.NoError(t, l.Release(ctx))

	require.NoError(t, c.Close())
	mu.Lock()
	require.Equal(t, zklock.SessionClosed, order[len(order)-1], "closed last: %v", order)
	mu.Unlock()
	for _, s := range []zklock.SessionState{zklock.SessionConnected, zklock.SessionDisconnected, zklock.SessionExpired, zklock.SessionClosed} {
		require.Positive(t, count(s), "%v reported", s)
		require.Equal(t, count(s), o.sum(t, "zklock.session.state_changes", state(s.String())), "state_changes for %v", s)
	}
}

// Bad options fail before anything is made, with ErrInvalidArgument.
func TestOptions(t *testing.T) {
	for name, opt := range map[string]zklockotel.Option{
		"nil meter provider":  zklockotel.WithMeterProvider(nil),
		"nil tracer provider": zklockotel.WithTracerProvider(nil),
		"nil option":          nil,
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := zklockotel.NewTrace(opt)
			require.ErrorIs(t, err, zklock.ErrInvalidArgument)
			require.Nil(t, tr)
		})
	}
	tr, err := zklockotel.NewTrace()
	require.NoError(t, err, "the global providers")
	require.NotNil(t, tr.Acquired)
}

// An AcquireN that waits counts as one waiting acquire, and its end (one
// Acquired per lease) brings the count back to 0, not below.
func TestAcquireNWaits(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	holder := connect(t)
	ctx := ctxT(t)
	path := lockPath(t)
	kindLease := attribute.String("zklock.kind", "lease")
	hs, err := zklock.NewSemaphore(holder, path, 2)
	require.NoError(t, err)
	held, err := hs.AcquireN(ctx, 2)
	require.NoError(t, err)
	s, err := zklock.NewSemaphore(c, path, 2)
	require.NoError(t, err)
	ch := make(chan []*zklock.Lease, 1)
	go func() {
		leases, err := s.AcquireN(ctx, 2)
		if err != nil {
			leases = nil
		}
		ch <- leases
	}()
	eventually(t, func() bool { return o.sum(t, "zklock.acquires.waiting", kindLease) == 1 }, "AcquireN waits")
	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
	var leases []*zklock.Lease
	select {
	case leases = <-ch:
	case <-time.After(long):
		t.Fatal("AcquireN did not return")
	}
	require.Len(t, leases, 2, "AcquireN's leases")
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindLease))
	require.Equal(t, int64(2), o.sum(t, "zklock.leases.held", kindLease))
	for _, l := range leases {
		require.NoError(t, l.Release(ctx))
	}
	require.Equal(t, int64(0), o.sum(t, "zklock.leases.held", kindLease))
}

// A waiting acquire whose node someone deletes (an operator clearing the
// path) queues again with a new node and no second Queued: it still ends
// the one wait it began, and the count comes back to 0.
func TestWaitingNodeDeleted(t *testing.T) {
	o := newOtel(t)
	c := connect(t, zklock.WithTrace(o.trace))
	holder := connect(t)
	ctx := ctxT(t)
	path := lockPath(t)

	hl, err := newMutex(t, holder, path).Acquire(ctx)
	require.NoError(t, err)
	ch := async(ctx, newMutex(t, c, path).Acquire)
	eventually(t, func() bool { return o.sum(t, "zklock.acquires.waiting", kindMutex) == 1 }, "the acquire waits")
	ps, err := newMutex(t, holder, path).Participants(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.NoError(t, holder.Conn().Delete(ps[1].Node, -1), "delete the waiting node")
	eventually(t, func() bool {
		ps, err := newMutex(t, holder, path).Participants(ctx)
		return err == nil && len(ps) == 2 && ps[1].Node != ps[0].Node
	}, "the acquire queued again")
	require.Equal(t, int64(1), o.sum(t, "zklock.acquires.waiting", kindMutex), "still one waiting")
	require.NoError(t, hl.Release(ctx))
	l := await(t, ch)
	require.Equal(t, int64(0), o.sum(t, "zklock.acquires.waiting", kindMutex), "the requeued acquire's end")
	require.NoError(t, l.Release(ctx))
}
