package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is one system's run of one workload. Its JSON field names are the
// peers' own (tools/peers/README.md), so a peer's line decodes straight into it.
type Result struct {
	System               string  `json:"system"`
	Workload             string  `json:"workload"`
	Clients              int     `json:"clients"`
	ReadPct              int     `json:"read_pct,omitempty"`
	Leases               int     `json:"leases,omitempty"`
	Ops                  int64   `json:"ops"`
	ReadOps              int64   `json:"read_ops"`
	WriteOps             int64   `json:"write_ops"`
	Seconds              float64 `json:"seconds"`
	OpsPerSec            float64 `json:"ops_per_sec"`
	ReadOpsPerSec        float64 `json:"read_ops_per_sec"`
	WriteOpsPerSec       float64 `json:"write_ops_per_sec"`
	AcquireP50Ms         float64 `json:"acquire_p50_ms"`
	AcquireP99Ms         float64 `json:"acquire_p99_ms"`
	Violations           int64   `json:"violations"`
	TokenRegressions     int64   `json:"token_regressions,omitempty"`
	MaxConcurrentReaders int     `json:"max_concurrent_readers"`
	MaxConcurrentHolders int     `json:"max_concurrent_holders"`
	Timeouts             int64   `json:"timeouts"`
	// W6: the writer's acquire wait.
	WriterP50Ms float64 `json:"writer_p50_ms,omitempty"`
	WriterP99Ms float64 `json:"writer_p99_ms,omitempty"`

	// What the server received per acquire+release, from mntr deltas:
	// every request (zk_packets_received), reads (zk_cnt_readlatency, pings
	// included) and writes (zk_cnt_updatelatency). For Go systems over the
	// timed loop; for peers over the whole process, less an empty run's
	// (connect and close only).
	RequestsPerOp float64 `json:"requests_per_op"`
	ReadsPerOp    float64 `json:"reads_per_op"`
	WritesPerOp   float64 `json:"writes_per_op"`
	// CPU time per acquire+release, over the same span: the client's
	// (the bench process for Go systems, the peer process for peers) and
	// the server's (its container's cgroup; 0 when not readable).
	ClientCPUUsPerOp float64 `json:"client_cpu_us_per_op"`
	ServerCPUUsPerOp float64 `json:"server_cpu_us_per_op"`

	Rounds int    `json:"rounds,omitempty"`
	Note   string `json:"note,omitempty"`
	Error  string `json:"error,omitempty"`

	lat []time.Duration // sorted acquire latencies, when known (Go systems)
}

// peers knows how to start the Java (Curator) and Python (kazoo) peers.
type peers struct {
	root   string // repository root
	python string

	buildOnce sync.Once
	buildErr  error

	// The server's counters for an empty run (connect, close), per
	// system and client count, to subtract from real runs.
	empty map[string]counts
}

// counts is what the server received, and the CPU that client and server
// used, over some span.
type counts struct {
	packets, reads, writes float64
	clientCPU, serverCPU   time.Duration
	haveServerCPU          bool
}

// probe is a reading of the counters that counts are differences of.
type probe struct {
	m      mntrStats
	err    error
	server time.Duration
	srvOK  bool
}

func takeProbe(ctx context.Context, addr string, serverCPU func() (time.Duration, bool)) probe {
	var p probe
	p.server, p.srvOK = serverCPU()
	p.m, p.err = mntr(ctx, addr)
	return p
}

// between returns what happened from p0 to p1; clientCPU is the client's
// CPU over the span, measured by the caller.
func between(p0, p1 probe, clientCPU time.Duration) (counts, bool) {
	if p0.err != nil || p1.err != nil {
		return counts{}, false
	}
	d := func(k string) float64 { return p1.m.num[k] - p0.m.num[k] }
	c := counts{
		// p1's own mntr is one packet received.
		packets: d("zk_packets_received") - 1, reads: d("zk_cnt_readlatency"), writes: d("zk_cnt_updatelatency"),
		clientCPU: clientCPU,
	}
	if p0.srvOK && p1.srvOK {
		c.serverCPU, c.haveServerCPU = p1.server-p0.server, true
	}
	return c, true
}

func (c counts) minus(o counts) counts {
	return counts{
		packets: c.packets - o.packets, reads: c.reads - o.reads, writes: c.writes - o.writes,
		clientCPU: c.clientCPU - o.clientCPU, serverCPU: c.serverCPU - o.serverCPU,
		haveServerCPU: c.haveServerCPU && o.haveServerCPU,
	}
}

// setPerOp fills the per-op request counts and CPU.
func (r *Result) setPerOp(c counts) {
	if r.Ops == 0 {
		return
	}
	n := float64(r.Ops)
	r.RequestsPerOp, r.ReadsPerOp, r.WritesPerOp = c.packets/n, c.reads/n, c.writes/n
	r.ClientCPUUsPerOp = float64(c.clientCPU.Microseconds()) / n
	if c.haveServerCPU {
		r.ServerCPUUsPerOp = float64(c.serverCPU.Microseconds()) / n
	}
}

func (p *peers) javaLauncher() string {
	return filepath.Join(p.root, "tools", "peers", "java", "build", "zkpeer")
}

// ensureBuilt runs tools/peers/build-peers.sh once if the Java launcher is
// missing or older than its source.
func (p *peers) ensureBuilt(ctx context.Context) error {
	p.buildOnce.Do(func() {
		launcher, err := os.Stat(p.javaLauncher())
		src, serr := os.Stat(filepath.Join(p.root, "tools", "peers", "java", "ZkPeer.java"))
		if err == nil && serr == nil && !src.ModTime().After(launcher.ModTime()) {
			return
		}
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(p.root, "tools", "peers", "build-peers.sh"))
		cmd.Dir = p.root
		out, err := cmd.CombinedOutput()
		if err != nil {
			p.buildErr = fmt.Errorf("tools/peers/build-peers.sh: %w: %s", err, tail(out))
		}
	})
	return p.buildErr
}

// run runs one peer's bench mode and decodes its JSON line, and counts the
// requests the server received meanwhile.
func (p *peers) run(ctx context.Context, sys string, spec runSpec) Result {
	addr := spec.counterAddr()
	key := fmt.Sprintf("%s/%d", sys, spec.clients)
	if _, ok := p.empty[key]; !ok {
		empty := spec
		empty.duration = 0
		empty.path += "-empty"
		p0 := takeProbe(ctx, addr, spec.serverCPU)
		r, cpu := p.exec(ctx, sys, empty)
		p1 := takeProbe(ctx, addr, spec.serverCPU)
		if c, ok := between(p0, p1, cpu); ok && r.Error == "" {
			if p.empty == nil {
				p.empty = map[string]counts{}
			}
			p.empty[key] = c
		}
	}
	p0 := takeProbe(ctx, addr, spec.serverCPU)
	res, cpu := p.exec(ctx, sys, spec)
	p1 := takeProbe(ctx, addr, spec.serverCPU)
	c, ok := between(p0, p1, cpu)
	if empty, ok2 := p.empty[key]; ok && ok2 && res.Error == "" {
		res.setPerOp(c.minus(empty))
	}
	return res
}

// exec runs the peer once and returns its result and the CPU time it used.
func (p *peers) exec(ctx context.Context, sys string, spec runSpec) (res Result, cpu time.Duration) {
	return p.execArgs(ctx, sys, spec, nil)
}

// execArgs is exec with extra arguments for the peer.
func (p *peers) execArgs(ctx context.Context, sys string, spec runSpec, extra []string) (res Result, cpu time.Duration) {
	res = Result{System: sys, Workload: spec.workload, Clients: spec.clients}
	args := []string{"bench",
		"--servers", strings.Join(spec.servers, ","),
		"--path", spec.path,
		"--workload", peerWorkload(spec.workload),
		"--clients", strconv.Itoa(spec.clients),
		"--duration-ms", strconv.FormatInt(spec.duration.Milliseconds(), 10),
		"--leases", strconv.Itoa(spec.leases),
		"--read-pct", strconv.Itoa(spec.readPct),
		"--acquire-timeout-ms", strconv.FormatInt(spec.acquireTimeout.Milliseconds(), 10),
		"--hold-us", strconv.FormatInt(spec.hold.Microseconds(), 10),
		"--id", "zkbench-" + sys,
	}
	if spec.workload == "W5" {
		args = append(args, "--paths", strconv.Itoa(spec.paths))
	}
	args = append(args, extra...)
	var cmd *exec.Cmd
	// Peers connect every client before the clock starts; give them time
	// for that, the run itself and a timed-out last acquire.
	ctx, cancel := context.WithTimeout(ctx, spec.duration+spec.acquireTimeout+90*time.Second)
	defer cancel()
	switch sys {
	case sysCurator:
		if err := p.ensureBuilt(ctx); err != nil {
			res.Error = err.Error()
			return res, cpu
		}
		cmd = exec.CommandContext(ctx, p.javaLauncher(), args...)
	case sysKazoo:
		if spec.workload == "W3" {
			// kazoo 2.8's RW lock deadlocks with writers queued behind
			// readers (kazoo #649); the peer's fix is kazoo 2.9's rule.
			args = append(args, "--kazoo-rw-fix")
			res.Note = "--kazoo-rw-fix (kazoo #649)"
		}
		cmd = exec.CommandContext(ctx, p.python, append([]string{filepath.Join(p.root, "tools", "peers", "python", "zkpeer.py")}, args...)...)
	default:
		res.Error = fmt.Sprintf("%s is not a peer", sys)
		return res, cpu
	}
	cmd.Dir = p.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	line, perr := lastJSONLine(stdout.Bytes())
	if perr != nil {
		msg := perr.Error()
		if err != nil {
			msg = err.Error() + ": " + msg
		}
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += "; stderr: " + tail([]byte(s))
		}
		res.Error = msg
		return res, cpu
	}
	note := res.Note
	if err := json.Unmarshal(line, &res); err != nil {
		res.Error = fmt.Sprintf("decode %q: %v", line, err)
		return res, cpu
	}
	res.System = sys
	res.Workload = spec.workload // W2d is W2 to the peer
	res.Note = note
	if res.Seconds > 0 {
		res.ReadOpsPerSec = float64(res.ReadOps) / res.Seconds
		res.WriteOpsPerSec = float64(res.WriteOps) / res.Seconds
	}
	return res, cpu
}

// lastJSONLine finds the peer's result among its output lines; an ERR line
// becomes the error.
func lastJSONLine(out []byte) ([]byte, error) {
	var errLine string
	lines := bytes.Split(out, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if bytes.HasPrefix(l, []byte("{")) {
			return l, nil
		}
		if bytes.HasPrefix(l, []byte("ERR ")) && errLine == "" {
			errLine = string(l)
		}
	}
	if errLine != "" {
		return nil, errors.New(errLine)
	}
	return nil, fmt.Errorf("no JSON line in peer output %q", tail(out))
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// repoRoot finds the repository root, the directory of the library's
// go.mod, from the working directory, so the bench finds tools/peers and
// docs/bench wherever it is started in the repository.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/zkrecipes/zklock\n")) {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
