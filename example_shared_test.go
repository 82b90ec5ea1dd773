package zklock_test

import (
	"context"
	"log"
	"net/http"

	"github.com/zkrecipes/zklock"
)

// Request handlers read a tenant's configuration under the read side of
// one RWMutex per process; a migration takes the write side elsewhere.
// With WithSharedReads the handlers share one read node: while it holds,
// a handler's Acquire costs no ZooKeeper request.
func ExampleWithSharedReads() {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	config, err := zklock.NewRWMutex(c, "/locks/tenant-42/config", zklock.WithSharedReads())
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/tenant/42", func(w http.ResponseWriter, r *http.Request) {
		lease, err := config.ReadLock().Acquire(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer lease.Release(context.Background())
		// Read the configuration; stop if <-lease.Done() closes.
	})
}
