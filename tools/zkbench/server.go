package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/zkrecipes/zklock/zktest"
)

const serversEnv = "ZKLOCK_TEST_SERVERS"

// server is the one ZooKeeper every workload runs against.
type server struct {
	servers []string
	source  string // "container <image>" or "ZKLOCK_TEST_SERVERS"
	version string
	stop    func()
	// cpu returns the CPU time the server has used so far, if it can be
	// read (a container of ours, through its cgroup).
	cpu func() (time.Duration, bool)
}

func noCPU() (time.Duration, bool) { return 0, false }

// containerCPU reads a container's CPU usage from its cgroup (v1 or v2,
// cgroupfs or systemd driver).
func containerCPU(id string) func() (time.Duration, bool) {
	v1 := []string{
		"/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpu,cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage",
	}
	v2 := []string{
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat",
		"/sys/fs/cgroup/docker/" + id + "/cpu.stat",
	}
	for _, p := range v1 {
		if _, err := os.Stat(p); err == nil {
			return func() (time.Duration, bool) {
				b, err := os.ReadFile(p)
				if err != nil {
					return 0, false
				}
				ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				return time.Duration(ns), err == nil
			}
		}
	}
	for _, p := range v2 {
		if _, err := os.Stat(p); err == nil {
			return func() (time.Duration, bool) {
				b, err := os.ReadFile(p)
				if err != nil {
					return 0, false
				}
				for line := range strings.SplitSeq(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
						us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
						return time.Duration(us) * time.Microsecond, err == nil
					}
				}
				return 0, false
			}
		}
	}
	return noCPU
}

// startServer uses ZKLOCK_TEST_SERVERS when set, or else starts a throwaway
// container with zktest.Run. Unless fsync is true, the container runs with
// forceSync=no: the bench measures the lock recipes, and a transaction log
// fsync on this machine's disk would bury their differences under the
// disk's noise (ZooKeeper's own docs keep fsync off for the same reason
// when benchmarking).
//
// Unless viaProxy is true, clients reach the container at its bridge IP, not
// through the port Docker publishes on 127.0.0.1: that port is served by
// docker-proxy, a userland process that copies every packet and competes
// with the server and the clients for this machine's CPUs.
//
// The image is ZKLOCK_ZK_IMAGE's, or else the one scripts/setup.sh chose
// (.zklock-image at the repository root), or else zktest's default.
func startServer(ctx context.Context, root string, fsync, viaProxy bool) (*server, error) {
	if env := os.Getenv(serversEnv); strings.TrimSpace(env) != "" {
		var servers []string
		for s := range strings.SplitSeq(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				servers = append(servers, s)
			}
		}
		s := &server{servers: servers, source: serversEnv, stop: func() {}, cpu: noCPU}
		s.version = serverVersion(ctx, servers[0])
		return s, nil
	}
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	tclog.SetDefault(tclog.NewNoopLogger())
	image := os.Getenv("ZKLOCK_ZK_IMAGE")
	if image == "" {
		if b, err := os.ReadFile(filepath.Join(root, ".zklock-image")); err == nil {
			image = strings.TrimSpace(string(b))
		}
	}
	if image == "" {
		image = zktest.DefaultImage
	}
	var opts []testcontainers.ContainerCustomizer
	if !fsync {
		opts = append(opts, zktest.WithConfig("forceSync", "no"))
	}
	c, err := zktest.Run(ctx, image, opts...)
	stop := func() {
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Terminate(tctx); err != nil {
			fmt.Fprintf(os.Stderr, "zkbench: %v\n", err)
		}
	}
	if err != nil {
		stop()
		return nil, err
	}
	src := "container " + image
	if !fsync {
		src += " (forceSync=no)"
	}
	s := &server{servers: c.Servers(), source: src, stop: stop, cpu: containerCPU(c.GetContainerID())}
	if !viaProxy {
		if ip, err := c.ContainerIP(ctx); err == nil && ip != "" {
			addr := net.JoinHostPort(ip, "2181")
			if _, err := mntr(ctx, addr); err == nil {
				s.servers = []string{addr}
				s.source += ", bridge IP"
			}
		}
	}
	s.version = serverVersion(ctx, s.servers[0])
	return s, nil
}

func serverVersion(ctx context.Context, addr string) string {
	m, err := mntr(ctx, addr)
	if err != nil {
		return "unknown"
	}
	v := m.str["zk_version"]
	if i := strings.IndexAny(v, "-,"); i > 0 {
		v = v[:i]
	}
	return v
}

// mntrStats is a parsed mntr answer.
type mntrStats struct {
	num map[string]float64
	str map[string]string
}

func parseMntr(out string) mntrStats {
	m := mntrStats{num: map[string]float64{}, str: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		m.str[k] = v
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m.num[k] = f
		}
	}
	return m
}

func mntr(ctx context.Context, addr string) (mntrStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := zktest.FourLetter(ctx, addr, "mntr")
	if err != nil {
		return mntrStats{}, err
	}
	m := parseMntr(out)
	if _, ok := m.num["zk_packets_received"]; !ok {
		return mntrStats{}, fmt.Errorf("mntr to %s: no zk_packets_received in %q", addr, firstLine(out))
	}
	return m, nil
}

// totalWatches reads "Total watches:N" from wchs.
func totalWatches(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := zktest.FourLetter(ctx, addr, "wchs")
	if err != nil {
		return 0, err
	}
	_, after, ok := strings.Cut(out, "Total watches:")
	if !ok {
		return 0, fmt.Errorf("wchs to %s: unexpected answer %q", addr, firstLine(out))
	}
	return strconv.Atoi(strings.TrimSpace(after))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// machine describes where the bench ran, for the JSON and the chart.
type machine struct {
	NumCPU  int    `json:"nproc"`
	CPU     string `json:"cpu_model"`
	OS      string `json:"os"`
	Go      string `json:"go_version"`
	LoadAvg string `json:"load_average_at_start"`
}

func describeMachine() machine {
	m := machine{NumCPU: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", OS: runtime.GOOS}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}
