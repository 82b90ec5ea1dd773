package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
)

// A peer's writer (Curator's `__WRIT__`, kazoo's `__lock__`) queued behind
// a shared read node is not starved: 8 Go goroutines read through one
// RWMutex with WithSharedReads in a loop, each read holding for goHold, so
// the node always has a lease on it; the peer's writer takes the lock 5
// times, each within its acquire timeout (10 s), and no Go read lease
// overlaps one of its holds.
func TestInteropSharedReadsWriterNotStarved(t *testing.T) {
	t.Parallel()
	for _, lang := range peerLangs {
		t.Run(lang.lib, func(t *testing.T) {
			t.Parallel()
			path := lockPath(t)
			c := connect(t)
			tidy(t, c, path)
			rw, err := zklock.NewRWMutex(c, path, zklock.WithSharedReads())
			require.NoError(t, err)

			var log holdLog
			var reads atomic.Int64
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			errs := make(chan error, 8)
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for ctx.Err() == nil {
						l, err := rw.ReadLock().Acquire(ctx)
						if err != nil {
							if ctx.Err() == nil {
								errs <- err
							}
							return
						}
						from := time.Now().UnixNano()
						time.Sleep(goHold) // the read's work
						to := time.Now().UnixNano()
						log.add(hold{who: fmt.Sprintf("go-%d", g), lang: "go", recipe: "read", from: from, to: to})
						reads.Add(1)
						if err := l.Release(context.Background()); err != nil {
							errs <- err
							return
						}
					}
				}(g)
			}
			require.Eventually(t, func() bool { return reads.Load() > 100 }, long, 5*time.Millisecond, "readers under way")

			const rounds = 5
			args := append([]string{"--count", fmt.Sprint(rounds), "--hold-ms", peerHoldMs, "--acquire-timeout-ms", "10000"}, lang.args...)
			p := startPeer(t, lang, lang.name+"-w", path, "write", args...)
			holds, perr := p.collect(lang.name, func() {})
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "a shared read")
			}
			require.NoError(t, perr, "the peer's writer, behind 8 looping shared readers")
			require.Len(t, holds, rounds)
			all := append(holds, log.holds...)
			require.Greater(t, len(log.holds), 100)
			requireNoOverlap(t, all)
		})
	}
}
