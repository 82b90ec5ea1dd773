package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A suite is one test package's tests that pass without any mutant, split
// in two groups run one after the other: the quick ones first, so that most
// mutants die before the slow ones (TestSchedules' budget) start.
type suite struct {
	Pkg       string   `json:"pkg"`
	Quick     []string `json:"quick"`
	Slow      []string `json:"slow,omitempty"`
	QuickTime float64  `json:"quick_seconds"`
	SlowTime  float64  `json:"slow_seconds,omitempty"`
	dir       string
	deps      map[string]bool
	bin       string // the tests without a mutant
}

type runner struct {
	c      config
	module string
	server bool
	env    []string
	suites []*suite
	base   string // the directory of the baseline's binaries
}

// slowTest is where a test counts as slow: it runs in the second group.
const slowTest = time.Second

// prepare finds the tests that pass without a mutant and times them.
func (r *runner) prepare(ctx context.Context) error {
	r.env = os.Environ()
	if !r.server {
		env := r.env[:0:0]
		for _, kv := range r.env {
			if !strings.HasPrefix(kv, "ZKLOCK_TEST_SERVERS=") && !strings.HasPrefix(kv, "DOCKER_HOST=") {
				env = append(env, kv)
			}
		}
		r.env = append(env, "DOCKER_HOST=unix:///nonexistent")
	}
	base, err := os.MkdirTemp("", "zklock-mutate-base-")
	if err != nil {
		return err
	}
	r.base = base
	args := append([]string{"list", "-test", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Deps \"\\t\"}}"}, r.c.pkgs...)
	out, err := command(ctx, r.c.root, nil, "go", args...)
	if err != nil {
		return fmt.Errorf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	args = append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}"}, r.c.pkgs...)
	if out, err = command(ctx, r.c.root, nil, "go", args...); err != nil {
		return fmt.Errorf("go list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "\t")
		s := &suite{Pkg: f[0], dir: f[1], deps: map[string]bool{f[0]: true}}
		for _, tl := range lines {
			tf := strings.Split(tl, "\t")
			if tf[0] == s.Pkg+".test" {
				for _, d := range tf[2:] {
					s.deps[strings.SplitN(d, " ", 2)[0]] = true
				}
			}
		}
		if err := r.baseline(ctx, s); err != nil {
			return err
		}
		r.suites = append(r.suites, s)
	}
	return nil
}

var passLine = regexp.MustCompile(`(?m)^--- PASS: (\S+) \(([0-9.]+)s\)`)

// cleanup removes the baseline's binaries.
func (r *runner) cleanup() {
	if r.base != "" {
		os.RemoveAll(r.base)
	}
}

func (r *runner) baseline(ctx context.Context, s *suite) error {
	bin := filepath.Join(r.base, fmt.Sprintf("%d.test", len(r.suites)))
	s.bin = bin
	if out, err := r.build(ctx, s, "", bin); err != nil {
		return fmt.Errorf("building %s's tests without a mutant: %v\n%s", s.Pkg, err, out)
	}
	args := []string{"-test.v", "-test.count=1"}
	if r.c.run != "" {
		args = append(args, "-test.run", r.c.run)
	}
	limit := 5 * time.Minute
	if r.server {
		limit = 30 * time.Minute
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	out, _ := command(rctx, s.dir, r.env, bin, args...)
	cancel()
	for _, m := range passLine.FindAllStringSubmatch(out, -1) {
		d, _ := strconv.ParseFloat(m[2], 64)
		if time.Duration(d*float64(time.Second)) >= slowTest {
			s.Slow = append(s.Slow, m[1])
		} else {
			s.Quick = append(s.Quick, m[1])
		}
	}
	if len(s.Quick)+len(s.Slow) == 0 {
		return fmt.Errorf("%s: no test passes without a mutant:\n%s", s.Pkg, tail(out, 2000))
	}
	// Time the groups as a mutant will run them, and check that they pass
	// twice: a flaky test would kill mutants it never saw.
	for _, g := range []struct {
		names []string
		t     *float64
	}{{s.Quick, &s.QuickTime}, {s.Slow, &s.SlowTime}} {
		if len(g.names) == 0 {
			continue
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, limit)
		out, err := command(rctx, s.dir, r.env, bin, r.testArgs(g.names, limit)...)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: the tests that passed fail on a second run without a mutant (flaky?): %v\n%s", s.Pkg, err, tail(out, 4000))
		}
		*g.t = time.Since(start).Seconds()
	}
	return nil
}

func (r *runner) describeBaseline() string {
	var parts []string
	for _, s := range r.suites {
		parts = append(parts, fmt.Sprintf("%s %d tests %.1fs + %d slow %.1fs", r.short(s.Pkg), len(s.Quick), s.QuickTime, len(s.Slow), s.SlowTime))
	}
	return strings.Join(parts, "; ")
}

// short names a package by its directory: ".", "./internal/session".
func (r *runner) short(pkg string) string {
	return "." + strings.TrimPrefix(pkg, r.module)
}

func (r *runner) build(ctx context.Context, s *suite, overlay, bin string) (string, error) {
	args := []string{"test", "-c", "-vet=off", "-o", bin}
	if r.c.race {
		args = append(args, "-race")
	}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	return command(ctx, r.c.root, nil, "go", append(args, s.Pkg)...)
}

func (r *runner) testArgs(names []string, limit time.Duration) []string {
	return []string{"-test.run", "^(" + strings.Join(names, "|") + ")$", "-test.count=1", "-test.failfast",
		"-test.timeout", (limit + time.Minute).String()}
}

// runAll runs the mutants on c.workers workers, in order of the list.
func (r *runner) runAll(ctx context.Context, ms []*Mutant) []*result {
	res := make([]*result, len(ms))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < max(1, r.c.workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := os.MkdirTemp("", "zklock-mutate-")
			if err != nil {
				panic(err)
			}
			defer os.RemoveAll(dir)
			for i := range next {
				x := r.runOne(ctx, ms[i], dir)
				mu.Lock()
				res[i] = x
				done++
				fmt.Fprintf(os.Stderr, "[%d/%d] %s:%d %s: %s -> %s %s (%.0fs)\n", done, len(ms), x.File, x.Line, x.Kind, x.Desc, x.Status, x.Killer, x.Seconds)
				mu.Unlock()
			}
		}()
	}
	for i := range ms {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var out []*result
	for _, x := range res {
		if x != nil && x.Status != "interrupted" {
			out = append(out, x)
		}
	}
	return out
}

var failLine = regexp.MustCompile(`(?m)^--- FAIL: (\S+)`)

func (r *runner) runOne(ctx context.Context, m *Mutant, dir string) *result {
	start := time.Now()
	x := &result{Mutant: m}
	defer func() { x.Seconds = time.Since(start).Round(time.Second).Seconds() }()
	src := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(r.c.root, filepath.FromSlash(m.File)): src}})
	if err := os.WriteFile(src, m.apply(), 0o644); err != nil {
		panic(err)
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		panic(err)
	}
	for _, s := range r.affected(m) {
		bin := filepath.Join(dir, "mutant.test")
		if out, err := r.build(ctx, s, overlay, bin); err != nil {
			x.Status, x.Killer = "not viable", firstLine(out)
			if ctx.Err() != nil {
				x.Status = "interrupted"
			}
			return x
		}
		for _, g := range []struct {
			names []string
			t     float64
		}{{s.Quick, s.QuickTime}, {s.Slow, s.SlowTime}} {
			if len(g.names) == 0 {
				continue
			}
			limit := max(time.Duration(r.c.factor*g.t*float64(time.Second)), r.c.minTime)
			out, timedOut, err := r.runGroup(ctx, s, bin, g.names, limit)
			if timedOut && ctx.Err() == nil {
				// The machine may be slower now than when the baseline was
				// timed: time the tests without the mutant again, and give
				// the mutant its factor of that, once.
				if again := r.retime(ctx, s, g.names, limit); again > limit {
					limit = again
					out, timedOut, err = r.runGroup(ctx, s, bin, g.names, limit)
				}
			}
			switch {
			case ctx.Err() != nil:
				x.Status = "interrupted"
				return x
			case timedOut:
				x.Status, x.Killer = "timed out", fmt.Sprintf("%s after %s", r.short(s.Pkg), limit.Round(time.Second))
				return x
			case err != nil:
				x.Status, x.Killer = "killed", killer(out)
				if s.Pkg != m.Pkg {
					x.Killer = r.short(s.Pkg) + ": " + x.Killer
				}
				return x
			}
		}
	}
	x.Status = "survived"
	return x
}

// runGroup runs the tests names of s in bin, cut off after limit.
func (r *runner) runGroup(ctx context.Context, s *suite, bin string, names []string, limit time.Duration) (out string, timedOut bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err = command(rctx, s.dir, r.env, bin, r.testArgs(names, limit)...)
	return out, errors.Is(rctx.Err(), context.DeadlineExceeded), err
}

// retime runs the tests names of s without a mutant, and returns the
// factor of the time they take now (at most twice limit, when they take
// longer than that).
func (r *runner) retime(ctx context.Context, s *suite, names []string, limit time.Duration) time.Duration {
	start := time.Now()
	_, _, _ = r.runGroup(ctx, s, s.bin, names, 2*limit)
	return time.Duration(r.c.factor * float64(time.Since(start)))
}

// affected is the suites that can see the mutant's package, its own first.
func (r *runner) affected(m *Mutant) []*suite {
	var own, others []*suite
	for _, s := range r.suites {
		switch {
		case s.Pkg == m.Pkg:
			own = append(own, s)
		case s.deps[m.Pkg]:
			others = append(others, s)
		}
	}
	return append(own, others...)
}

func killer(out string) string {
	if m := failLine.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	if i := strings.Index(out, "panic: "); i >= 0 {
		return firstLine(out[i:])
	}
	return "exit: " + firstLine(tail(out, 200))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if len(l) > 160 {
				l = l[:157] + "..."
			}
			return l
		}
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
