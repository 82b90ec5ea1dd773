package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// ScaleResult is one system with N waiters queued on one mutex.
type ScaleResult struct {
	System   string `json:"system"`
	Waiters  int    `json:"waiters"`
	Sessions int    `json:"sessions"` // the waiters share this many sessions
	Handoffs int    `json:"handoffs"`

	// From the server's mntr, over the handoff chain only (queueing is
	// over before it starts): every request the server received
	// (zk_packets_received, our own mntr excluded), and its reads
	// (zk_cnt_readlatency, pings included) and writes
	// (zk_cnt_updatelatency), per handoff.
	RequestsPerHandoff float64 `json:"requests_per_handoff"`
	ReadsPerHandoff    float64 `json:"reads_per_handoff"`
	WritesPerHandoff   float64 `json:"writes_per_handoff"`
	ChainSeconds       float64 `json:"chain_seconds"`

	HandoffP50Ms   float64 `json:"handoff_p50_ms"`
	HandoffP99Ms   float64 `json:"handoff_p99_ms"`
	HandoffsPerSec float64 `json:"handoffs_per_sec"`

	// Client side, measured after a GC with all N waiting, against a
	// baseline taken with the sessions open and nobody waiting.
	HeapBytesPerWaiter  float64 `json:"heap_bytes_per_waiter"`
	StackBytesPerWaiter float64 `json:"stack_bytes_per_waiter"`
	GoroutinesPerWaiter float64 `json:"goroutines_per_waiter"` // 1.0 is the caller's own
	ExtraGoroutines     int     `json:"extra_goroutines"`      // beyond one per waiter
	QueueSeconds        float64 `json:"queue_seconds"`

	Error string `json:"error,omitempty"`
}

// scaleSessionTimeout is long so that pings (every third of it) hardly
// show in the request counts of a chain that lasts a second.
const scaleSessionTimeout = 30 * time.Second

// waiterFactory makes waiters that each acquire the mutex once, on one of
// the shared sessions.
type waiterFactory interface {
	// holder is the session of the first holder, which also reads the
	// queue's length.
	conn() *zk.Conn
	acquire(ctx context.Context, session int) (held, error)
	close()
}

type zklockScale struct {
	clients []*zklock.Client
	mutexes []*zklock.Mutex
}

func newZklockScale(ctx context.Context, servers []string, path string, sessions int) (*zklockScale, error) {
	s := &zklockScale{}
	for range sessions + 1 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := zklock.Connect(cctx, servers, zklock.WithSessionTimeout(scaleSessionTimeout))
		cancel()
		if err != nil {
			s.close()
			return nil, err
		}
		m, err := zklock.NewMutex(c, path)
		if err != nil {
			_ = c.Close()
			s.close()
			return nil, err
		}
		s.clients = append(s.clients, c)
		s.mutexes = append(s.mutexes, m)
	}
	return s, nil
}

func (s *zklockScale) conn() *zk.Conn { return s.clients[0].Conn() }

func (s *zklockScale) acquire(ctx context.Context, session int) (held, error) {
	l, err := s.mutexes[session].Acquire(ctx)
	if err != nil {
		return held{}, err
	}
	return held{token: l.Token(), release: func() error { return l.Release(context.Background()) }}, nil
}

func (s *zklockScale) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}

type gozkScale struct {
	conns []*zk.Conn
	path  string
}

func newGozkScale(servers []string, path string, sessions int) (*gozkScale, error) {
	s := &gozkScale{path: path}
	for range sessions + 1 {
		c, err := connectZK(servers, scaleSessionTimeout)
		if err != nil {
			s.close()
			return nil, err
		}
		s.conns = append(s.conns, c)
	}
	return s, nil
}

func (s *gozkScale) conn() *zk.Conn { return s.conns[0] }

func (s *gozkScale) acquire(_ context.Context, session int) (held, error) {
	l := zk.NewLock(s.conns[session], s.path, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return held{}, err
	}
	return held{release: l.Unlock}, nil
}

func (s *gozkScale) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// runScale queues n waiters behind a holder on one mutex, measures what
// they cost the client while they wait, then lets the lock pass down the
// whole queue (each waiter releases as soon as it holds) and counts what
// the server received per handoff. The last waiter keeps the lock until
// the counters are read, so exactly n handoffs are counted, each one
// release plus whatever its successor needs to take the lock.
//
// If heapProfile is not empty, a heap profile of the waiting state is
// written there.
func runScale(ctx context.Context, sys string, servers []string, path string, n, sessions int, heapProfile string) ScaleResult {
	res := ScaleResult{System: sys, Waiters: n, Sessions: sessions, Handoffs: n}
	fail := func(err error) ScaleResult {
		res.Error = err.Error()
		return res
	}
	var f waiterFactory
	var err error
	switch sys {
	case sysZklock:
		f, err = newZklockScale(ctx, servers, path, sessions)
	case sysGozk:
		f, err = newGozkScale(servers, path, sessions)
	default:
		err = fmt.Errorf("scale: %s is not a Go system", sys)
	}
	if err != nil {
		return fail(err)
	}
	defer f.close()
	// Session 0 holds first; waiters use sessions 1..sessions.
	first, err := f.acquire(ctx, 0)
	if err != nil {
		return fail(fmt.Errorf("first holder: %w", err))
	}

	watches0, err := totalWatches(ctx, servers[0])
	if err != nil {
		return fail(err)
	}
	settle()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		acquired atomic.Int64
		times    = make([]time.Time, n) // in order of acquisition
		lastHeld = make(chan struct{})  // the n-th acquisition happened
		finish   = make(chan struct{})  // the last holder may release
		errMu    sync.Mutex
		firstErr error
		failed   = make(chan struct{}) // closed with firstErr
		wg       sync.WaitGroup
	)
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
			close(failed)
		}
		errMu.Unlock()
	}
	qstart := time.Now()
	for i := range n {
		wg.Go(func() {
			h, err := f.acquire(wctx, 1+i%sessions)
			if err != nil {
				setErr(err)
				return
			}
			k := acquired.Add(1)
			times[k-1] = time.Now()
			if k == int64(n) {
				close(lastHeld)
				<-finish
			}
			if err := h.release(); err != nil {
				setErr(err)
			}
		})
	}

	// Queued: n+1 nodes, and n more watches than before.
	conn := f.conn()
	for {
		kids, _, err := conn.Children(path)
		if err != nil {
			return fail(err)
		}
		if len(kids) == n+1 {
			w, err := totalWatches(ctx, servers[0])
			if err != nil {
				return fail(err)
			}
			if w >= watches0+n {
				break
			}
		}
		select {
		case <-failed:
			errMu.Lock()
			defer errMu.Unlock()
			return fail(fmt.Errorf("queueing: %w", firstErr))
		default:
		}
		if time.Since(qstart) > 2*time.Minute {
			return fail(fmt.Errorf("only %d of %d nodes queued after 2m", len(kids), n+1))
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.QueueSeconds = time.Since(qstart).Seconds()
	// The last watch is set before its request returns: let the waiters
	// settle into their wait.
	time.Sleep(200 * time.Millisecond)
	settle()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	if heapProfile != "" {
		if err := writeHeapProfile(heapProfile); err != nil {
			return fail(err)
		}
	}
	res.HeapBytesPerWaiter = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	res.StackBytesPerWaiter = (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n)
	res.GoroutinesPerWaiter = float64(g1-g0) / float64(n)
	res.ExtraGoroutines = g1 - g0 - n

	m0, err := mntr(ctx, servers[0])
	if err != nil {
		return fail(err)
	}
	t0 := time.Now()
	if err := first.release(); err != nil {
		return fail(fmt.Errorf("first holder release: %w", err))
	}
	select {
	case <-lastHeld:
	case <-failed:
		errMu.Lock()
		defer errMu.Unlock()
		return fail(fmt.Errorf("handoff chain: %w", firstErr))
	case <-wctx.Done():
		return fail(fmt.Errorf("handoff chain: %d of %d acquired: %w", acquired.Load(), n, wctx.Err()))
	}
	chain := time.Since(t0)
	m1, err := mntr(ctx, servers[0])
	close(finish)
	wg.Wait()
	if err != nil {
		return fail(err)
	}
	if firstErr != nil {
		return fail(firstErr)
	}

	// The second mntr is itself one packet received.
	d := func(k string) float64 { return m1.num[k] - m0.num[k] }
	res.RequestsPerHandoff = (d("zk_packets_received") - 1) / float64(n)
	res.ReadsPerHandoff = d("zk_cnt_readlatency") / float64(n)
	res.WritesPerHandoff = d("zk_cnt_updatelatency") / float64(n)
	res.ChainSeconds = chain.Seconds()
	res.HandoffsPerSec = float64(n) / chain.Seconds()
	gaps := make([]time.Duration, n)
	prev := t0
	for i, t := range times {
		gaps[i] = t.Sub(prev)
		prev = t
	}
	slices.Sort(gaps)
	res.HandoffP50Ms = percentileMs(gaps, 0.50)
	res.HandoffP99Ms = percentileMs(gaps, 0.99)
	return res
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settle collects garbage until the heap holds only live objects: a second
// cycle frees what the first one's finalizers and sweeps released.
func settle() {
	runtime.GC()
	runtime.GC()
}
