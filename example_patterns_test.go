package zklock_test

// The patterns of docs/patterns.md, each as a service would run it. They
// need a ZooKeeper, so they have no Output: go test compiles them, and
// tools/docscheck checks that docs/patterns.md shows them as they are here.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zklock"
)

// A replica that leads whenever it can, and fences what it writes: the
// report store refuses a leader whose token is lower than one it has seen.
func Example_leaderLoop() {
	// The replica stops leading, and campaigning, at SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, err := zklock.Connect(ctx, []string{"zk1:2181,zk2:2181,zk3:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	host, _ := os.Hostname()
	e, err := zklock.NewElection(c, "/reportsvc/leader", zklock.WithNodeData([]byte(host)))
	if err != nil {
		log.Fatal(err)
	}

	for ctx.Err() == nil {
		err := e.Lead(ctx, func(ctx context.Context) error {
			// Leading until ctx ends: leadership may be lost, or the replica stops.
			token := zklock.LeaseFrom(ctx).Token() // rises from leader to leader
			tick := time.NewTicker(time.Minute)
			defer tick.Stop()
			for {
				if err := store.Write(ctx, token, "hourly report", "/reportsvc/leader"); err != nil {
					return err // refused: a newer leader has written
				}
				select {
				case <-ctx.Done():
					return nil // Lead's error says whether leadership was lost
				case <-tick.C:
				}
			}
		})
		if errors.Is(err, zklock.ErrClientClosed) {
			return
		}
		if ctx.Err() == nil { // lost, or fn failed: campaign again after a pause
			log.Printf("no longer leading: %v", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

// Request handlers read the configuration under the read side of one
// RWMutex, shared by the process's readers; a change takes the write side.
func Example_configUnderSharedReads() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"zk1:2181,zk2:2181,zk3:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	config, err := zklock.NewRWMutex(c, "/reportsvc/config", zklock.WithSharedReads())
	if err != nil {
		log.Fatal(err)
	}

	// Readers: while this process's read node holds, Acquire costs no request.
	http.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		err := zklock.Do(r.Context(), config.ReadLock(), func(ctx context.Context) error {
			cfg, err := store.Load(ctx, "/reportsvc/config")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(w, cfg)
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})

	// A change, from an admin endpoint or another service: readers that
	// arrive after the writer queued wait for it.
	err = zklock.Do(ctx, config.WriteLock(), func(ctx context.Context) error {
		return store.Write(ctx, zklock.LeaseFrom(ctx).Token(), "retention=30d", "/reportsvc/config")
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Workers of every replica share a fleet-wide limit of concurrent exports.
// The limit comes from the replica's configuration, and a rolling deploy
// changes it.
func Example_workerPool() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"zk1:2181,zk2:2181,zk3:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	limit, err := strconv.Atoi(os.Getenv("EXPORT_LIMIT")) // 2, then 3 in the next deploy
	if err != nil {
		log.Fatal(err)
	}
	exports, err := zklock.NewSemaphore(c, "/reportsvc/exports", limit)
	if err != nil {
		log.Fatal(err)
	}

	jobs := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // more workers than leases: the rest queue, first come first served
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				err := zklock.Do(ctx, exports, func(ctx context.Context) error {
					return export(ctx, job) // ctx ends if the lease is lost
				})
				if err != nil {
					log.Printf("export %s: %v", job, err)
				}
			}
		}()
	}
	for _, job := range []string{"2026-11", "2026-10", "2026-09"} {
		jobs <- job
	}
	close(jobs)
	wg.Wait()

	// During a rolling resize, the smallest size among the live
	// participants bounds whoever queues now: zklock ls shows the same.
	ps, err := exports.Participants(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("size in force:", zklock.SizeInForce(ps)) // 0 when nobody takes part
}

// One Client serves every entity's lock. Making a Mutex costs no request,
// so make one per operation; an idle lock path is an empty container node,
// which ZooKeeper deletes.
func Example_perEntityLocks() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"zk1:2181,zk2:2181,zk3:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// One order at a time, whichever replica handles it.
	lockOf := func(orderID string) string { return "/ordersvc/orders/" + orderID }
	ship := func(ctx context.Context, orderID string) error {
		m, err := zklock.NewMutex(c, lockOf(orderID))
		if err != nil {
			return err // an ID that makes a bad path: ErrInvalidArgument
		}
		return zklock.Do(ctx, m, func(ctx context.Context) error {
			return store.Write(ctx, zklock.LeaseFrom(ctx).Token(), "shipped", lockOf(orderID))
		})
	}
	// Two entities at once, all or nothing, whatever order callers name them in.
	merge := func(ctx context.Context, from, into string) error {
		ml, err := zklock.NewMultiLock(c, []string{lockOf(from), lockOf(into)})
		if err != nil {
			return err
		}
		return zklock.Do(ctx, ml, func(ctx context.Context) error {
			// A MultiLock's token counts on each of its paths.
			return store.Write(ctx, zklock.LeaseFrom(ctx).Token(), "merged", lockOf(from), lockOf(into))
		})
	}

	if err := ship(ctx, "o-1017"); err != nil {
		log.Print(err)
	}
	if err := merge(ctx, "o-1018", "o-1017"); err != nil {
		log.Print(err)
	}
}

// A Go service beside Java services on one ensemble: the same connect string,
// chroot and all, and the same lock paths.
func Example_chrootSharedWithJava() {
	ctx := context.Background()
	// ZK_CONNECT is what the Java services are given too: "zk1:2181,zk2:2181,zk3:2181/apps/billing".
	c, err := zklock.Connect(ctx, []string{os.Getenv("ZK_CONNECT")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The lock a Curator service takes with new InterProcessMutex(client, "/locks/invoices").
	m, err := zklock.NewMutex(c, "/locks/invoices")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	fmt.Println("chroot", c.Chroot(), "node", lease.Node()) // the node as the Java side names it
}

// The service's own code, which the patterns call: a store that fences
// every write with the writer's token.
var store = &fencedStore{high: map[string]int64{}, values: map[string]string{}}

// fencedStore stands for the resources the locks protect (a database, a
// bucket). It keeps the highest token it has seen for each lock path, since
// tokens of different paths are unrelated, and refuses a write whose token is
// lower than that, or that comes without a token (a Curator or kazoo holder
// has none). The highs must be forgotten when the ensemble is rebuilt.
type fencedStore struct {
	mu     sync.Mutex
	high   map[string]int64  // lock path -> highest token seen
	values map[string]string // lock path -> what its holder wrote
}

// Write stores value for each of the lock paths the writer holds.
func (s *fencedStore) Write(_ context.Context, token int64, value string, paths ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token <= 0 {
		return errors.New("write without a fencing token")
	}
	for _, p := range paths {
		if token < s.high[p] {
			return fmt.Errorf("stale fencing token %d on %s: %d has written", token, p, s.high[p])
		}
	}
	for _, p := range paths {
		s.high[p], s.values[p] = token, value
	}
	return nil
}

func (s *fencedStore) Load(_ context.Context, path string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[path], nil
}

func export(ctx context.Context, month string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second): // the export's work
		return nil
	}
}
