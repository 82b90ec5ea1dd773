//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/zkrecipes/zklock"
)

// holdFlags are the flags of the subcommands that run a command under a
// lease: lock and elect.
type holdFlags struct {
	timeout time.Duration
	grace   time.Duration
	data    string
	dataSet bool // -data was given, even empty
}

func (h *holdFlags) register(fs *flag.FlagSet, dataDoc string) {
	fs.DurationVar(&h.timeout, "timeout", 0, "give up (exit 124) if not holding within this `duration`, connecting included; 0 waits for ever")
	fs.DurationVar(&h.grace, "grace", 10*time.Second, "if the lock (or leadership) is lost, how long the command has between SIGTERM and SIGKILL")
	fs.StringVar(&h.data, "data", "", dataDoc)
}

// parsed records what only the parsed flag set can tell.
func (h *holdFlags) parsed(fs *flag.FlagSet) { h.dataSet = isSet(fs, "data") }

func (h *holdFlags) lockOptions() []zklock.LockOption {
	if !h.dataSet {
		return nil // the library's default: "<host>/<pid>"
	}
	return []zklock.LockOption{zklock.WithNodeData([]byte(h.data))}
}

// spec checks the flags every hold takes (after the subcommand's own) and
// the common ones, and returns the hold of argv under the lease on path; a
// non-zero code is a usage error, reported.
func (h *holdFlags) spec(sub, lost string, common *commonFlags, path string, argv []string) (holdSpec, int) {
	switch {
	case h.timeout < 0:
		return holdSpec{}, usageError(sub, "-timeout %v is negative: give 0 to wait for ever", h.timeout)
	case h.grace < 0:
		return holdSpec{}, usageError(sub, "-grace %v is negative", h.grace)
	}
	if err := common.check(); err != nil {
		return holdSpec{}, usageError(sub, "%v", err)
	}
	if h.timeout > 0 {
		common.bound = fmt.Sprintf("-timeout %v", h.timeout)
	}
	return holdSpec{
		sub: sub, lost: lost, common: common, path: path, argv: argv,
		timeout: h.timeout, grace: h.grace,
	}, 0
}

// positionalCommand checks that args hold exactly PATH, then -- and a
// command.
func positionalCommand(sub string, pos, command []string, dashdash bool) (path string, code int) {
	switch {
	case len(pos) == 0:
		return "", usageError(sub, "missing PATH: zklock %s [flags] PATH -- COMMAND [ARG...]", sub)
	case len(pos) > 1 && !dashdash:
		return "", usageError(sub, "missing -- before the command: zklock %s [flags] %s -- %s", sub, pos[0], pos[1])
	case len(pos) > 1:
		return "", usageError(sub, "one PATH only, then -- and the command; got %q before --", pos)
	case !dashdash || len(command) == 0:
		return "", usageError(sub, "missing the command to run: zklock %s [flags] %s -- COMMAND [ARG...]", sub, pos[0])
	}
	if err := checkPath(pos[0]); err != nil {
		return "", usageError(sub, "%v", err)
	}
	return pos[0], 0
}

// lockFlags are zklock lock's own flags: which kind of lock to take, and
// how.
type lockFlags struct {
	read, write, try bool
	maxLeases, n     int // -semaphore MAX (0: not a semaphore), -n
	layoutName       string
	layout           zklock.SemaphoreLayout // -layout's, set by check
}

func (l *lockFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.read, "read", false, "take the read side of a read-write lock: readers hold together, never with a writer")
	fs.BoolVar(&l.write, "write", false, "take the write side of a read-write lock: a writer holds alone")
	fs.IntVar(&l.maxLeases, "semaphore", 0, "take a lease of a counting semaphore of `MAX` leases: at most MAX holders at once")
	fs.IntVar(&l.n, "n", 1, "with -semaphore: take `N` leases at once, all or none")
	fs.BoolVar(&l.try, "try", false, "take the lock only if it is free now; exit 124 if not")
	fs.StringVar(&l.layoutName, "layout", "zklock", "with -semaphore: the nodes of the semaphore, `zklock|curator|kazoo`: zklock's own, "+
		"Apache Curator's InterProcessSemaphoreV2's or kazoo's Semaphore's, to share its leases with processes that use that library")
}

// check checks that the flags, as parsed by fs, make one kind of lock,
// and sets l.layout.
func (l *lockFlags) check(fs *flag.FlagSet) error {
	switch {
	case l.read && l.write:
		return errors.New("-read and -write exclude each other: choose the side of the read-write lock to take")
	case l.maxLeases < 0 || (l.maxLeases == 0 && isSet(fs, "semaphore")):
		return fmt.Errorf("-semaphore %d: a semaphore has at least 1 lease", l.maxLeases)
	case l.maxLeases > 0 && (l.read || l.write):
		return errors.New("-semaphore excludes -read and -write: a path is a semaphore or a read-write lock")
	case isSet(fs, "n") && l.maxLeases == 0:
		return fmt.Errorf("-n %d needs -semaphore MAX: only a semaphore has several leases", l.n)
	case l.n < 1 || (l.maxLeases > 0 && l.n > l.maxLeases):
		return fmt.Errorf("-n %d is out of range: take from 1 to -semaphore's %d leases", l.n, l.maxLeases)
	}
	layout, ok := layouts[l.layoutName]
	switch {
	case !ok:
		return fmt.Errorf("-layout %q is none of zklock, curator and kazoo", l.layoutName)
	case isSet(fs, "layout") && l.maxLeases == 0:
		return fmt.Errorf("-layout %s needs -semaphore MAX: only a semaphore has a layout", l.layoutName)
	case layout == zklock.LayoutKazoo && l.n > 1:
		return fmt.Errorf("-n %d with -layout kazoo: kazoo's semaphore grants one lease at a time", l.n)
	}
	l.layout = layout
	return nil
}

// acquirer returns the holdSpec's acquire for the lock at path.
func (l *lockFlags) acquirer(path string, opts []zklock.LockOption) func(context.Context, *zklock.Client) ([]*zklock.Lease, error) {
	return func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error) {
		if l.maxLeases > 0 {
			return l.acquireSemaphore(ctx, c, path, opts)
		}
		lk, err := l.locker(c, path, opts)
		if err != nil {
			return nil, err
		}
		acquire := lk.Acquire
		if l.try {
			acquire = lk.TryAcquire
		}
		lease, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		return []*zklock.Lease{lease}, nil
	}
}

// locker is the mutex, or a side of the read-write lock, at path.
func (l *lockFlags) locker(c *zklock.Client, path string, opts []zklock.LockOption) (zklock.Locker, error) {
	if !l.read && !l.write {
		return zklock.NewMutex(c, path, opts...)
	}
	rw, err := zklock.NewRWMutex(c, path, opts...)
	if err != nil {
		return nil, err
	}
	if l.read {
		return rw.ReadLock(), nil
	}
	return rw.WriteLock(), nil
}

// acquireSemaphore takes -n leases of the semaphore at path.
func (l *lockFlags) acquireSemaphore(ctx context.Context, c *zklock.Client, path string, opts []zklock.LockOption) ([]*zklock.Lease, error) {
	sem, err := zklock.NewSemaphore(c, path, l.maxLeases, append(opts, zklock.WithSemaphoreLayout(l.layout))...)
	if err != nil {
		return nil, err
	}
	switch {
	case l.n > 1 && l.try:
		return sem.TryAcquireN(ctx, l.n)
	case l.n > 1:
		return sem.AcquireN(ctx, l.n)
	}
	acquire := sem.Acquire
	if l.try {
		acquire = sem.TryAcquire
	}
	lease, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	return []*zklock.Lease{lease}, nil
}

func cmdLock(args []string) int {
	const sub = "lock"
	var (
		common commonFlags
		h      holdFlags
		l      lockFlags
	)
	fs := newFlagSet(sub)
	common.register(fs)
	h.register(fs, "the lock node's data, `text` that zklock ls shows (default \"<host>/<pid>\")")
	l.register(fs)

	pos, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return parseFailed(sub, fs, err)
	}
	h.parsed(fs)
	path, code := positionalCommand(sub, pos, command, dashdash)
	if code != 0 {
		return code
	}
	if err := l.check(fs); err != nil {
		return usageError(sub, "%v", err)
	}
	s, code := h.spec(sub, "the lock on", &common, path, command)
	if code != 0 {
		return code
	}
	if l.maxLeases > 0 {
		s.layoutHint = func(c *zklock.Client) string { return layoutHint(c, path, l.layout) }
	}
	s.acquire = l.acquirer(path, h.lockOptions())
	return s.hold()
}

func cmdElect(args []string) int {
	const sub = "elect"
	var (
		common commonFlags
		h      holdFlags
	)
	fs := newFlagSet(sub)
	common.register(fs)
	h.register(fs, "the candidate's identity, `text` that zklock ls and Curator's LeaderLatch show (default \"<host>/<pid>\")")

	pos, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return parseFailed(sub, fs, err)
	}
	h.parsed(fs)
	path, code := positionalCommand(sub, pos, command, dashdash)
	if code != 0 {
		return code
	}
	if h.dataSet && h.data == "" {
		return usageError(sub, "-data is empty: a candidate must say who it is; omit -data for \"<host>/<pid>\"")
	}
	s, code := h.spec(sub, "leadership of", &common, path, command)
	if code != 0 {
		return code
	}
	opts := h.lockOptions()
	s.acquire = func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error) {
		e, err := zklock.NewElection(c, path, opts...)
		if err != nil {
			return nil, err
		}
		lease, err := e.Campaign(ctx)
		if err != nil {
			return nil, err
		}
		return []*zklock.Lease{lease}, nil
	}
	return s.hold()
}

// layouts are -layout's values.
var layouts = map[string]zklock.SemaphoreLayout{
	"zklock": zklock.LayoutZklock, "curator": zklock.LayoutCurator, "kazoo": zklock.LayoutKazoo,
}

// layoutHint names the -layout of the semaphore at path if it is not
// want's: what to give to take part in it. It is best effort: "" if it
// cannot tell.
func layoutHint(c *zklock.Client, path string, want zklock.SemaphoreLayout) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	found, _, err := zklock.FindLocks(ctx, c, path, zklock.FindLimit{Depth: 1, Nodes: 1})
	if err != nil || len(found) == 0 || found[0].Path != path {
		return ""
	}
	lp := found[0]
	if lp.Layout == want || (lp.Layout == zklock.LayoutZklock && pathKind(lp) != "semaphore") {
		return ""
	}
	return lp.Layout.String()
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
