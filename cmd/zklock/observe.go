//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zklock"
)

func cmdObserve(args []string) int {
	const sub = "observe"
	var (
		common   commonFlags
		asJSON   bool
		election bool
	)
	fs := newFlagSet(sub)
	common.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print each change as a JSON object on a line of its own")
	fs.BoolVar(&election, "election", false, "PATH is an election, even before any candidate's node is there: follow its leader")

	pos, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return parseFailed(sub, fs, err)
	}
	path, code := observedPath(sub, pos, command, dashdash)
	if code != 0 {
		return code
	}
	if err := common.check(); err != nil {
		return usageError(sub, "%v", err)
	}

	// SIGINT and SIGTERM end the observation: that is how it is meant to
	// end, so the exit status is 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	common.progress = sub
	w, traceOpt := newWatcher(sub, path, 0)
	c, err := common.connect(ctx, traceOpt)
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

	o := &observation{path: path, json: asJSON, out: os.Stdout}
	if !election {
		if err := o.followHolders(ctx, w); err != nil {
			return failed(sub, err)
		}
		if ctx.Err() != nil {
			return 0
		}
	}
	e, err := zklock.NewElection(c, path)
	if err != nil {
		return failed(sub, err)
	}
	common.log.Debug("zklock: following the leader", "path", path)
	o.followLeader(ctx, e)
	return 0
}

// observedPath checks that observe's arguments are one PATH and no
// command, and returns it; a non-zero code is a usage error, reported.
func observedPath(sub string, pos, command []string, dashdash bool) (string, int) {
	switch {
	case dashdash:
		return "", usageError(sub, "observe runs no command: zklock observe [flags] PATH (drop the -- %s)", strings.Join(command, " "))
	case len(pos) == 0:
		return "", usageError(sub, "missing PATH: zklock observe [flags] PATH")
	case len(pos) > 1:
		return "", usageError(sub, "one PATH at a time; got %q", pos)
	}
	if err := checkPath(pos[0]); err != nil {
		return "", usageError(sub, "%v", err)
	}
	return pos[0], 0
}

// followHolders reports the path's holders as a lock's until ctx is done
// or a candidate's node shows that the path is an election (it returns nil
// then: the caller follows the leader), or a read fails for good.
func (o *observation) followHolders(ctx context.Context, w *watcher) error {
	return w.run(ctx, func(ps []zklock.Participant) bool {
		for _, p := range ps {
			if p.Kind == zklock.KindLatch {
				return true // an election: follow its leader
			}
		}
		o.report("holders", holdersOf(ps))
		return false
	})
}

// followLeader reports the election's leader until ctx is done.
func (o *observation) followLeader(ctx context.Context, e *zklock.Election) {
	for p := range e.Observe(ctx) {
		if p.Node == "" {
			o.report("leader", nil)
		} else {
			o.report("leader", []zklock.Participant{p})
		}
	}
}

// observation prints the changes of one path's holders.
type observation struct {
	path     string
	json     bool
	out      io.Writer
	last     []zklock.Participant
	reported bool
}

// observeLine is one line of observe -json.
type observeLine struct {
	Time    string    `json:"time"` // RFC 3339, by this host's clock
	Path    string    `json:"path"`
	What    string    `json:"what"`    // "leader" or "holders"
	Holders []lsEntry `json:"holders"` // empty when nobody holds
}

// report prints holders, unless they are those it printed last.
func (o *observation) report(what string, holders []zklock.Participant) {
	if o.reported && sameHolders(o.last, holders) {
		return
	}
	o.last, o.reported = holders, true
	now := time.Now()
	if o.json {
		line := observeLine{Time: now.UTC().Format(time.RFC3339Nano), Path: o.path, What: what, Holders: make([]lsEntry, 0, len(holders))}
		for _, p := range holders {
			line.Holders = append(line.Holders, entry(o.path, p, now))
		}
		_ = json.NewEncoder(o.out).Encode(line) // one line: no indent
		return
	}
	var b strings.Builder
	b.WriteString(now.Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteString(" " + what + " ")
	if len(holders) == 0 {
		b.WriteString("none")
	}
	for i, p := range holders {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", showData(p.Data), nodeName(o.path, p.Node))
	}
	fmt.Fprintln(o.out, b.String())
}
