package zklockotel_test

import (
	"context"
	"log"
	"os"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zklockotel"
)

// A Client whose locks are measured and traced: the providers here are
// the SDK's, to be given the program's exporters (Prometheus, OTLP...);
// without the options, NewTrace uses the global ones.
func ExampleNewTrace() {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider( /* sdkmetric.WithReader(exporter) */ )
	defer mp.Shutdown(ctx)
	tp := sdktrace.NewTracerProvider( /* sdktrace.WithBatcher(exporter) */ )
	defer tp.Shutdown(ctx)

	t, err := zklockotel.NewTrace(zklockotel.WithMeterProvider(mp), zklockotel.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	c, err := zklock.Connect(ctx, strings.Split(os.Getenv("ZKLOCK_SERVERS"), ","), zklock.WithTrace(t))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m, err := zklock.NewMutex(c, "/locks/report")
	if err != nil {
		log.Fatal(err)
	}
	// Recorded: zklock.acquire.duration, zklock.leases.held, a
	// zklock.acquire span; on Release, zklock.lease.duration.
	err = zklock.Do(ctx, m, func(ctx context.Context) error {
		return nil // the critical section
	})
	if err != nil {
		log.Fatal(err)
	}
}
