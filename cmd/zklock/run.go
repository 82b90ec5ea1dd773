//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// releaseTimeout bounds the release once the command has exited. A release
// that does not finish in time is harmless: closing the session deletes
// the node anyway.
const releaseTimeout = 10 * time.Second

// holdSpec is one run of a command under a lease: zklock lock or elect.
type holdSpec struct {
	sub     string // the subcommand, for messages
	lost    string // what is lost, for messages: "the lock on", "leadership of"
	common  *commonFlags
	path    string
	argv    []string
	timeout time.Duration
	grace   time.Duration
	// acquire takes the lease (or leases, for -semaphore -n); ctx bounds
	// the wait.
	acquire func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error)
	// layoutHint, for a semaphore, names the -layout that the path's nodes
	// are of when it is not the one asked for ("" if it cannot tell).
	layoutHint func(c *zklock.Client) string
}

// hold connects, takes the lease, runs the command under it and returns
// the exit status.
func (s holdSpec) hold() int {
	// Look the command up before waiting, possibly for long, for a lock
	// that it then cannot use.
	bin, err := exec.LookPath(s.argv[0])
	if err != nil {
		return s.cannotStart(err)
	}

	// From here on SIGINT, SIGTERM and SIGHUP are ours: while waiting they
	// stop the wait; while the command runs they are passed on to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	ctx, stopWatch := untilSignal(sigs)
	c, leases, code := s.lockUp(ctx)
	if sig := stopWatch(); sig != nil {
		if leases != nil {
			s.release(leases)
		}
		if c != nil {
			_ = c.Close()
		}
		fmt.Fprintf(os.Stderr, "zklock %s: %v while waiting for %s: the command did not run\n", s.sub, sig, s.path)
		return exitNotLocked
	}
	if leases == nil {
		return code
	}
	defer c.Close()
	return s.run(bin, leases, sigs)
}

// lockUp connects and takes the lease. On failure it reports why, unless
// ctx was cancelled (the caller reports the signal), and closes what it
// opened. -timeout bounds both: the connection, then the wait.
func (s holdSpec) lockUp(ctx context.Context) (*zklock.Client, []*zklock.Lease, int) {
	actx := ctx
	if s.timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	c, err := s.common.connect(actx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, exitNotLocked
		}
		// No session, even if -timeout is what ended the wait for one:
		// nobody can tell whether the lock was free.
		return nil, nil, failed(s.sub, err)
	}
	s.common.log.Debug("zklock: waiting", "path", s.path)
	leases, err := s.acquire(actx, c)
	if err == nil {
		return c, leases, 0
	}
	code := exitNotLocked
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, zklock.ErrLocked):
		fmt.Fprintf(os.Stderr, "zklock %s: %s is taken (-try): the command did not run\n", s.sub, s.path)
		s.reportHolders(c)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "zklock %s: not holding %s within -timeout %v: the command did not run\n", s.sub, s.path, s.timeout)
		s.reportHolders(c)
	case errors.Is(err, zklock.ErrSizeMismatch):
		// kazoo's layout keeps one size; zklock's own takes any (a
		// rolling resize), so only kazoo's refuses.
		fmt.Fprintf(os.Stderr, "zklock %s: %s: the command did not run (kazoo's semaphore takes one size: give the -semaphore its participants recorded)\n", s.sub, bare(err))
	case errors.Is(err, zk.ErrNoAuth):
		fmt.Fprintf(os.Stderr, "zklock %s: %s: refused by the path's ACL, which does not let this client create nodes there "+
			"(authenticate with -auth, or a -tls-cert the ACL names): the command did not run\n", s.sub, bare(err))
		code = exitFailed
	case errors.Is(err, zklock.ErrUnknownNode):
		hint := ""
		if s.layoutHint != nil {
			if l := s.layoutHint(c); l != "" {
				hint = " (give -layout " + l + " to take part)"
			}
		}
		fmt.Fprintf(os.Stderr, "zklock %s: %s is used by another kind of lock (%s): the command did not run%s\n", s.sub, s.path, bare(err), hint)
	default:
		code = failed(s.sub, err)
	}
	_ = c.Close()
	return nil, nil, code
}

// reportHolders tells, when the command cannot run, who is in the way.
// It is best effort: an error only leaves it out.
func (s holdSpec) reportHolders(c *zklock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := zklock.Participants(ctx, c, s.path)
	if err != nil {
		return
	}
	waiting, now := 0, time.Now()
	for _, p := range ps {
		if p.Holder {
			// ZooKeeper records when a node was created, not when it came
			// to hold: that is when its owner queued.
			fmt.Fprintf(os.Stderr, "  held by %s, who queued %s ago (%s; zklock ls %s)\n",
				showData(p.Data), formatAge(age(now, p)), p.Node, s.path)
		} else {
			waiting++
		}
	}
	if waiting > 0 {
		fmt.Fprintf(os.Stderr, "  %d more waiting\n", waiting)
	}
}

// run runs the command while the leases hold and returns the exit status.
func (s holdSpec) run(bin string, leases []*zklock.Lease, sigs <-chan os.Signal) int {
	nodes := make([]string, len(leases))
	for i, l := range leases {
		nodes[i] = l.Node()
	}
	token := strconv.FormatInt(leases[0].Token(), 10)
	// Every ZKLOCK_ variable is set, so that none is inherited from an
	// outer zklock; exec keeps the last of duplicate keys.
	env := append(os.Environ(),
		"ZKLOCK_PATH="+s.path,
		"ZKLOCK_TOKEN="+token,
		"ZKLOCK_NODE="+nodes[0],
		"ZKLOCK_NODES="+strings.Join(nodes, " "))
	attr, foreground := childAttr()
	cmd := &exec.Cmd{
		Path: bin, Args: s.argv, Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: attr,
	}
	s.common.log.Debug("zklock: holding", "path", s.path, "nodes", nodes, "token", token)

	if err := leaseErr(leases); err != nil {
		s.release(leases)
		fmt.Fprintf(os.Stderr, "zklock %s: lost %s %s before the command started: %v; the command did not run\n", s.sub, s.lost, s.path, err)
		return exitNotLocked
	}
	exited, err := startOnThread(cmd)
	if err != nil {
		s.release(leases)
		return s.cannotStart(err)
	}
	if foreground {
		// The command's group has the terminal now; zklock may still write
		// to it (with stty tostop, SIGTTOU would stop us) and takes it back
		// once the command is done.
		signal.Ignore(syscall.SIGTTOU)
	}
	pgid := cmd.Process.Pid // Setpgid with Pgid 0: the group is the command's pid
	s.common.log.Debug("zklock: started", "pid", pgid, "argv", s.argv)

	lost, stopLost := anyDone(leases)
	defer stopLost()
	r := &running{holdSpec: s, leases: leases, pgid: pgid, foreground: foreground}
	return r.supervise(exited, sigs, lost)
}

// running is a command that runs under its leases, in process group pgid.
type running struct {
	holdSpec
	leases     []*zklock.Lease
	pgid       int
	foreground bool // the command's group has the terminal

	lostErr error            // why a lease ended while the command ran; nil while all hold
	killAt  <-chan time.Time // fires -grace after SIGTERM; nil before, and once fired
	killed  bool             // SIGKILL was sent
}

// supervise passes signals on to the command, stops it if a lease is lost,
// and returns the exit status once it has exited.
func (r *running) supervise(exited <-chan error, sigs <-chan os.Signal, lost <-chan struct{}) int {
	for {
		select {
		case werr := <-exited:
			return r.exited(werr)
		case sig := <-sigs:
			r.common.log.Debug("zklock: passing on a signal", "signal", sig, "pgid", r.pgid)
			_ = syscall.Kill(-r.pgid, sig.(syscall.Signal))
		case <-lost:
			lost = nil
			r.leaseLost()
		case <-r.killAt:
			r.killAt, r.killed = nil, true
			fmt.Fprintf(os.Stderr, "zklock %s: the command did not exit within -grace %v of SIGTERM: sending SIGKILL\n", r.sub, r.grace)
			r.kill(r.pgid)
		}
	}
}

// leaseLost reports a lease that ended while the command ran, sends the
// command's group SIGTERM and starts -grace.
func (r *running) leaseLost() {
	r.lostErr = leaseErr(r.leases)
	fmt.Fprintf(os.Stderr, "zklock %s: lost %s %s while the command ran: %v\n"+
		"zklock %s: another process may hold it now; sending SIGTERM to the command (process group %d), SIGKILL in %v.\n"+
		"zklock %s: check what the command left half done before running it again.\n",
		r.sub, r.lost, r.path, r.lostErr, r.sub, r.pgid, r.grace, r.sub)
	_ = syscall.Kill(-r.pgid, syscall.SIGTERM)
	r.killAt = time.After(r.grace)
}

// exited returns the exit status once the command has exited with werr,
// and releases the leases if they held throughout.
func (r *running) exited(werr error) int {
	if r.foreground {
		takeTerminal()
	}
	status := exitStatus(werr)
	if r.lostErr != nil {
		if !r.killed && groupAlive(r.pgid) {
			// Processes of the command's group outlived it: they get the
			// rest of -grace, like it.
			<-r.killAt
			r.kill(r.pgid)
		}
		return exitLockLost
	}
	// The command ran entirely under the lease only if the lease still
	// holds now that it has exited.
	if err := leaseErr(r.leases); err != nil {
		fmt.Fprintf(os.Stderr, "zklock %s: lost %s %s before the command's exit (status %d) was seen: %v\n"+
			"zklock %s: the command may have run partly without it; check what it did before running it again\n",
			r.sub, r.lost, r.path, status, err, r.sub)
		return exitLockLost
	}
	r.release(r.leases)
	r.common.log.Debug("zklock: released", "path", r.path, "status", status)
	return status
}

func (s holdSpec) kill(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// release releases the leases, bounded by releaseTimeout. A lease that
// was lost meanwhile, or a release that fails, is reported; the node goes
// with the session, which the caller closes next.
func (s holdSpec) release(leases []*zklock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "zklock %s: %v\n", s.sub, err)
		}
	}
}

// cannotStart reports a command that cannot be started, as a shell would:
// 127 if it does not exist, 126 if it cannot be run.
func (s holdSpec) cannotStart(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrDot) {
		fmt.Fprintf(os.Stderr, "zklock %s: command %q not found: %v\n", s.sub, s.argv[0], err)
		return exitNotFound
	}
	fmt.Fprintf(os.Stderr, "zklock %s: cannot run %q: %v\n", s.sub, s.argv[0], err)
	return exitCannotRun
}

// startOnThread starts cmd and returns a channel that receives the result of its
// Wait.
//
// The kernel sends Pdeathsig when the thread that forked the child exits,
// not the process, and the Go runtime may end idle threads: the goroutine
// that starts the command stays on its thread until the command has been
// reaped, so that the command is killed when zklock dies, and only then.
func startOnThread(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// exitStatus is the status a shell would report for the command's Wait
// error: its exit code, or 128+N if signal N killed it.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitFailed
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ee.ExitCode()
}

// groupAlive reports whether the process group pgid still has a member.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}

// leaseErr returns the error of the first lease that has ended, or nil if
// all hold.
func leaseErr(leases []*zklock.Lease) error {
	for _, l := range leases {
		if err := l.Err(); err != nil {
			return err
		}
	}
	return nil
}

// anyDone returns a channel that is closed when any of leases ends, and a
// function that stops watching and waits for its goroutines.
func anyDone(leases []*zklock.Lease) (<-chan struct{}, func()) {
	if len(leases) == 1 {
		return leases[0].Done(), func() {}
	}
	ch, quit := make(chan struct{}), make(chan struct{})
	var (
		once sync.Once
		wg   sync.WaitGroup
	)
	for _, l := range leases {
		wg.Add(1)
		go func(l *zklock.Lease) {
			defer wg.Done()
			select {
			case <-l.Done():
				once.Do(func() { close(ch) })
			case <-quit:
			}
		}(l)
	}
	return ch, func() { close(quit); wg.Wait() }
}

// untilSignal returns a context that is cancelled when a signal arrives
// on sigs, and a function that stops watching, waits for the watcher and
// returns the signal that came, if any.
func untilSignal(sigs <-chan os.Signal) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	var got os.Signal
	go func() {
		defer close(done)
		select {
		case got = <-sigs:
			cancel()
		case <-quit:
		}
	}()
	return ctx, func() os.Signal {
		close(quit)
		<-done
		cancel()
		return got
	}
}
