package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// The deep-queue workload (issue 37): D waiters, spread over C Clients
// (sessions), queue on one path behind a holder (a semaphore's K holders);
// the holders let go; each waiter takes the lock once and lets go at once.
// What it measures is the drain: handoffs per second from the first
// release to the D-th acquisition, and what the server received and sent
// meanwhile (mntr deltas), per handoff. A drain of a queue of D costs
// O(D²) response bytes when every wake re-reads the queue.

const (
	recipeMutex     = "mutex"
	recipeSemaphore = "semaphore"

	// drainSettle lets the last waiters settle into their wait (the last
	// watch is set before its request returns) before the counters are
	// read.
	drainSettle = 200 * time.Millisecond
	// drainQueueTimeout bounds the queueing, drainTimeout the drain.
	drainQueueTimeout = 5 * time.Minute
	drainTimeout      = 10 * time.Minute
)

// deepCase is one queue of the workload.
type deepCase struct {
	Recipe  string `json:"recipe"` // recipeMutex or recipeSemaphore
	Clients int    `json:"clients"`
	Waiters int    `json:"waiters"` // D
	Leases  int    `json:"leases"`  // holders ahead of the queue: 1 for the mutex
}

// label names the case as the table does.
func (c deepCase) label() string {
	d := "D=" + thousands(c.Waiters)
	switch {
	case c.Recipe == recipeSemaphore:
		return fmt.Sprintf("semaphore of %d, %s", c.Leases, d)
	case c.Clients == 1:
		return "mutex, one Client, " + d
	}
	return "mutex, " + d
}

// title is label with the Clients, where there are several.
func (c deepCase) title() string {
	if c.Clients == 1 {
		return c.label()
	}
	return fmt.Sprintf("%s, %d Clients", c.label(), c.Clients)
}

// thousands writes n with commas, as the tables do.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// DeepResult is one system's drain of one deep queue in one round.
type DeepResult struct {
	deepCase
	System   string `json:"system"`
	Round    int    `json:"round"`
	Handoffs int    `json:"handoffs"`

	// QueueSeconds is how long the waiters took to queue; QueuedBy how
	// that was seen: "nodes" (every waiter's node and watch on the
	// server) or "quiet" (the server received nothing but pings for 1s).
	QueueSeconds float64 `json:"queue_seconds"`
	QueuedBy     string  `json:"queued_by"`

	ChainSeconds   float64 `json:"chain_seconds"`
	HandoffsPerSec float64 `json:"handoffs_per_sec"`
	HandoffP50Ms   float64 `json:"handoff_p50_ms"`
	HandoffP99Ms   float64 `json:"handoff_p99_ms"`

	// From the server's mntr, over the drain: requests received
	// (zk_packets_received, our own mntr excluded), reads
	// (zk_cnt_readlatency) and writes (zk_cnt_updatelatency), and bytes
	// of the responses to requests (zk_response_bytes, which
	// FinalRequestProcessor adds up; watch notifications are sent outside
	// it and not counted), per handoff.
	RequestsPerHandoff      float64 `json:"requests_per_handoff"`
	ReadsPerHandoff         float64 `json:"reads_per_handoff"`
	WritesPerHandoff        float64 `json:"writes_per_handoff"`
	ResponseBytesPerHandoff float64 `json:"response_bytes_per_handoff"`

	// Violations counts holders beyond one (the semaphore's K) seen in
	// the drainer's process, and zklock's mutex tokens not above the
	// previous holder's.
	Violations int64  `json:"violations"`
	Error      string `json:"error,omitempty"`
}

// drainer is one system's side of a drain, step by step, so that the
// server's counters can be read between the steps.
type drainer interface {
	// hold makes the first holders take the lock.
	hold(ctx context.Context) error
	// queue starts the D waiters; it returns once each has begun to
	// acquire.
	queue(ctx context.Context) error
	// failed returns the first waiter's failure, if any, without waiting.
	failed() error
	// release lets the first holders go: the drain starts.
	release(ctx context.Context) error
	// drained waits until the D-th waiter holds (it keeps holding).
	drained(ctx context.Context) error
	// finish lets the last holder go, waits for every waiter to return
	// and returns what was measured in the drainer's process.
	finish(ctx context.Context) (drainOutcome, error)
	close()
}

// drainOutcome is what a drainer measures itself.
type drainOutcome struct {
	ChainSeconds float64 `json:"chain_seconds"` // from the release to the D-th acquisition
	HandoffP50Ms float64 `json:"handoff_p50_ms"`
	HandoffP99Ms float64 `json:"handoff_p99_ms"`
	Violations   int64   `json:"violations"`
}

// runDrain runs one drain of case c for sys on path.
func runDrain(ctx context.Context, sys string, p *peers, servers []string, path string, c deepCase) DeepResult {
	res := DeepResult{deepCase: c, System: sys, Handoffs: c.Waiters}
	obs, err := connectZK(servers, scaleSessionTimeout)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer obs.Close()
	d, err := newDrainer(ctx, sys, p, servers, path, c)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer d.close()
	if err := res.drain(ctx, d, obs, servers[0], path); err != nil {
		res.Error = err.Error()
	}
	return res
}

func newDrainer(ctx context.Context, sys string, p *peers, servers []string, path string, c deepCase) (drainer, error) {
	switch {
	case sys == sysZklock:
		return newZklockDrain(ctx, servers, path, c)
	case sys == sysGozk && c.Recipe == recipeMutex:
		return newGozkDrain(servers, path, c)
	case sys == sysCurator:
		return newPeerDrain(ctx, p, servers, path, c)
	}
	return nil, fmt.Errorf("deep: %s does not run a %s", sys, c.Recipe)
}

// drain takes d through its steps, reading the server's counters around
// the drain alone.
func (r *DeepResult) drain(ctx context.Context, d drainer, obs *zk.Conn, addr, path string) error {
	if err := d.hold(ctx); err != nil {
		return fmt.Errorf("first holders: %w", err)
	}
	w0, err := totalWatches(ctx, addr)
	if err != nil {
		return err
	}
	qstart := time.Now()
	if err := d.queue(ctx); err != nil {
		return fmt.Errorf("queueing: %w", err)
	}
	q := queueProbe{obs: obs, addr: addr, paths: queuePaths(r.System, r.deepCase, path),
		want: r.Waiters + r.Leases + queueExtra(r.System, r.deepCase), watches: w0 + r.Waiters - queueExtra(r.System, r.deepCase),
		pings: r.Clients + 1, failed: d.failed}
	if r.QueuedBy, err = q.await(ctx); err != nil {
		return err
	}
	r.QueueSeconds = time.Since(qstart).Seconds()
	time.Sleep(drainSettle)
	m0, err := mntr(ctx, addr)
	if err != nil {
		return err
	}
	if err := d.release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := d.drained(ctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	m1, err := mntr(ctx, addr)
	if err != nil {
		return err
	}
	out, err := d.finish(ctx)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	r.set(m0, m1, out)
	return nil
}

// set fills the figures from the counters around the drain and the
// drainer's own measures.
func (r *DeepResult) set(m0, m1 mntrStats, out drainOutcome) {
	n := float64(r.Handoffs)
	delta := func(k string) float64 { return (m1.num[k] - m0.num[k]) / n }
	// m1's mntr is itself one packet received.
	r.RequestsPerHandoff = (m1.num["zk_packets_received"] - m0.num["zk_packets_received"] - 1) / n
	r.ReadsPerHandoff = delta("zk_cnt_readlatency")
	r.WritesPerHandoff = delta("zk_cnt_updatelatency")
	r.ResponseBytesPerHandoff = delta("zk_response_bytes")
	r.ChainSeconds = out.ChainSeconds
	if out.ChainSeconds > 0 {
		r.HandoffsPerSec = n / out.ChainSeconds
	}
	r.HandoffP50Ms, r.HandoffP99Ms = out.HandoffP50Ms, out.HandoffP99Ms
	r.Violations = out.Violations
}

// queuePaths returns where a system's waiters put their nodes: the path,
// or for Curator's InterProcessSemaphoreV2 its "locks" (every waiter)
// and "leases" (the holders and the one waiter holding the inner lock).
func queuePaths(sys string, c deepCase, path string) []string {
	if sys == sysCurator && c.Recipe == recipeSemaphore {
		return []string{path + "/locks", path + "/leases"}
	}
	return []string{path}
}

// queueExtra is, for Curator's InterProcessSemaphoreV2, the one node
// beyond one per waiter and holder once all are queued (the lease node of
// the waiter that holds the inner lock), and the one watch fewer than one
// per waiter: the last holder's child watch on "leases", counted before
// the waiters came, fires when that waiter's lease node is created, and
// that waiter's own watch there takes its place.
func queueExtra(sys string, c deepCase) int {
	if sys == sysCurator && c.Recipe == recipeSemaphore {
		return 1
	}
	return 0
}

// queueProbe sees from the server when every waiter has queued: when
// the nodes under its paths number at least want and the server holds at
// least watches watches, or, for a system that queues with fewer nodes or
// watches than one each, when the server has received nothing but pings
// (at most pings requests) for a second.
type queueProbe struct {
	obs     *zk.Conn
	addr    string
	paths   []string
	want    int
	watches int
	pings   int
	failed  func() error
}

const queuePoll = 50 * time.Millisecond

func (q queueProbe) await(ctx context.Context) (string, error) {
	deadline := time.Now().Add(drainQueueTimeout)
	quiet := quietWindow{pings: q.pings}
	for time.Now().Before(deadline) {
		if err := q.failed(); err != nil {
			return "", fmt.Errorf("queueing: %w", err)
		}
		done, own, err := q.nodesAndWatches(ctx)
		if err != nil || done {
			return "nodes", err
		}
		if quiet.observe(ctx, q.addr, own) {
			return "quiet", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(queuePoll):
		}
	}
	return "", fmt.Errorf("not queued after %v", drainQueueTimeout)
}

// nodesAndWatches reports whether the nodes and the watches are all
// there, and how many requests it sent the server to see.
func (q queueProbe) nodesAndWatches(ctx context.Context) (bool, int, error) {
	n, own := 0, 0
	for _, p := range q.paths {
		kids, _, err := q.obs.Children(p)
		own++
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return false, own, err
		}
		n += len(kids)
	}
	if n < q.want {
		return false, own, nil
	}
	w, err := totalWatches(ctx, q.addr)
	own++
	return err == nil && w >= q.watches, own, err
}

// quietWindow tells when the server has received no more than pings
// requests, beyond the probe's own, in a second.
type quietWindow struct {
	pings  int
	start  time.Time
	base   float64 // zk_packets_received at start
	own    int     // the probe's requests since start
	primed bool
}

// observe adds the probe's own requests and reports whether the window
// that just ended was quiet; it starts a new window each second.
func (w *quietWindow) observe(ctx context.Context, addr string, own int) bool {
	w.own += own
	if w.primed && time.Since(w.start) < time.Second {
		return false
	}
	m, err := mntr(ctx, addr)
	if err != nil {
		return false
	}
	got := m.num["zk_packets_received"]
	// This mntr is itself one packet received.
	quiet := w.primed && got-w.base-float64(w.own)-1 <= float64(w.pings)
	w.start, w.base, w.own, w.primed = time.Now(), got, 0, true
	return quiet
}

// ---------------------------------------------------------------- Go systems

// goDrain drains a queue of a Go system, all of it in this process.
type goDrain struct {
	c       deepCase
	acquire func(ctx context.Context, client int) (held, error)
	shut    func() // closes every session: unblocks what takes no ctx
	kind    byte
	occ     *occupancy

	wctx   context.Context
	cancel context.CancelFunc
	first  []held

	started  atomic.Int64
	acquired atomic.Int64
	at       []time.Time // each acquisition, in order
	t0       time.Time
	lastHeld chan struct{}
	finishCh chan struct{}
	wg       sync.WaitGroup

	errMu sync.Mutex
	err   error
}

func newGoDrain(c deepCase, acquire func(ctx context.Context, client int) (held, error), shut func()) *goDrain {
	kind := byte(kindMutex)
	if c.Recipe == recipeSemaphore {
		kind = kindSem
	}
	wctx, cancel := context.WithCancel(context.Background())
	return &goDrain{
		c: c, acquire: acquire, shut: shut, kind: kind, occ: &occupancy{limit: c.Leases},
		wctx: wctx, cancel: cancel, at: make([]time.Time, c.Waiters),
		lastHeld: make(chan struct{}), finishCh: make(chan struct{}),
	}
}

func (g *goDrain) setErr(err error) {
	g.errMu.Lock()
	defer g.errMu.Unlock()
	if g.err == nil {
		g.err = err
	}
}

func (g *goDrain) failed() error {
	g.errMu.Lock()
	defer g.errMu.Unlock()
	return g.err
}

// hold takes the first holders' leases, holder h on client h.
func (g *goDrain) hold(ctx context.Context) error {
	for h := range g.c.Leases {
		hd, err := g.acquire(ctx, h%g.c.Clients)
		if err != nil {
			return err
		}
		g.occ.enter(g.kind, hd.token)
		g.first = append(g.first, hd)
	}
	return nil
}

// queue starts waiter i on client i mod C, and returns once each has
// called acquire.
func (g *goDrain) queue(ctx context.Context) error {
	for i := range g.c.Waiters {
		g.wg.Go(func() { g.wait(i) })
	}
	for g.started.Load() < int64(g.c.Waiters) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// wait is one waiter: it takes the lock once and lets go at once, but the
// D-th, which holds until finish.
func (g *goDrain) wait(i int) {
	g.started.Add(1)
	hd, err := g.acquire(g.wctx, i%g.c.Clients)
	if err != nil {
		g.setErr(fmt.Errorf("waiter %d: %w", i, err))
		return
	}
	k := g.acquired.Add(1)
	g.at[k-1] = time.Now()
	g.occ.enter(g.kind, hd.token)
	if k == int64(g.c.Waiters) {
		close(g.lastHeld)
		<-g.finishCh
	}
	g.occ.leave(g.kind)
	if err := hd.release(); err != nil {
		g.setErr(fmt.Errorf("waiter %d: release: %w", i, err))
	}
}

func (g *goDrain) release(context.Context) error {
	g.t0 = time.Now()
	for _, hd := range g.first {
		g.occ.leave(g.kind)
		if err := hd.release(); err != nil {
			return err
		}
	}
	g.first = nil
	return nil
}

func (g *goDrain) drained(ctx context.Context) error {
	timeout := time.NewTimer(drainTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g.lastHeld:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%d of %d acquired after %v", g.acquired.Load(), g.c.Waiters, drainTimeout)
		case <-tick.C:
			if err := g.failed(); err != nil {
				return err
			}
		}
	}
}

func (g *goDrain) finish(context.Context) (drainOutcome, error) {
	close(g.finishCh)
	g.wg.Wait()
	if err := g.failed(); err != nil {
		return drainOutcome{}, err
	}
	gaps := make([]time.Duration, len(g.at))
	prev := g.t0
	for i, t := range g.at {
		gaps[i] = t.Sub(prev)
		prev = t
	}
	slices.Sort(gaps)
	return drainOutcome{
		ChainSeconds: g.at[len(g.at)-1].Sub(g.t0).Seconds(),
		HandoffP50Ms: percentileMs(gaps, 0.50),
		HandoffP99Ms: percentileMs(gaps, 0.99),
		Violations:   g.occ.violations + g.occ.tokenRegressions,
	}, nil
}

// close ends whatever is left: waiters still waiting are cancelled (or
// their sessions closed under them), the first holders' sessions closed.
func (g *goDrain) close() {
	g.cancel()
	g.shut()
	select {
	case <-g.finishCh:
	default:
		close(g.finishCh)
	}
	g.wg.Wait()
}

func newZklockDrain(ctx context.Context, servers []string, path string, c deepCase) (*goDrain, error) {
	var clients []*zklock.Client
	shut := func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}
	lockers := make([]zklock.Locker, 0, c.Clients)
	for range c.Clients {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err := zklock.Connect(cctx, servers, zklock.WithSessionTimeout(scaleSessionTimeout))
		cancel()
		if err != nil {
			shut()
			return nil, err
		}
		clients = append(clients, cl)
		l, err := zklockLocker(cl, path, c)
		if err != nil {
			shut()
			return nil, err
		}
		lockers = append(lockers, l)
	}
	acquire := func(ctx context.Context, i int) (held, error) {
		l, err := lockers[i].Acquire(ctx)
		if err != nil {
			return held{}, err
		}
		var token int64
		if deepTokens && c.Recipe == recipeMutex { // only the mutex's tokens are checked in order
			token = l.Token()
		}
		return held{token: token, release: func() error { return l.Release(context.Background()) }}, nil
	}
	return newGoDrain(c, acquire, shut), nil
}

// checkTokens: zklock's W1-W6 holders read their lease's token, and the
// workloads check tokens in order (-tokens, on by default). A lease handed
// over on ZooKeeper 3.8 reads its token before its grant once its lock's
// tokens are asked for (a round trip, as every handoff did before the
// grant): -tokens=false measures a user who fences nothing.
var checkTokens = true

// deepTokens: zklock's deep waiters read their lease's token and the
// drain checks them in order (-deep-tokens). Off by default: CURATOR-716's
// user, and zk.Lock and Curator, use none, and on ZooKeeper 3.8 a lease
// handed over by a grant reads its token when asked (a round trip per
// acquisition).
var deepTokens bool

// zklockLocker is the case's lock on one Client, with the defaults, as a
// user would make it.
func zklockLocker(cl *zklock.Client, path string, c deepCase) (zklock.Locker, error) {
	if c.Recipe == recipeSemaphore {
		return zklock.NewSemaphore(cl, path, c.Leases)
	}
	return zklock.NewMutex(cl, path)
}

func newGozkDrain(servers []string, path string, c deepCase) (*goDrain, error) {
	var conns []*zk.Conn
	shut := func() {
		for _, cn := range conns {
			cn.Close()
		}
	}
	for range c.Clients {
		cn, err := connectZK(servers, scaleSessionTimeout)
		if err != nil {
			shut()
			return nil, err
		}
		conns = append(conns, cn)
	}
	acl := zk.WorldACL(zk.PermAll)
	// zk.Lock takes no ctx: close() closes the sessions under a waiter.
	acquire := func(_ context.Context, i int) (held, error) {
		l := zk.NewLock(conns[i], path, acl)
		if err := l.Lock(); err != nil {
			return held{}, err
		}
		return held{release: l.Unlock}, nil
	}
	return newGoDrain(c, acquire, shut), nil
}

// ---------------------------------------------------------------- results

// deepKey is one cell of the deep table: a case and a system.
type deepKey struct {
	c   deepCase
	sys string
}

// deepMedian is one cell: medians over the rounds that succeeded.
type deepMedian struct {
	rounds                    int
	rate, requests, bytes     float64
	reads, writes             float64
	p50, p99, queue           float64
	violations                int64
	errors                    []string
	rates                     []float64
	requestsAll, bytesAll     []float64
	readsAll, writesAll       []float64
	p50All, p99All, queuesAll []float64
}

// deepMedians groups the results by case and system, and takes the
// medians of their rounds; cases come in the order they first ran.
func deepMedians(rs []DeepResult) ([]deepCase, map[deepKey]*deepMedian) {
	var cases []deepCase
	cells := map[deepKey]*deepMedian{}
	for _, r := range rs {
		if !slices.Contains(cases, r.deepCase) {
			cases = append(cases, r.deepCase)
		}
		k := deepKey{r.deepCase, r.System}
		m := cells[k]
		if m == nil {
			m = &deepMedian{}
			cells[k] = m
		}
		m.add(r)
	}
	for _, m := range cells {
		m.settle()
	}
	return cases, cells
}

func (m *deepMedian) add(r DeepResult) {
	m.violations += r.Violations
	if r.Error != "" {
		m.errors = append(m.errors, r.Error)
		return
	}
	m.rounds++
	m.rates = append(m.rates, r.HandoffsPerSec)
	m.requestsAll = append(m.requestsAll, r.RequestsPerHandoff)
	m.bytesAll = append(m.bytesAll, r.ResponseBytesPerHandoff)
	m.readsAll = append(m.readsAll, r.ReadsPerHandoff)
	m.writesAll = append(m.writesAll, r.WritesPerHandoff)
	m.p50All = append(m.p50All, r.HandoffP50Ms)
	m.p99All = append(m.p99All, r.HandoffP99Ms)
	m.queuesAll = append(m.queuesAll, r.QueueSeconds)
}

func (m *deepMedian) settle() {
	if m.rounds == 0 {
		return
	}
	m.rate, m.requests, m.bytes = median(m.rates), median(m.requestsAll), median(m.bytesAll)
	m.reads, m.writes = median(m.readsAll), median(m.writesAll)
	m.p50, m.p99, m.queue = median(m.p50All), median(m.p99All), median(m.queuesAll)
}

// ok reports whether the cell has a figure.
func (m *deepMedian) ok() bool { return m != nil && m.rounds > 0 && m.rate > 0 }

// bestPeer returns the best peer's median rate for case c, and its name.
func bestPeer(cells map[deepKey]*deepMedian, c deepCase) (float64, string) {
	best, name := 0.0, ""
	for _, sys := range []string{sysGozk, sysCurator} {
		if m := cells[deepKey{c, sys}]; m.ok() && m.rate > best {
			best, name = m.rate, sys
		}
	}
	return best, name
}

// deepRatios computes the "Done when" targets for deep queues:
// zklock at least 2x the best peer at D of 1,000 and more, in the
// one-Client case and on the semaphore; zklock's rate at the deepest
// queue at least 0.75x its rate at the shallowest, and its response bytes
// per handoff there at most 2x, for the mutex over 8 Clients and for the
// semaphore.
func deepRatios(rs []DeepResult) []Ratio {
	if len(rs) == 0 {
		return nil
	}
	cases, cells := deepMedians(rs)
	var out []Ratio
	for _, c := range cases {
		if c.Recipe == recipeMutex && c.Clients > 1 && c.Waiters < 1000 {
			continue // the issue asks no lead of a shallow queue
		}
		z := cells[deepKey{c, sysZklock}]
		peer, name := bestPeer(cells, c)
		ok := z.ok() && peer > 0
		v, detail := 0.0, "not measured"
		if ok {
			v, detail = z.rate/peer, fmt.Sprintf("%.0f / %.0f handoffs/s (%s)", z.rate, peer, systemLabel(name))
		}
		out = append(out, ratio("Deep "+c.title()+": zklock / best peer, handoffs/s", ">=", 2, v, ok, detail))
	}
	for _, recipe := range []string{recipeMutex, recipeSemaphore} {
		out = append(out, flatRatios(cases, cells, recipe)...)
	}
	return out
}

// flatRatios compares zklock's deepest queue of a recipe (over more than
// one Client) with its shallowest: rate and response bytes per handoff.
func flatRatios(cases []deepCase, cells map[deepKey]*deepMedian, recipe string) []Ratio {
	lo, hi := shallowDeep(cases, recipe)
	if lo == nil || lo.Waiters == hi.Waiters {
		return nil
	}
	a, b := cells[deepKey{*hi, sysZklock}], cells[deepKey{*lo, sysZklock}]
	ok := a.ok() && b.ok() && b.bytes > 0
	name := fmt.Sprintf("Deep %s: zklock at D=%s / at D=%s", recipe, thousands(hi.Waiters), thousands(lo.Waiters))
	var rate, bytes Ratio
	if ok {
		rate = ratio(name+", handoffs/s", ">=", 0.75, a.rate/b.rate, true, fmt.Sprintf("%.0f / %.0f", a.rate, b.rate))
		bytes = ratio(name+", response bytes/handoff", "<=", 2, a.bytes/b.bytes, true, fmt.Sprintf("%.0f / %.0f", a.bytes, b.bytes))
	} else {
		rate = ratio(name+", handoffs/s", ">=", 0.75, 0, false, "not measured")
		bytes = ratio(name+", response bytes/handoff", "<=", 2, 0, false, "not measured")
	}
	return []Ratio{rate, bytes}
}

// shallowDeep returns the recipe's shallowest and deepest queues over
// more than one Client, or nils.
func shallowDeep(cases []deepCase, recipe string) (lo, hi *deepCase) {
	for i, c := range cases {
		if c.Recipe != recipe || c.Clients == 1 {
			continue
		}
		if lo == nil || c.Waiters < lo.Waiters {
			lo = &cases[i]
		}
		if hi == nil || c.Waiters > hi.Waiters {
			hi = &cases[i]
		}
	}
	return lo, hi
}

// printDeep prints the deep-queue tables: handoffs/s per system in the
// issue's shape, then what each handoff cost the server.
func printDeep(w io.Writer, rep *report) {
	if len(rep.Deep) == 0 {
		return
	}
	cases, cells := deepMedians(rep.Deep)
	fmt.Fprintf(w, "\ndeep queues: D waiters over the Clients queue behind a holder (a semaphore's K), which lets go;\neach waiter takes the lock once and lets go at once; handoffs/s over the drain, medians of %d rounds\n\n", rep.Config.Rounds)
	tw := newTable(w)
	fmt.Fprintln(tw, "queue\tClients\tzklock\tgo-zookeeper zk.Lock\tCurator 5.4\tzklock vs best peer\t")
	for _, c := range cases {
		row := c.label() + "\t" + fmt.Sprint(c.Clients)
		for _, sys := range []string{sysZklock, sysGozk, sysCurator} {
			row += "\t" + deepCell(cells[deepKey{c, sys}], c, sys)
		}
		vs := "-"
		if z, peer := cells[deepKey{c, sysZklock}], first(bestPeer(cells, c)); z.ok() && peer > 0 {
			vs = fmt.Sprintf("%.2fx", z.rate/peer)
		}
		fmt.Fprintln(tw, row+"\t"+vs+"\t")
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nper handoff, over the drain (server's mntr; reads include pings; response bytes exclude notifications), medians\n\n")
	tw = newTable(w)
	fmt.Fprintln(tw, "queue\tsystem\trequests\treads\twrites\tresponse bytes\thandoff p50 ms\thandoff p99 ms\tqueued in s\tviolations\t")
	for _, c := range cases {
		for _, sys := range []string{sysZklock, sysGozk, sysCurator} {
			m := cells[deepKey{c, sys}]
			if m == nil || !m.ok() {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t\n", c.label(), systemLabel(sys),
				m.requests, m.reads, m.writes, m.bytes, m.p50, m.p99, m.queue, m.violations)
		}
	}
	_ = tw.Flush()
}

func first(v float64, _ string) float64 { return v }

// deepCell is one system's figure for a case: its median rate, "none"
// where it has no such recipe, or its error.
func deepCell(m *deepMedian, c deepCase, sys string) string {
	switch {
	case sys == sysGozk && c.Recipe != recipeMutex:
		return "none"
	case m.ok():
		return fmt.Sprintf("%.0f/s", m.rate)
	case m != nil && len(m.errors) > 0:
		return "error: " + short(m.errors[0])
	}
	return "-"
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// deepFlags are the deep workload's flags, as given.
type deepFlags struct {
	mutex, one, sem string
	clients, leases int
}

func (f *deepFlags) define() {
	flag.StringVar(&f.mutex, "deep", "100,1000,3000", "deep workload: waiters D of the mutex queues over -deep-clients Clients")
	flag.StringVar(&f.one, "deep-one", "1000", "deep workload: waiters D of the mutex queues on one Client (CURATOR-716's case)")
	flag.StringVar(&f.sem, "deep-sem", "100,1000,3000", "deep workload: waiters D of the semaphore queues over -deep-clients Clients")
	flag.IntVar(&f.clients, "deep-clients", 8, "deep workload: Clients (sessions) the waiters are spread over")
	flag.IntVar(&f.leases, "deep-leases", 10, "deep workload: the semaphore's leases")
}

// parse checks the flags and sets cfg's deep fields; an empty list runs
// no queue of that kind.
func (f *deepFlags) parse(cfg *config) error {
	var err error
	if cfg.deepNs, err = parseCounts("-deep", f.mutex); err != nil {
		return err
	}
	if cfg.deepOneNs, err = parseCounts("-deep-one", f.one); err != nil {
		return err
	}
	if cfg.deepSemNs, err = parseCounts("-deep-sem", f.sem); err != nil {
		return err
	}
	if f.clients < 1 || f.leases < 1 {
		return fmt.Errorf("-deep-clients and -deep-leases must be positive")
	}
	cfg.deepClients, cfg.deepLeases = f.clients, f.leases
	return nil
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive count", name, item)
		}
		out = append(out, n)
	}
	return out, nil
}

// deepCases lists the queues of a run: the mutex over the Clients, the
// mutex on one Client, the semaphore.
func deepCases(cfg config) []deepCase {
	var cs []deepCase
	for _, d := range cfg.deepNs {
		cs = append(cs, deepCase{Recipe: recipeMutex, Clients: cfg.deepClients, Waiters: d, Leases: 1})
	}
	for _, d := range cfg.deepOneNs {
		cs = append(cs, deepCase{Recipe: recipeMutex, Clients: 1, Waiters: d, Leases: 1})
	}
	for _, d := range cfg.deepSemNs {
		cs = append(cs, deepCase{Recipe: recipeSemaphore, Clients: cfg.deepClients, Waiters: d, Leases: cfg.deepLeases})
	}
	return cs
}

// deepSystems are the systems that drain case c, in -systems' order.
func deepSystems(c deepCase, systems []string) []string {
	var out []string
	for _, s := range systems {
		if s == sysZklock || s == sysCurator || s == sysGozk && c.Recipe == recipeMutex {
			out = append(out, s)
		}
	}
	return out
}

// runDeep runs the deep workload, if asked for: every round drains every
// queue with every system, the systems' order rotating from one queue to
// the next and reversed in odd rounds, as the other workloads do.
func runDeep(ctx context.Context, out io.Writer, cfg config, servers []string, base string, p *peers) ([]DeepResult, error) {
	if !slices.Contains(cfg.workloads, "deep") {
		return nil, nil
	}
	var res []DeepResult
	for round := range cfg.rounds {
		for ci, c := range deepCases(cfg) {
			for _, sys := range deepOrder(deepSystems(c, cfg.systems), ci, round) {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				res = append(res, runDeepOne(ctx, out, sys, p, servers, base, c, round))
			}
		}
	}
	return res, nil
}

// deepOrder is the order systems drain the ci-th queue in a round:
// rotated by ci, reversed in odd rounds.
func deepOrder(systems []string, ci, round int) []string {
	if len(systems) == 0 {
		return nil
	}
	k := ci % len(systems)
	systems = slices.Concat(systems[k:], systems[:k])
	if round%2 == 1 {
		slices.Reverse(systems)
	}
	return systems
}

// runDeepOne drains one queue with one system, and prints the outcome.
func runDeepOne(ctx context.Context, out io.Writer, sys string, p *peers, servers []string, base string, c deepCase, round int) DeepResult {
	path := fmt.Sprintf("%s/deep-%s-%d-%d-%s-%d", base, c.Recipe, c.Clients, c.Waiters, sys, round)
	fmt.Fprintf(out, "  deep   %-22s %-36s ", systemLabel(sys), c.title())
	r := runDrain(ctx, sys, p, servers, path, c)
	r.Round = round
	if r.Error != "" {
		fmt.Fprintf(out, "error: %s\n", short(r.Error))
	} else {
		fmt.Fprintf(out, "%8.1f handoffs/s, %.2f requests, %.0f response bytes per handoff\n",
			r.HandoffsPerSec, r.RequestsPerHandoff, r.ResponseBytesPerHandoff)
	}
	return r
}
