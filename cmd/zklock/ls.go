//go:build unix

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

func cmdLs(args []string) int {
	const sub = "ls"
	var (
		common             commonFlags
		asJSON             bool
		watch              bool
		timeout            time.Duration
		maxDepth, maxNodes int
	)
	fs := newFlagSet(sub)
	common.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print a JSON array of objects instead of a table (with -watch, one array per line)")
	fs.BoolVar(&watch, "watch", false, "list again after every change, until interrupted")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up if connecting and listing take longer than this `duration` (with -watch: each listing)")
	fs.IntVar(&maxDepth, "max-depth", zklock.DefaultFindDepth, "if PATH is no lock path: look for lock paths at most `N` levels below it")
	fs.IntVar(&maxNodes, "max-nodes", zklock.DefaultFindNodes, "if PATH is no lock path: read at most `N` nodes looking for lock paths below it")

	pos, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return parseFailed(sub, fs, err)
	}
	switch {
	case dashdash:
		return usageError(sub, "ls runs no command: zklock ls [flags] PATH (drop the -- %s)", strings.Join(command, " "))
	case len(pos) == 0:
		return usageError(sub, "missing PATH: zklock ls [flags] PATH")
	case len(pos) > 1:
		return usageError(sub, "one PATH at a time; got %q", pos)
	case timeout <= 0:
		return usageError(sub, "-timeout %v must be positive", timeout)
	case maxDepth < 1:
		return usageError(sub, "-max-depth %d must be at least 1", maxDepth)
	case maxNodes < 1:
		return usageError(sub, "-max-nodes %d must be at least 1", maxNodes)
	}
	path := pos[0]
	if path != "/" || watch {
		if err := checkPath(path); err != nil {
			return usageError(sub, "%v", err)
		}
	}
	if err := common.check(); err != nil {
		return usageError(sub, "%v", err)
	}

	common.bound = fmt.Sprintf("-timeout %v", timeout)
	common.progress = sub

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if watch {
		return watchLs(ctx, &common, path, asJSON, timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := common.connect(ctx)
	if err != nil {
		return failed(sub, err)
	}
	defer c.Close()
	limit := zklock.FindLimit{Depth: maxDepth, Nodes: maxNodes}
	found, complete, err := zklock.FindLocks(ctx, c, path, limit)
	if errors.Is(err, zk.ErrNoNode) {
		fmt.Fprintf(os.Stderr, "zklock %s: %s does not exist\n", sub, path)
		return exitNoPath
	}
	if err != nil {
		return failed(sub, err)
	}
	if err := printLs(os.Stdout, path, found, asJSON); err != nil {
		return failed(sub, err)
	}
	if !complete && (len(found) == 0 || found[0].Path != path) {
		fmt.Fprintf(os.Stderr, "zklock %s: the listing is cut: it reads at most -max-nodes %d nodes, -max-depth %d levels below %s; "+
			"lock paths further down may be missing (ls a path below it, or raise the limits)\n", sub, maxNodes, maxDepth, path)
	}
	return 0
}

// printLs prints what ls found at and below path: the participants of
// path if it is a lock path (found first, as FindLocks sorts); else one
// row per lock path below it; if there is none, nobody (the empty table).
func printLs(w io.Writer, path string, found []zklock.LockPath, asJSON bool) error {
	now := time.Now()
	switch {
	case len(found) > 0 && found[0].Path == path:
		if asJSON {
			return printJSON(w, path, found[0].Participants, now, "  ")
		}
		return printTable(w, path, found[0].Participants, now)
	case len(found) == 0:
		if asJSON {
			return printJSON(w, path, nil, now, "  ")
		}
		return printTable(w, path, nil, now)
	case asJSON:
		return printLocksJSON(w, found)
	}
	return printLocksTable(w, found)
}

// watchLs is ls -watch: it lists path, then again after every change,
// until ctx ends (exit 0).
func watchLs(ctx context.Context, common *commonFlags, path string, asJSON bool, timeout time.Duration) int {
	const sub = "ls"
	w, traceOpt := newWatcher(sub, path, timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := common.connect(cctx, traceOpt)
	cancel()
	if err != nil {
		w.close()
		if ctx.Err() != nil {
			return 0
		}
		return failed(sub, err)
	}
	defer c.Close()
	defer w.close() // first: the Client's close is no lost connection
	w.c = c
	var (
		last   []zklock.Participant
		listed bool
		werr   error
	)
	err = w.run(ctx, func(ps []zklock.Participant) bool {
		if listed && sameList(last, ps) {
			return false
		}
		if listed && !asJSON {
			fmt.Fprintln(os.Stdout) // a blank line between tables
		}
		last, listed = ps, true
		if asJSON {
			werr = printJSON(os.Stdout, path, ps, time.Now(), "")
		} else {
			werr = printTable(os.Stdout, path, ps, time.Now())
		}
		return werr != nil
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return failed(sub, err)
	}
	return 0
}

// lsEntry is one participant in ls -json. Exactly one of Data (the node's
// data as text, when it is valid UTF-8) and DataBase64 is set.
type lsEntry struct {
	Node       string  `json:"node"`  // full znode path
	Name       string  `json:"name"`  // the node's name under PATH
	State      string  `json:"state"` // "holds" or "waits"
	Holder     bool    `json:"holder"`
	Kind       string  `json:"kind"` // mutex, read, write, lease, latch
	Read       bool    `json:"read"`
	Size       int     `json:"size,omitempty"` // a zklock semaphore's participant: the size it was made with
	Created    string  `json:"created"`        // RFC 3339, by the ZooKeeper leader's clock
	AgeSeconds float64 `json:"age_seconds"`
	Data       *string `json:"data,omitempty"`
	DataBase64 string  `json:"data_base64,omitempty"`
}

// printJSON prints the participants as a JSON array, indented by indent
// ("" prints it on one line).
func printJSON(w io.Writer, path string, ps []zklock.Participant, now time.Time, indent string) error {
	out := make([]lsEntry, 0, len(ps))
	for _, p := range ps {
		out = append(out, entry(path, p, now))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	return enc.Encode(out)
}

// entry is participant p of path in ls -json and observe -json.
func entry(path string, p zklock.Participant, now time.Time) lsEntry {
	e := lsEntry{
		Node: p.Node, Name: nodeName(path, p.Node), State: state(p), Holder: p.Holder,
		Kind: p.Kind.String(), Read: p.Read, Size: p.Size,
		Created:    p.Created.UTC().Format(time.RFC3339Nano),
		AgeSeconds: math.Round(age(now, p).Seconds()*1000) / 1000,
	}
	if utf8.Valid(p.Data) {
		d := string(p.Data)
		e.Data = &d
	} else {
		e.DataBase64 = base64.StdEncoding.EncodeToString(p.Data)
	}
	return e
}

// lockRow is one lock path below PATH in ls -json.
type lockRow struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"` // mutex, rwlock, semaphore, election, semaphore/curator, semaphore/kazoo
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
	Size    int    `json:"size,omitempty"` // a zklock semaphore: the size in force
}

func lockRowOf(lp zklock.LockPath) lockRow {
	r := lockRow{Path: lp.Path, Kind: pathKind(lp), Size: zklock.SizeInForce(lp.Participants)}
	for _, p := range lp.Participants {
		if p.Holder {
			r.Holders++
		} else {
			r.Waiters++
		}
	}
	return r
}

// pathKind names what a lock path is: another library's semaphore by its
// layout, else by the kinds of its nodes.
func pathKind(lp zklock.LockPath) string {
	switch lp.Layout {
	case zklock.LayoutCurator:
		return "semaphore/curator"
	case zklock.LayoutKazoo:
		return "semaphore/kazoo"
	}
	has := map[zklock.Kind]bool{}
	for _, p := range lp.Participants {
		has[p.Kind] = true
	}
	switch {
	case has[zklock.KindLease]:
		return "semaphore"
	case has[zklock.KindLatch]:
		return "election"
	case has[zklock.KindRead] || has[zklock.KindWrite]:
		return "rwlock"
	}
	return "mutex"
}

func printLocksJSON(w io.Writer, found []zklock.LockPath) error {
	out := make([]lockRow, 0, len(found))
	for _, lp := range found {
		out = append(out, lockRowOf(lp))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// printLocksTable prints one row per lock path; SIZE is a zklock
// semaphore's size in force, "-" for other locks.
func printLocksTable(w io.Writer, found []zklock.LockPath) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tHOLDERS\tWAITERS\tKIND\tSIZE")
	for _, lp := range found {
		r := lockRowOf(lp)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Path, r.Holders, r.Waiters, r.Kind, sizeText(r.Size))
	}
	return tw.Flush()
}

// printTable prints one row per participant, and for a zklock semaphore
// the size in force below: the smallest size among its participants
// (docs/semantics.md, "Resizing a semaphore").
func printTable(w io.Writer, path string, ps []zklock.Participant, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tKIND\tAGE\tNODE\tDATA")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", state(p), p.Kind, formatAge(age(now, p)), nodeName(path, p.Node), showData(p.Data))
	}
	if n := zklock.SizeInForce(ps); n > 0 {
		fmt.Fprintf(tw, "size in force: %d (sizes queued: %s)\n", n, sizesOf(ps))
	}
	return tw.Flush()
}

func sizeText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// sizesOf lists the sizes the participants were made with, in queue order.
func sizesOf(ps []zklock.Participant) string {
	var out []string
	for _, p := range ps {
		if p.Size > 0 {
			out = append(out, strconv.Itoa(p.Size))
		}
	}
	return strings.Join(out, " ")
}

func state(p zklock.Participant) string {
	if p.Holder {
		return "holds"
	}
	return "waits"
}

func nodeName(path, node string) string { return strings.TrimPrefix(node, path+"/") }

// age is how long ago the node was created. The time is the ZooKeeper
// leader's: with clocks apart it can come out negative, shown as 0.
func age(now time.Time, p zklock.Participant) time.Duration {
	if d := now.Sub(p.Created); d > 0 {
		return d
	}
	return 0
}

// formatAge rounds d to what a person reads at a glance: 3s, 2m10s, 4h5m,
// 3d2h.
func formatAge(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

// showData shows node data as it is when it is printable text, and quoted
// with Go's escapes otherwise (empty data shows as "").
func showData(data []byte) string {
	s := string(data)
	if s == "" || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 ||
		strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	return s
}
