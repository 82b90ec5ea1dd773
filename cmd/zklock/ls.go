//go:build unix

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
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

	"github.com/zkrecipes/zklock"
)

func cmdLs(args []string) int {
	const sub = "ls"
	var (
		common  commonFlags
		asJSON  bool
		watch   bool
		timeout time.Duration
	)
	fs := newFlagSet(sub)
	common.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print a JSON array of objects instead of a table (with -watch, one array per line)")
	fs.BoolVar(&watch, "watch", false, "list again after every change, until interrupted")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up if connecting and listing take longer than this `duration` (with -watch: each listing)")

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
	}
	path := pos[0]
	if err := checkPath(path); err != nil {
		return usageError(sub, "%v", err)
	}
	if err := common.check(); err != nil {
		return usageError(sub, "%v", err)
	}

	common.bound = fmt.Sprintf("-timeout %v", timeout)

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
	ps, err := zklock.Participants(ctx, c, path)
	if err != nil {
		return failed(sub, err)
	}
	if asJSON {
		err = printJSON(os.Stdout, path, ps, time.Now(), "  ")
	} else {
		err = printTable(os.Stdout, path, ps, time.Now())
	}
	if err != nil {
		return failed(sub, err)
	}
	return 0
}

// watchLs is ls -watch: it lists path, then again after every change,
// until ctx ends (exit 0).
func watchLs(ctx context.Context, common *commonFlags, path string, asJSON bool, timeout time.Duration) int {
	const sub = "ls"
	w, traceOpt := newWatcher(path, timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := common.connect(cctx, traceOpt)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return failed(sub, err)
	}
	defer c.Close()
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
	Created    string  `json:"created"` // RFC 3339, by the ZooKeeper leader's clock
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
		Kind: p.Kind.String(), Read: p.Read,
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

func printTable(w io.Writer, path string, ps []zklock.Participant, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tKIND\tAGE\tNODE\tDATA")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", state(p), p.Kind, formatAge(age(now, p)), nodeName(path, p.Node), showData(p.Data))
	}
	return tw.Flush()
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
