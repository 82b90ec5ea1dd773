// Command mutate is the library's mutation test: it makes one small change
// to the decision code at a time (a comparison flipped or its boundary
// moved, && and || swapped, a condition forced true or false, an integer
// constant moved by one, a call statement deleted, a returned true or false
// flipped) and runs the tests against each, to see whether any test
// notices.
//
//	go run ./tools/mutate [flags]            # make mutate: the fast tier
//	go run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- \
//	    go run ./tools/mutate -survivors FILE [-run PATTERN]   # the server tier
//
// Mutants are drawn from every possible one in -files with the seed -seed
// (-n of them), so the same seed over the same tree draws the same mutants.
// The working tree is never written: each mutated file is written to a
// directory of the worker's own and handed to the go command with -overlay.
//
// The fast tier runs each mutant against the tests of -pkgs (those whose
// tests can see the mutated package) with ZKLOCK_TEST_SERVERS unset and
// DOCKER_HOST pointing nowhere, and only the tests that pass that way
// without any mutant, as the before-stop hook's figure does. A mutant is
// killed when a test fails or the run outlasts -timeout-factor times the
// normal run (timed out, counted as killed). -survivors re-runs the
// survivors of an earlier run (its -out file) against the root package's
// tests with the server in ZKLOCK_TEST_SERVERS, to give the whole suite's
// figure.
//
// Survivors that cannot change behaviour are listed, each with the reason,
// under the heading "Equivalent mutants" in docs/contributing-tests.md, as lines of
// the form
//
//   - file.go (function), `description as printed`: why
//
// and are reported as equivalent rather than survived.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// defaultFiles is the decision code: the engine, the recipes and the
// session layer.
var defaultFiles = []string{
	"lockinternals.go", "claim.go", "waiter.go", "look.go", "grant.go", "registry.go", "driver.go", "node.go",
	"multilock.go", "heldback.go", "semaphore.go", "semaphore_layout.go", "sharedcount.go", "rwlock.go",
	"rwlock_shared.go", "election.go", "lease.go", "participants.go", "revoke.go", "mutex.go",
	"internal/session/*.go",
}

type config struct {
	root      string
	files     []string
	seed      uint64
	n         int
	workers   int
	factor    float64
	minTime   time.Duration
	pkgs      []string
	race      bool
	at        string
	match     string
	list      bool
	out       string
	survivors string
	again     string
	run       string
	equivs    string
	reprint   string
}

func main() {
	var c config
	var files, pkgs string
	flag.StringVar(&c.root, "C", ".", "the repository's root (the library module)")
	flag.StringVar(&files, "files", strings.Join(defaultFiles, ","), "comma-separated files to mutate, relative to -C (globs allowed; _test.go files are left out)")
	flag.Uint64Var(&c.seed, "seed", 30, "the seed that draws the sample")
	flag.IntVar(&c.n, "n", 150, "how many mutants to draw (0: every one)")
	flag.IntVar(&c.workers, "workers", 1, "mutants run at once")
	flag.Float64Var(&c.factor, "timeout-factor", 3, "a mutant's run is cut off (and counted as killed) after this many times the normal run")
	flag.DurationVar(&c.minTime, "min-timeout", 15*time.Second, "the shortest cut-off")
	flag.StringVar(&pkgs, "pkgs", ".,./internal/session,./internal/zkfake", "test packages, in either tier")
	flag.BoolVar(&c.race, "race", false, "build the tests with -race")
	flag.StringVar(&c.at, "at", "", "only the mutants at these file:line (comma-separated), all of them, no sampling")
	flag.StringVar(&c.match, "match", "", "only the mutants whose id or description matches this regexp, all of them, no sampling")
	flag.BoolVar(&c.list, "list", false, "list the chosen mutants and stop")
	flag.StringVar(&c.out, "out", "", "where to write the results as JSON (default: $TMPDIR/zklock-mutate-<seed>.json)")
	flag.StringVar(&c.survivors, "survivors", "", "re-run the survivors of this results file against the server-backed tests (needs ZKLOCK_TEST_SERVERS)")
	flag.StringVar(&c.again, "again", "", "re-run the survivors of this results file against the fast tier (after new tests), and report the sample again")
	flag.StringVar(&c.run, "run", "", "only the tests matching this pattern (go test -run), in either tier")
	flag.StringVar(&c.equivs, "equivalent", "docs/contributing-tests.md", "the file that lists the equivalent mutants, relative to -C")
	flag.StringVar(&c.reprint, "report", "", "print the report of this results file again, with the equivalent mutants listed now, and run nothing")
	flag.Parse()
	c.files = split(files)
	c.pkgs = split(pkgs)
	if c.out == "" {
		name := fmt.Sprintf("zklock-mutate-%d.json", c.seed)
		switch {
		case c.at != "" || c.match != "":
			name = "zklock-mutate-picked.json" // not a sample: keep the seed's file for -survivors
		case c.survivors != "":
			name = strings.TrimSuffix(filepath.Base(c.survivors), ".json") + "-server.json"
		case c.again != "":
			name = strings.TrimSuffix(filepath.Base(c.again), ".json") + "-again.json"
		}
		c.out = filepath.Join(os.TempDir(), name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// results is what a run writes to -out, and what -survivors reads.
type results struct {
	Tree     string    `json:"tree"` // git describe of the tree at the start
	Seed     uint64    `json:"seed"`
	N        int       `json:"n"`
	Mode     string    `json:"mode"` // fast or server
	Pkgs     []string  `json:"pkgs"`
	Run      string    `json:"run,omitempty"`
	Elapsed  string    `json:"elapsed"`
	Baseline []*suite  `json:"baseline"`
	Mutants  []*result `json:"mutants"`
}

type result struct {
	*Mutant
	Status  string  `json:"status"` // not viable, killed, timed out, survived, equivalent
	Killer  string  `json:"killer,omitempty"`
	Why     string  `json:"why,omitempty"` // the reason given for an equivalent mutant
	Seconds float64 `json:"seconds"`
	Fast    string  `json:"fast,omitempty"` // in a server run's whole-suite list: the status in the fast run
}

func run(ctx context.Context, c config) error {
	root, err := filepath.Abs(c.root)
	if err != nil {
		return err
	}
	c.root = root
	if c.reprint != "" {
		return reprint(c)
	}
	module, err := modulePath(root)
	if err != nil {
		return err
	}
	all, err := enumerateAll(c, module)
	if err != nil {
		return err
	}
	chosen, prev, err := pick(c, all)
	if err != nil {
		return err
	}
	if c.list {
		for _, m := range chosen {
			fmt.Printf("%s:%d (%s) %s: %s\n", m.File, m.Line, m.Func, m.Kind, m.Desc)
		}
		fmt.Printf("%d mutants of %d\n", len(chosen), len(all))
		return nil
	}
	equivs, err := readEquivalents(filepath.Join(root, c.equivs))
	if err != nil {
		return err
	}
	mode, server := "fast", c.survivors != ""
	if server {
		mode = "server"
	}
	if prev != nil {
		// The survivors explained since that run need no new one.
		explain(equivs, prev.Mutants)
		chosen = unexplained(equivs, chosen)
	}
	start := time.Now()
	r := &runner{c: c, module: module, server: server}
	defer r.cleanup()
	if err := r.prepare(ctx); err != nil {
		return err
	}
	fmt.Printf("%d mutants (%s tier, seed %d, %d workers); the tests' normal run: %s\n",
		len(chosen), mode, c.seed, c.workers, r.describeBaseline())
	res := r.runAll(ctx, chosen)
	explain(equivs, res)
	out := &results{Tree: gitDescribe(root), Seed: c.seed, N: c.n, Mode: mode, Pkgs: c.pkgs, Run: c.run,
		Elapsed: time.Since(start).Round(time.Second).String(), Baseline: r.suites, Mutants: res}
	switch {
	case server:
		report(os.Stdout, out, "the fast tier's survivors, against the server-backed tests", false)
		out.Seed, out.N, out.Mutants = prev.Seed, prev.N, merge(prev.Mutants, res)
		report(os.Stdout, out, "the whole suite: the fast tier, then the server-backed tests on its survivors", true)
	case prev != nil:
		out.Seed, out.N, out.Mutants = prev.Seed, prev.N, merge(prev.Mutants, res)
		report(os.Stdout, out, "the fast tier, its earlier survivors run again", true)
	default:
		report(os.Stdout, out, "the fast tier", true)
	}
	if err := write(c.out, out); err != nil {
		return err
	}
	fmt.Printf("\nresults: %s\n", c.out)
	if !server {
		fmt.Printf("survivors against the server: go run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- go run ./tools/mutate -survivors %s\n", c.out)
	}
	return ctx.Err()
}

// pick chooses the mutants to run: the sample (or those -at or -match
// name), or, with -survivors or -again, the survivors of that fast run,
// which it returns too.
func pick(c config, all []*Mutant) ([]*Mutant, *results, error) {
	if c.again != "" {
		return fromSurvivors(c.again, all)
	}
	if c.survivors == "" {
		chosen, err := choose(c, all)
		return chosen, nil, err
	}
	if strings.TrimSpace(os.Getenv("ZKLOCK_TEST_SERVERS")) == "" {
		return nil, nil, errors.New("-survivors runs the server-backed tests: set ZKLOCK_TEST_SERVERS (go run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- go run ./tools/mutate ...)")
	}
	return fromSurvivors(c.survivors, all)
}

// explain marks the survivors that docs list as equivalent (and, for
// results read back, unmarks those it no longer lists).
func explain(equivs map[string]string, xs []*result) {
	for _, x := range xs {
		if x.Status != "survived" && x.Status != "equivalent" {
			continue
		}
		x.Status, x.Why = "survived", ""
		if why, ok := equivalent(equivs, x.Mutant); ok {
			x.Status, x.Why = "equivalent", why
		}
	}
}

// unexplained is ms less those docs list as equivalent.
func unexplained(equivs map[string]string, ms []*Mutant) []*Mutant {
	var out []*Mutant
	for _, m := range ms {
		if _, ok := equivalent(equivs, m); !ok {
			out = append(out, m)
		}
	}
	return out
}

func write(path string, r *results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// reprint reports a results file again, with today's list of equivalent
// mutants.
func reprint(c config) error {
	b, err := os.ReadFile(c.reprint)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", c.reprint, err)
	}
	equivs, err := readEquivalents(filepath.Join(c.root, c.equivs))
	if err != nil {
		return err
	}
	explain(equivs, r.Mutants)
	title := "the fast tier"
	if r.Mode == "server" {
		title = "the whole suite: the fast tier, then the server-backed tests on its survivors"
	}
	fmt.Printf("%s (%s, seed %d)\n", c.reprint, r.Tree, r.Seed)
	report(os.Stdout, &r, title, true)
	return nil
}

func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		return "", errors.New("go.mod has no module line")
	}
	return string(m[1]), nil
}

// enumerateAll lists every mutant of the files, in the order of -files.
func enumerateAll(c config, module string) ([]*Mutant, error) {
	var all []*Mutant
	seen := map[string]bool{}
	for _, pat := range c.files {
		matches, err := filepath.Glob(filepath.Join(c.root, pat))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("-files: %s matches no file", pat)
		}
		sort.Strings(matches)
		for _, abs := range matches {
			rel, _ := filepath.Rel(c.root, abs)
			rel = filepath.ToSlash(rel)
			if strings.HasSuffix(rel, "_test.go") || seen[rel] {
				continue
			}
			seen[rel] = true
			pkg := module
			if d := filepath.ToSlash(filepath.Dir(rel)); d != "." {
				pkg += "/" + d
			}
			ms, err := enumerate(c.root, rel, pkg)
			if err != nil {
				return nil, err
			}
			all = append(all, ms...)
		}
	}
	// Two mutants at one place of one kind (a constant moved up and down)
	// are told apart by their number.
	count := map[string]int{}
	for _, m := range all {
		count[m.ID]++
		if n := count[m.ID]; n > 1 {
			m.ID += fmt.Sprintf("#%d", n)
		}
	}
	return all, nil
}

// choose draws the sample, or takes every mutant -at or -match names.
func choose(c config, all []*Mutant) ([]*Mutant, error) {
	if c.at != "" || c.match != "" {
		var re *regexp.Regexp
		if c.match != "" {
			var err error
			if re, err = regexp.Compile(c.match); err != nil {
				return nil, err
			}
		}
		lines := map[string]bool{}
		for _, a := range split(c.at) {
			lines[a] = true
		}
		var out []*Mutant
		for _, m := range all {
			atOK := c.at == "" || lines[fmt.Sprintf("%s:%d", m.File, m.Line)] || lines[fmt.Sprintf("%s:%d", filepath.Base(m.File), m.Line)]
			reOK := re == nil || re.MatchString(m.ID) || re.MatchString(m.Desc)
			if atOK && reOK {
				out = append(out, m)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("-at/-match: no mutant there")
		}
		return out, nil
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x7a6b6c6f636b)) // math/rand/v2's PCG: the same stream in every Go release
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	if c.n > 0 && c.n < len(idx) {
		idx = idx[:c.n]
	}
	sort.Ints(idx)
	out := make([]*Mutant, len(idx))
	for i, k := range idx {
		out[i] = all[k]
	}
	return out, nil
}

// fromSurvivors takes the mutants an earlier run left alive (not those
// explained as equivalent), checking that the tree still has them.
func fromSurvivors(path string, all []*Mutant) ([]*Mutant, *results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var prev results
	if err := json.Unmarshal(b, &prev); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if prev.Mode != "fast" {
		return nil, nil, fmt.Errorf("%s: not the results of a fast-tier run", path)
	}
	byID := map[string]*Mutant{}
	for _, m := range all {
		byID[m.ID] = m
	}
	var out []*Mutant
	for _, x := range prev.Mutants {
		if x.Status != "survived" {
			continue
		}
		m := byID[x.ID]
		if m == nil || m.Desc != x.Desc {
			return nil, nil, fmt.Errorf("%s: the tree has changed since that run (%s: %s is not there): run the fast tier again", path, x.ID, x.Desc)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%s: no survivors to run", path)
	}
	return out, &prev, nil
}

// merge is the fast run's results with its survivors' replaced by the
// server run's.
func merge(fast, server []*result) []*result {
	byID := map[string]*result{}
	for _, x := range server {
		byID[x.ID] = x
	}
	out := make([]*result, len(fast))
	for i, x := range fast {
		y := *x
		if z := byID[x.ID]; z != nil {
			y = *z
		}
		y.Fast = x.Status
		out[i] = &y
	}
	return out
}

// readEquivalents reads the lines under the heading "Equivalent mutants":
// "- file.go (function), `description`: why". The function may be left
// out: the line then covers that mutation anywhere in the file.
func readEquivalents(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	line := regexp.MustCompile("^\\s*-\\s+(\\S+\\.go)(?:\\s+\\(([^)]*)\\))?,?\\s+`([^`]+)`\\s*:?\\s*(.*)$")
	out := map[string]string{}
	in, last := false, ""
	for _, l := range strings.Split(string(b), "\n") {
		switch m := line.FindStringSubmatch(l); {
		case strings.HasPrefix(l, "#"):
			in, last = strings.Contains(strings.ToLower(l), "equivalent mutants"), ""
		case !in:
		case m != nil:
			last = equivKey(m[1], m[2], m[3])
			out[last] = m[4]
		case last != "" && strings.HasPrefix(l, "  "): // the item goes on
			out[last] += " " + strings.TrimSpace(l)
		default:
			last = ""
		}
	}
	return out, nil
}

func equivKey(file, fn, desc string) string { return file + "\x00" + fn + "\x00" + desc }

// equivalent returns why m cannot change behaviour, if docs say so.
func equivalent(equivs map[string]string, m *Mutant) (string, bool) {
	if why, ok := equivs[equivKey(m.File, m.Func, m.Desc)]; ok {
		return why, true
	}
	why, ok := equivs[equivKey(m.File, "", m.Desc)]
	return why, ok
}

func gitDescribe(root string) string {
	out, err := command(context.Background(), root, nil, "git", "describe", "--always", "--dirty")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// report prints the figures per file, under title, and the survivors; with
// hints, also as lines to paste into docs/contributing-tests.md.
func report(w *os.File, r *results, title string, hints bool) {
	type tally struct{ drawn, viable, killed, timedOut, survived, equivalent int }
	byFile := map[string]*tally{}
	var order []string
	total := &tally{}
	for _, x := range r.Mutants {
		t := byFile[x.File]
		if t == nil {
			t = &tally{}
			byFile[x.File] = t
			order = append(order, x.File)
		}
		for _, t := range []*tally{t, total} {
			t.drawn++
			switch x.Status {
			case "not viable":
				continue
			case "killed":
				t.killed++
			case "timed out":
				t.killed++
				t.timedOut++
			case "survived":
				t.survived++
			case "equivalent":
				t.equivalent++
			}
			t.viable++
		}
	}
	fmt.Fprintf(w, "\n%s, by file (killed counts the timed out; the rate is killed over viable less equivalent):\n", title)
	fmt.Fprintf(w, "%-32s %6s %6s %6s %9s %8s %10s %6s\n", "file", "drawn", "viable", "killed", "timed out", "survived", "equivalent", "rate")
	row := func(name string, t *tally) {
		rate := "-"
		if d := t.viable - t.equivalent; d > 0 {
			rate = fmt.Sprintf("%.0f%%", 100*float64(t.killed)/float64(d))
		}
		fmt.Fprintf(w, "%-32s %6d %6d %6d %9d %8d %10d %6s\n", name, t.drawn, t.viable, t.killed, t.timedOut, t.survived, t.equivalent, rate)
	}
	for _, f := range order {
		row(f, byFile[f])
	}
	row("total", total)
	fmt.Fprintf(w, "run time %s\n", r.Elapsed)
	var surv, eq []*result
	for _, x := range r.Mutants {
		switch x.Status {
		case "survived":
			surv = append(surv, x)
		case "equivalent":
			eq = append(eq, x)
		}
	}
	if len(surv) > 0 {
		fmt.Fprintf(w, "\nsurvivors (%d): file:line (function) kind: mutation\n", len(surv))
		for _, x := range surv {
			fmt.Fprintf(w, "  %s:%d (%s) %s: %s\n", x.File, x.Line, x.Func, x.Kind, x.Desc)
		}
		if hints {
			fmt.Fprintf(w, "\nas lines for docs/contributing-tests.md's \"Equivalent mutants\", where one cannot change behaviour:\n")
			for _, x := range surv {
				fmt.Fprintf(w, "  - %s (%s), `%s`: \n", x.File, x.Func, x.Desc)
			}
		}
	}
	if len(eq) > 0 {
		fmt.Fprintf(w, "\nequivalent (%d):\n", len(eq))
		for _, x := range eq {
			fmt.Fprintf(w, "  %s:%d %s: %s\n", x.File, x.Line, x.Desc, x.Why)
		}
	}
}

// command runs name in dir and returns its combined output.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := execCommand(ctx, dir, env, name, args...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
