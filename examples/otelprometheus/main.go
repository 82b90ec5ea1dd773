// Command otelprometheus shows zklock's OpenTelemetry instruments
// (github.com/zkrecipes/zklock/zklockotel) exported for Prometheus: four
// workers, each with its own ZooKeeper session, take turns on one Mutex,
// a TryAcquire finds it taken, readers and a writer share an RWMutex; then
// the program scrapes its own /metrics handler and prints the zklock_ lines
// (all but the histograms' _bucket lines, which it counts).
//
//	ZKLOCK_SERVERS=127.0.0.1:2181 go run ./examples/otelprometheus
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zklockotel"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(env("ZKLOCK_SERVERS", "127.0.0.1:2181"), ",")
	path := fmt.Sprintf("/zklock-examples/otelprometheus-%d", time.Now().UnixNano())

	// The exporter is a metric reader that a Prometheus registry collects
	// from; the registry's handler is what Prometheus scrapes. Without the
	// otel_scope_* labels, for a shorter print.
	reg := promclient.NewRegistry()
	exporter, err := prometheus.New(prometheus.WithRegisterer(reg), prometheus.WithoutScopeInfo())
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	// One Trace per Client, all on the same MeterProvider: the series add
	// up across Clients. The Clients stay open until the scrape.
	var clients []*zklock.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	connect := func() *zklock.Client {
		t, err := zklockotel.NewTrace(zklockotel.WithMeterProvider(mp))
		if err != nil {
			log.Fatal(err)
		}
		c, err := zklock.Connect(ctx, servers, zklock.WithTrace(t))
		if err != nil {
			log.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}

	mutexTurns(ctx, connect, path+"/mutex")
	rwTurns(ctx, connect, path+"/rwmutex")
	scrape(reg)
}

// mutexTurns has four workers take turns on one Mutex, all but one waiting
// at each turn, while TryAcquire fails whenever one of them holds.
func mutexTurns(ctx context.Context, connect func() *zklock.Client, path string) {
	var wg sync.WaitGroup
	for w := 1; w <= 4; w++ {
		m, err := zklock.NewMutex(connect(), path)
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				hold(ctx, m)
			}
		}()
	}

	m, err := zklock.NewMutex(connect(), path)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		l, err := m.TryAcquire(ctx)
		switch {
		case errors.Is(err, zklock.ErrLocked):
		case err != nil:
			log.Fatal(err)
		default:
			if err := l.Release(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	wg.Wait()
}

// rwTurns has two readers and two writers on one RWMutex at once.
func rwTurns(ctx context.Context, connect func() *zklock.Client, path string) {
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		rw, err := zklock.NewRWMutex(connect(), path)
		if err != nil {
			log.Fatal(err)
		}
		side := rw.ReadLock()
		if i%2 == 1 {
			side = rw.WriteLock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hold(ctx, side)
		}()
	}
	wg.Wait()
}

// hold takes l, holds it for a moment (the critical section) and releases
// it.
func hold(ctx context.Context, l zklock.Locker) {
	err := zklock.Do(ctx, l, func(ctx context.Context) error {
		time.Sleep(20 * time.Millisecond) // the critical section
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// scrape reads the registry's handler as Prometheus would and prints the
// zklock_ lines, counting the histograms' _bucket lines.
func scrape(reg *promclient.Registry) {
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	buckets := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !strings.HasPrefix(line, "zklock_"):
		case strings.Contains(line, "_bucket{"):
			buckets++
		default:
			fmt.Println(line)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("(and %d _bucket lines)\n", buckets)
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
