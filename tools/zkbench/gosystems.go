package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/zkrecipes/zklock"
)

// The systems the bench knows. raw is W0's floor: the requests of one lock
// cycle with no recipe logic.
const (
	sysRaw     = "raw"
	sysRawGet  = "rawget"   // analysis only: raw plus zklock's token read, pipelined
	sysRawMult = "rawmulti" // analysis only: raw, its create a multi that also yields the token
	sysZklock  = "zklock"
	sysGozk    = "gozk"
	sysCurator = "curator"
	sysKazoo   = "kazoo"

	sysZklockUnshared = "zklock-unshared" // W6 only: zklock without WithSharedReads
)

var allSystems = []string{sysZklock, sysGozk, sysCurator, sysKazoo}

// knownSystems adds what -systems accepts beyond the default comparison.
var knownSystems = append(append([]string(nil), allSystems...), sysRawGet, sysRawMult, sysZklockUnshared)

// systemLabel is how tables and the chart name a system.
func systemLabel(sys string) string {
	switch sys {
	case sysRaw:
		return "raw go-zookeeper"
	case sysRawGet:
		return "raw + token read"
	case sysRawMult:
		return "raw, token by multi"
	case sysGozk:
		return "go-zookeeper zk.Lock"
	case sysCurator:
		return "Curator 5.4"
	case sysKazoo:
		return "kazoo 2.8"
	case sysZklockUnshared:
		return "zklock, unshared"
	}
	return sys
}

// runSpec is one workload run of one system.
type runSpec struct {
	workload       string
	path           string
	servers        []string
	counters       string // where to read the server's mntr: servers[0] if empty
	clients        int
	duration       time.Duration
	acquireTimeout time.Duration
	hold           time.Duration
	readPct        int
	leases         int
	paths          int // W5's
	serverCPU      func() (time.Duration, bool)
}

// counterAddr is the server whose mntr counts the run: the server
// itself, not a Delayer in front of it.
func (s runSpec) counterAddr() string {
	if s.counters != "" {
		return s.counters
	}
	return s.servers[0]
}

// held is one acquisition: its fencing token (0 if the system has none) and
// how to release it.
type held struct {
	token   int64
	release func() error
}

// handle is one client (one session) of a Go system, bound to the lock of
// the workload.
type handle interface {
	acquire(ctx context.Context, kind byte) (held, error)
	close()
}

// kindFor returns, for a workload, what each iteration acquires.
func kindFor(spec runSpec) func(r *rand.Rand) byte {
	switch spec.workload {
	case "W3":
		return func(r *rand.Rand) byte {
			if r.IntN(100) < spec.readPct {
				return kindRead
			}
			return kindWrite
		}
	case "W4":
		return func(*rand.Rand) byte { return kindSem }
	}
	return func(*rand.Rand) byte { return kindMutex }
}

// connectGo opens spec.clients sessions of system sys, bound to the
// workload's lock.
func connectGo(ctx context.Context, sys string, spec runSpec) ([]handle, error) {
	handles := make([]handle, 0, spec.clients)
	fail := func(err error) ([]handle, error) {
		for _, h := range handles {
			h.close()
		}
		return nil, err
	}
	if sys == sysRaw || sys == sysRawGet || sys == sysRawMult {
		if err := ensurePersistent(ctx, spec.servers, spec.path); err != nil {
			return nil, err
		}
	}
	for range spec.clients {
		var h handle
		var err error
		switch sys {
		case sysRaw, sysRawGet, sysRawMult:
			var rh *rawHandle
			rh, err = newRawHandle(spec)
			if rh != nil {
				rh.token = sys == sysRawGet
				rh.multi = sys == sysRawMult
			}
			h = rh
		case sysZklock:
			h, err = newZklockHandle(ctx, spec)
		case sysGozk:
			h, err = newGozkHandle(spec)
		default:
			err = fmt.Errorf("%s is not a Go system", sys)
		}
		if err != nil {
			return fail(err)
		}
		handles = append(handles, h)
	}
	return handles, nil
}

// runGo runs one workload of a Go system: every client acquires and
// releases in a loop until the duration is over. An acquire that takes
// longer than the acquire timeout counts as a timeout; a system that cannot
// be cancelled (zk.Lock) has its sessions closed under it then.
func runGo(ctx context.Context, sys string, spec runSpec) Result {
	res := Result{System: sys, Workload: spec.workload, Clients: spec.clients}
	handles, err := connectGo(ctx, sys, spec)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	var closeOnce sync.Once
	closeAll := func() {
		closeOnce.Do(func() {
			for _, h := range handles {
				h.close()
			}
		})
	}
	defer closeAll()

	occ := &occupancy{limit: spec.leases}
	smp := newSamples(spec.clients)
	kind := kindFor(spec)
	reads := make([]int64, spec.clients)
	writes := make([]int64, spec.clients)
	timeouts := make([]int64, spec.clients)
	errs := make([]error, spec.clients)

	p0 := takeProbe(ctx, spec.counterAddr(), spec.serverCPU)
	cpu0 := selfCPU()
	start := time.Now()
	deadline := start.Add(spec.duration)
	actx, cancel := context.WithDeadline(ctx, deadline.Add(spec.acquireTimeout))
	defer cancel()
	// zk.Lock takes no context: if it is still stuck after the acquire
	// timeout, closing its session is the only way out.
	watchdog := time.AfterFunc(spec.duration+spec.acquireTimeout+5*time.Second, closeAll)
	defer watchdog.Stop()

	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for time.Now().Before(deadline) {
				k := kind(r)
				t0 := time.Now()
				hd, err := h.acquire(actx, k)
				lat := time.Since(t0)
				if err != nil {
					if actx.Err() != nil {
						timeouts[i]++
						return
					}
					errs[i] = err
					return
				}
				smp.add(i, lat)
				occ.enter(k, hd.token)
				if spec.hold > 0 {
					time.Sleep(spec.hold)
				}
				occ.leave(k)
				if err := hd.release(); err != nil {
					errs[i] = fmt.Errorf("release: %w", err)
					return
				}
				if k == kindRead {
					reads[i]++
				} else {
					writes[i]++
				}
			}
		})
	}
	wg.Wait()
	seconds := time.Since(start).Seconds()
	cpu1 := selfCPU()
	p1 := takeProbe(ctx, spec.counterAddr(), spec.serverCPU)

	all := smp.sorted()
	for i := range handles {
		res.ReadOps += reads[i]
		res.WriteOps += writes[i]
		res.Timeouts += timeouts[i]
		if errs[i] != nil && res.Error == "" {
			res.Error = fmt.Sprintf("client %d: %v", i, errs[i])
		}
	}
	res.Ops = res.ReadOps + res.WriteOps
	res.Seconds = seconds
	res.finish(all)
	res.lat = all
	if c, ok := between(p0, p1, cpu1-cpu0); ok {
		res.setPerOp(c)
	}
	res.Violations = occ.violations
	res.TokenRegressions = occ.tokenRegressions
	res.MaxConcurrentReaders = occ.maxReaders
	res.MaxConcurrentHolders = occ.maxHolders
	if spec.workload == "W3" {
		res.ReadPct = spec.readPct
	}
	if spec.workload == "W4" {
		res.Leases = spec.leases
	}
	return res
}

// finish fills the rates and percentiles from Ops, ReadOps, WriteOps,
// Seconds and the sorted acquire latencies.
func (r *Result) finish(sorted []time.Duration) {
	if r.Seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Seconds
		r.ReadOpsPerSec = float64(r.ReadOps) / r.Seconds
		r.WriteOpsPerSec = float64(r.WriteOps) / r.Seconds
	}
	r.AcquireP50Ms = percentileMs(sorted, 0.50)
	r.AcquireP99Ms = percentileMs(sorted, 0.99)
}

// selfCPU returns the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ---------------------------------------------------------------- zklock

type zklockHandle struct {
	c     *zklock.Client
	mutex *zklock.Mutex
	rw    *zklock.RWMutex
	sem   *zklock.Semaphore
}

func newZklockHandle(ctx context.Context, spec runSpec) (*zklockHandle, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(cctx, spec.servers)
	if err != nil {
		return nil, err
	}
	h := &zklockHandle{c: c}
	switch spec.workload {
	case "W3":
		h.rw, err = zklock.NewRWMutex(c, spec.path)
	case "W4":
		h.sem, err = zklock.NewSemaphore(c, spec.path, spec.leases)
	default:
		h.mutex, err = zklock.NewMutex(c, spec.path)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return h, nil
}

func (h *zklockHandle) acquire(ctx context.Context, kind byte) (held, error) {
	var l zklock.Locker
	switch kind {
	case kindRead:
		l = h.rw.ReadLock()
	case kindWrite:
		l = h.rw.WriteLock()
	case kindSem:
		l = h.sem
	default:
		l = h.mutex
	}
	lease, err := l.Acquire(ctx)
	if err != nil {
		return held{}, err
	}
	var token int64
	if checkTokens && kind == kindMutex { // only the mutex's tokens are checked in order
		token = lease.Token()
	}
	return held{token: token, release: func() error { return lease.Release(context.Background()) }}, nil
}

func (h *zklockHandle) close() { _ = h.c.Close() }

// ---------------------------------------------------------------- go-zookeeper zk.Lock

type gozkHandle struct {
	conn *zk.Conn
	lock *zk.Lock
}

// connectZK opens a raw go-zookeeper session and waits until it has one.
func connectZK(servers []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	// Drain the session events so the library never blocks on them.
	ready := make(chan struct{})
	go func() {
		var once sync.Once
		for ev := range events {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
		return conn, nil
	case <-time.After(30 * time.Second):
		conn.Close()
		return nil, errors.New("no ZooKeeper session within 30s")
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func newGozkHandle(spec runSpec) (*gozkHandle, error) {
	conn, err := connectZK(spec.servers, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &gozkHandle{conn: conn, lock: zk.NewLock(conn, spec.path, zk.WorldACL(zk.PermAll))}, nil
}

func (h *gozkHandle) acquire(_ context.Context, _ byte) (held, error) {
	if err := h.lock.Lock(); err != nil {
		return held{}, err
	}
	return held{release: h.lock.Unlock}, nil
}

func (h *gozkHandle) close() { h.conn.Close() }

// ---------------------------------------------------------------- raw floor

// rawHandle performs what one uncontended lock cycle needs from ZooKeeper,
// with no recipe logic: create an ephemeral-sequential node (named as
// zklock names its nodes, with the same data), list the children, delete
// the node. Its "acquire latency" is the create and the list.
type rawHandle struct {
	conn   *zk.Conn
	path   string
	prefix string
	data   []byte
	acl    []zk.ACL
	token  bool // also read the node's stat, pipelined with the list, as zklock does
	// multi creates the node in a multi with a setData of the lock path:
	// the setData's stat carries the multi's zxid, the node's czxid, so
	// the token costs no request of its own.
	multi bool
}

func newRawHandle(spec runSpec) (*rawHandle, error) {
	conn, err := connectZK(spec.servers, 10*time.Second)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &rawHandle{
		conn:   conn,
		path:   spec.path,
		prefix: spec.path + "/_c_" + uuid.NewString() + "-lock-",
		data:   fmt.Appendf(nil, "%s/%d", host, os.Getpid()),
		acl:    zk.WorldACL(zk.PermAll),
	}, nil
}

func (h *rawHandle) acquire(context.Context, byte) (held, error) {
	var node string
	var token int64
	if h.multi {
		res, err := h.conn.Multi(
			&zk.CreateRequest{Path: h.prefix, Data: h.data, Acl: h.acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: h.path, Data: nil, Version: -1})
		if err != nil {
			return held{}, err
		}
		node, token = res[0].String, res[1].Stat.Mzxid
	} else {
		var err error
		if node, err = h.conn.Create(h.prefix, h.data, zk.FlagEphemeralSequential, h.acl); err != nil {
			return held{}, err
		}
	}
	if h.token {
		ch := make(chan error, 1)
		go func() {
			_, _, err := h.conn.Get(node)
			ch <- err
		}()
		_, _, err := h.conn.Children(h.path)
		if gerr := <-ch; err == nil {
			err = gerr
		}
		if err != nil {
			return held{}, err
		}
	} else if _, _, err := h.conn.Children(h.path); err != nil {
		return held{}, err
	}
	return held{token: token, release: func() error { return h.conn.Delete(node, -1) }}, nil
}

func (h *rawHandle) close() { h.conn.Close() }

// ensurePersistent creates path and its ancestors as persistent nodes (a
// container parent could be reaped between two raw cycles).
func ensurePersistent(_ context.Context, servers []string, path string) error {
	conn, err := connectZK(servers, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	p := ""
	for _, part := range splitPath(path) {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

func splitPath(path string) []string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
}
