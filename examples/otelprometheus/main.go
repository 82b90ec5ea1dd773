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
	// up across Clients.
	connect := func() *zklock.Client {
		t, err := zklockotel.NewTrace(zklockotel.WithMeterProvider(mp))
		if err != nil {
			log.Fatal(err)
		}
		c, err := zklock.Connect(ctx, servers, zklock.WithTrace(t))
		if err != nil {
			log.Fatal(err)
		}
		return c
	}

	// Four workers on one Mutex: all but one wait at each turn.
	var wg sync.WaitGroup
	for w := 1; w <= 4; w++ {
		c := connect()
		defer c.Close()
		m, err := zklock.NewMutex(c, path+"/mutex")
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				err := zklock.Do(ctx, m, func(ctx context.Context) error {
					time.Sleep(20 * time.Millisecond) // the critical section
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}

	// While the workers run, TryAcquire fails whenever one of them holds.
	c := connect()
	defer c.Close()
	m, err := zklock.NewMutex(c, path+"/mutex")
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

	// An RWMutex: two readers and two writers at once.
	for i := 0; i < 4; i++ {
		c := connect()
		defer c.Close()
		rw, err := zklock.NewRWMutex(c, path+"/rwmutex")
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
			err := zklock.Do(ctx, side, func(ctx context.Context) error {
				time.Sleep(20 * time.Millisecond)
				return nil
			})
			if err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()

	// Scrape, as Prometheus would.
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
