// Package zklockotel connects a zklock [zklock.Client] to OpenTelemetry:
// [NewTrace] returns a [zklock.Trace] whose hooks record metrics and a span
// per acquire. Pass it to [zklock.WithTrace]:
//
//	t, err := zklockotel.NewTrace()
//	...
//	c, err := zklock.Connect(ctx, servers, zklock.WithTrace(t))
//
// The instruments, on the meter "github.com/zkrecipes/zklock/zklockotel":
//
//   - zklock.acquire.duration (histogram, s): how long each acquire took,
//     from the call until it returned; attributes zklock.kind and
//     zklock.outcome (acquired, failed).
//   - zklock.lease.duration (histogram, s): how long each lease was held;
//     zklock.kind and zklock.end (released, lost).
//   - zklock.lease.lost (counter): leases that ended without Release;
//     zklock.kind and zklock.cause (session_expired, session_replaced,
//     connection_suspended, client_closed, lease_expired, node_deleted,
//     other).
//   - zklock.leases.held (up-down counter): leases held now; zklock.kind.
//   - zklock.acquires.waiting (up-down counter): acquires queued behind
//     others now; zklock.kind.
//   - zklock.session.state_changes (counter): changes of the Client's
//     connection and session; zklock.state (connected, disconnected,
//     expired, closed).
//
// zklock.kind is the node's kind: mutex, read, write, lease or latch. No
// metric carries the lock's path: paths are unbounded in number, and each
// would make series of its own.
//
// Each acquire also makes a span "zklock.acquire", on the tracer of the
// same name as the meter, from the call until the acquire returned, with
// the attributes zklock.path, zklock.kind, zklock.ahead (participants ahead
// of it in the queue) and, once held, zklock.token (the lease's fencing
// token); a failed acquire's span has an error status. The hooks are not
// given the caller's context, so the span is the root of a trace of its
// own.
package zklockotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zklock"
)

// scope names the meter and the tracer.
const scope = "github.com/zkrecipes/zklock/zklockotel"

// Option configures [NewTrace].
type Option func(*options) error

type options struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the provider of the meter that records the
// instruments. Default: the global one, [otel.GetMeterProvider]. A nil
// provider makes NewTrace fail with an error wrapping
// [zklock.ErrInvalidArgument].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		if mp == nil {
			return fmt.Errorf("zklockotel: %w: nil MeterProvider", zklock.ErrInvalidArgument)
		}
		o.mp = mp
		return nil
	}
}

// WithTracerProvider sets the provider of the tracer that makes the
// zklock.acquire spans. Default: the global one, [otel.GetTracerProvider].
// A nil provider makes NewTrace fail with an error wrapping
// [zklock.ErrInvalidArgument].
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return fmt.Errorf("zklockotel: %w: nil TracerProvider", zklock.ErrInvalidArgument)
		}
		o.tp = tp
		return nil
	}
}

// NewTrace returns the hooks that record zklock's events as OpenTelemetry
// metrics and spans, for [zklock.WithTrace]. Use one Trace per Client: the
// count of waiting acquires follows the Client's own session. It fails with
// an error wrapping [zklock.ErrInvalidArgument] on a nil provider, and with
// the meter's error if an instrument cannot be made.
func NewTrace(opts ...Option) (*zklock.Trace, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("zklockotel: %w: nil Option", zklock.ErrInvalidArgument)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	r, err := newRecorder(o.mp.Meter(scope), o.tp.Tracer(scope))
	if err != nil {
		return nil, err
	}
	return &zklock.Trace{
		Queued:   r.queued,
		Acquired: r.acquired,
		Failed:   r.failed,
		Released: r.released,
		Lost:     r.lost,
		Session:  r.session,
	}, nil
}

// Attribute keys.
const (
	keyKind    = attribute.Key("zklock.kind")
	keyOutcome = attribute.Key("zklock.outcome")
	keyEnd     = attribute.Key("zklock.end")
	keyCause   = attribute.Key("zklock.cause")
	keyState   = attribute.Key("zklock.state")
	keyPath    = attribute.Key("zklock.path")
	keyAhead   = attribute.Key("zklock.ahead")
	keyToken   = attribute.Key("zklock.token")
)

// kinds is the number of zklock.Kind values, KindUnknown (0) to KindLatch:
// the attribute sets below are arrays indexed by Kind, and any other value
// counts as KindUnknown.
const kinds = int(zklock.KindLatch) + 1

func kindIndex(k zklock.Kind) int {
	if k < 0 || int(k) >= kinds {
		return int(zklock.KindUnknown)
	}
	return int(k)
}

// The causes of a lost lease, as zklock.cause says them.
const (
	causeSessionExpired = iota
	causeSessionReplaced
	causeConnectionSuspended
	causeClientClosed
	causeLeaseExpired
	causeNodeDeleted
	causeOther
	causes
)

var causeNames = [causes]string{"session_expired", "session_replaced", "connection_suspended", "client_closed", "lease_expired", "node_deleted", "other"}

// causeOf names the cause of a lost lease. ErrNodeDeleted comes before
// ErrLeaseExpired, which a deleted node's error also wraps, and
// ErrSessionReplaced before ErrSessionExpired, which it also wraps.
func causeOf(err error) int {
	switch {
	case errors.Is(err, zklock.ErrNodeDeleted):
		return causeNodeDeleted
	case errors.Is(err, zklock.ErrSessionReplaced):
		return causeSessionReplaced
	case errors.Is(err, zklock.ErrSessionExpired):
		return causeSessionExpired
	case errors.Is(err, zklock.ErrConnectionSuspended):
		return causeConnectionSuspended
	case errors.Is(err, zklock.ErrClientClosed):
		return causeClientClosed
	case errors.Is(err, zklock.ErrLeaseExpired):
		return causeLeaseExpired
	}
	return causeOther
}

// The session states, as zklock.state says them; any other counts as
// unknown.
var states = [...]zklock.SessionState{zklock.SessionConnected, zklock.SessionDisconnected, zklock.SessionExpired, zklock.SessionClosed}

// attrs is one measurement's attributes, made once: recording with them
// allocates nothing of ours.
type attrs struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newAttrs(kv ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return attrs{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

// recorder holds the instruments and every attribute set they use.
type recorder struct {
	tracer trace.Tracer

	acquireDuration metric.Float64Histogram
	leaseDuration   metric.Float64Histogram
	leaseLost       metric.Int64Counter
	leasesHeld      metric.Int64UpDownCounter
	waiting         metric.Int64UpDownCounter
	stateChanges    metric.Int64Counter

	kind        [kinds]attrs // zklock.kind
	outAcquired [kinds]attrs // zklock.kind, zklock.outcome=acquired
	outFailed   [kinds]attrs // zklock.kind, zklock.outcome=failed
	endReleased [kinds]attrs // zklock.kind, zklock.end=released
	endLost     [kinds]attrs // zklock.kind, zklock.end=lost
	cause       [kinds][causes]attrs
	state       [len(states) + 1]attrs // the last: unknown

	kindAttr [kinds]attribute.KeyValue // for spans
}

// Bucket bounds, in seconds, for both histograms: from an uncontended
// acquire (a few milliseconds) to a lease held for an hour.
var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newRecorder(m metric.Meter, t trace.Tracer) (*recorder, error) {
	r := &recorder{tracer: t}
	var errs [6]error
	r.acquireDuration, errs[0] = m.Float64Histogram("zklock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long acquires took, from the call until they returned."),
		metric.WithExplicitBucketBoundaries(buckets...))
	r.leaseDuration, errs[1] = m.Float64Histogram("zklock.lease.duration", metric.WithUnit("s"),
		metric.WithDescription("How long leases were held, from the grant until they ended."),
		metric.WithExplicitBucketBoundaries(buckets...))
	r.leaseLost, errs[2] = m.Int64Counter("zklock.lease.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended without Release."))
	r.leasesHeld, errs[3] = m.Int64UpDownCounter("zklock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held."))
	r.waiting, errs[4] = m.Int64UpDownCounter("zklock.acquires.waiting", metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires queued behind others."))
	r.stateChanges, errs[5] = m.Int64Counter("zklock.session.state_changes", metric.WithUnit("{change}"),
		metric.WithDescription("Changes of the connection's and the session's state."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("zklockotel: %w", err)
	}
	for k := range kinds {
		kind := keyKind.String(zklock.Kind(k).String())
		r.kindAttr[k] = kind
		r.kind[k] = newAttrs(kind)
		r.outAcquired[k] = newAttrs(kind, keyOutcome.String("acquired"))
		r.outFailed[k] = newAttrs(kind, keyOutcome.String("failed"))
		r.endReleased[k] = newAttrs(kind, keyEnd.String("released"))
		r.endLost[k] = newAttrs(kind, keyEnd.String("lost"))
		for c := range causes {
			r.cause[k][c] = newAttrs(kind, keyCause.String(causeNames[c]))
		}
	}
	for i, s := range states {
		r.state[i] = newAttrs(keyState.String(s.String()))
	}
	r.state[len(states)] = newAttrs(keyState.String("unknown"))
	return r, nil
}

func (r *recorder) queued(i zklock.AcquireInfo) {
	r.waiting.Add(context.Background(), 1, r.kind[kindIndex(i.Kind)].add...)
}

func (r *recorder) acquired(i zklock.AcquireInfo) {
	r.done(i, &r.outAcquired)
	r.leasesHeld.Add(context.Background(), 1, r.kind[kindIndex(i.Kind)].add...)
}

func (r *recorder) failed(i zklock.AcquireInfo) { r.done(i, &r.outFailed) }

// done records an acquire that returned, with outcome's attributes.
func (r *recorder) done(i zklock.AcquireInfo, outcome *[kinds]attrs) {
	now := time.Now()
	k := kindIndex(i.Kind)
	ctx := context.Background()
	if i.Queued { // the one end of a Queued (an AcquireN's first lease)
		r.waiting.Add(ctx, -1, r.kind[k].add...)
	}
	r.acquireDuration.Record(ctx, i.Waited.Seconds(), outcome[k].record...)

	// The span starts at the call: Waited before the hook ran.
	kv := [4]attribute.KeyValue{keyPath.String(i.Path), r.kindAttr[k], keyAhead.Int(i.Ahead)}
	n := 3
	if i.Err == nil {
		kv[n] = keyToken.Int64(i.Token)
		n++
	}
	_, span := r.tracer.Start(ctx, "zklock.acquire", trace.WithTimestamp(now.Add(-i.Waited)), trace.WithAttributes(kv[:n]...))
	if i.Err != nil {
		span.SetStatus(codes.Error, i.Err.Error())
	}
	span.End(trace.WithTimestamp(now))
}

func (r *recorder) released(i zklock.LeaseInfo) {
	k := kindIndex(i.Kind)
	ctx := context.Background()
	r.leasesHeld.Add(ctx, -1, r.kind[k].add...)
	r.leaseDuration.Record(ctx, i.Held.Seconds(), r.endReleased[k].record...)
}

func (r *recorder) lost(i zklock.LeaseInfo) {
	k := kindIndex(i.Kind)
	ctx := context.Background()
	r.leasesHeld.Add(ctx, -1, r.kind[k].add...)
	r.leaseDuration.Record(ctx, i.Held.Seconds(), r.endLost[k].record...)
	r.leaseLost.Add(ctx, 1, r.cause[k][causeOf(i.Err)].add...)
}

func (r *recorder) session(i zklock.SessionInfo) {
	s := len(states)
	for j, st := range states {
		if i.State == st {
			s = j
		}
	}
	r.stateChanges.Add(context.Background(), 1, r.state[s].add...)
}
