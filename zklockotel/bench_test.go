//go:build go1.24

package zklockotel_test

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zklockotel"
)

// BenchmarkOtelOverhead: the uncontended acquire and release of the root
// module's BenchmarkTraceOverhead, with no Trace, with zklockotel on the
// no-op providers (metric/noop, trace/noop), and with zklockotel on the
// SDK: a MeterProvider with a ManualReader, and a TracerProvider that
// samples every span and hands it to a batcher with an exporter that drops
// it. Compare ns/op and allocs/op across them (benchstat over -count
// runs) and with BenchmarkTraceOverhead's.
func BenchmarkOtelOverhead(b *testing.B) {
	ctx := context.Background()
	sdk := func(b *testing.B) []zklockotel.Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) })
		return []zklockotel.Option{zklockotel.WithMeterProvider(mp), zklockotel.WithTracerProvider(tp)}
	}
	noop := func(*testing.B) []zklockotel.Option {
		return []zklockotel.Option{zklockotel.WithMeterProvider(metricnoop.NewMeterProvider()),
			zklockotel.WithTracerProvider(tracenoop.NewTracerProvider())}
	}
	for _, tc := range []struct {
		name string
		otel func(*testing.B) []zklockotel.Option // nil: no Trace
	}{{"none", nil}, {"noop", noop}, {"sdk", sdk}} {
		b.Run(tc.name, func(b *testing.B) {
			var opts []zklock.Option
			if tc.otel != nil {
				t, err := zklockotel.NewTrace(tc.otel(b)...)
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, zklock.WithTrace(t))
			}
			m := newMutex(b, connect(b, opts...), lockPath(b))
			ctx := ctxT(b)
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
		})
	}
}

// BenchmarkHooks: what zklockotel's hooks cost by themselves, without
// ZooKeeper, for the events of one uncontended cycle (Acquired, then
// Released), on the no-op providers and on the SDK as
// BenchmarkOtelOverhead has them. Its ns/op is the whole of what
// zklockotel adds to a cycle, free of the noise of the round trips.
func BenchmarkHooks(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts func(*testing.B) []zklockotel.Option
	}{
		{"noop", func(*testing.B) []zklockotel.Option {
			return []zklockotel.Option{zklockotel.WithMeterProvider(metricnoop.NewMeterProvider()),
				zklockotel.WithTracerProvider(tracenoop.NewTracerProvider())}
		}},
		{"sdk", func(b *testing.B) []zklockotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) })
			return []zklockotel.Option{zklockotel.WithMeterProvider(mp), zklockotel.WithTracerProvider(tp)}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			t, err := zklockotel.NewTrace(tc.opts(b)...)
			if err != nil {
				b.Fatal(err)
			}
			acq := zklock.AcquireInfo{Path: "/locks/bench", Node: "/locks/bench/_c_x-lock-0000000001", Kind: zklock.KindMutex,
				Waited: 1500 * time.Microsecond, Token: 42}
			rel := zklock.LeaseInfo{Path: acq.Path, Node: acq.Node, Kind: acq.Kind, Token: acq.Token,
				Held: 200 * time.Microsecond, Err: zklock.ErrReleased}
			b.ReportAllocs()
			for b.Loop() {
				t.Acquired(acq)
				t.Released(rel)
			}
		})
	}
}
