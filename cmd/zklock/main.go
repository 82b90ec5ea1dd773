//go:build unix

// Command zklock runs a command while holding a ZooKeeper lock, or while
// leading an election; it lists who holds a lock path and who waits, and
// follows a lock's holders or an election's leader as they change, as
// `consul lock`, `etcdctl lock` and `etcdctl elect -l` do for their stores. Its locks are the
// zklock library's, so they exclude Apache Curator's locks (and kazoo's,
// and the library's users) on the same path.
//
//	go install github.com/zkrecipes/zklock/cmd/zklock@main
//	export ZKLOCK_SERVERS=zk1:2181,zk2:2181,zk3:2181
//	zklock lock /jobs/backup -- /usr/local/bin/backup.sh
//	zklock elect /services/scheduler -- ./scheduler
//	zklock ls /jobs/backup
//	zklock observe /services/scheduler
//
// Run `zklock help` for the flags and the exit statuses. It is made for
// Linux; on other Unix systems a command outlives a zklock killed with
// SIGKILL, and it does not take the terminal.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/zkrecipes/zklock"
)

// Exit statuses. A command that ran to completion while holding passes its
// own status through (128+N if signal N killed it); zklock's own outcomes
// take the codes timeout(1) and docker run use, so that a caller can tell
// them from the command's.
const (
	exitNoPath     = 122 // ls: PATH does not exist
	exitLockLost   = 123 // the lock (or leadership) was lost while the command ran; the command was signalled
	exitNotLocked  = 124 // could not lock: -timeout passed, -try found it taken, the path is used otherwise, or interrupted while waiting
	exitFailed     = 125 // zklock itself failed: a usage error, no connection, a ZooKeeper error
	exitCannotRun  = 126 // the command was found but could not be run
	exitNotFound   = 127 // the command was not found
	exitSignalBase = 128 // plus N: the command was killed by signal N
)

// serversEnv is where -servers comes from when the flag is not given.
const serversEnv = "ZKLOCK_SERVERS"

func main() {
	os.Exit(zklockMain(os.Args[1:]))
}

func zklockMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, mainUsage)
		return exitFailed
	}
	global, args, code := globalFlags(args)
	if code >= 0 {
		return code
	}
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "zklock: missing the command after %q: the commands are %s.\nRun 'zklock help' for usage.\n", global, commandList)
		return exitFailed
	}
	// The connection flags given before the subcommand are the subcommand's,
	// as if given first after it: given again after it, the later one wins
	// (every -auth counts). version and help connect nowhere: they ignore
	// them.
	switch sub, rest := args[0], args[1:]; sub {
	case "lock":
		return cmdLock(append(global, rest...))
	case "elect":
		return cmdElect(append(global, rest...))
	case "ls":
		return cmdLs(append(global, rest...))
	case "observe":
		return cmdObserve(append(global, rest...))
	case "version":
		return cmdVersion(rest)
	case "help":
		if len(rest) == 0 {
			fmt.Fprint(os.Stdout, mainUsage)
			return 0
		}
		// A command's help is what its -h prints: the text, then the flags.
		if cmd, ok := commands[rest[0]]; ok {
			return cmd([]string{"-h"})
		}
		fmt.Fprintf(os.Stderr, "zklock help: unknown command %q: the commands are %s.\n", rest[0], commandList)
		return exitFailed
	default:
		fmt.Fprintf(os.Stderr, "zklock: unknown command %q: the commands are %s.\nRun 'zklock help' for usage.\n", sub, commandList)
		return exitFailed
	}
}

// globalFlags splits off the connection flags (the common flags) that come
// before the subcommand, as `zklock -servers zk1:2181 ls /` gives them,
// and returns them as given, then the subcommand and its arguments. A
// code of 0 or more is the exit status: -h asked for the usage, or the
// flags were wrong (reported).
func globalFlags(args []string) (global, rest []string, code int) {
	var common commonFlags
	fs := newFlagSet("")
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, mainUsage)
			return nil, nil, 0
		}
		fmt.Fprintf(os.Stderr, "zklock: %v (only the connection flags, -servers, -session-timeout, -connect-timeout, -auth, -tls-* and -v, "+
			"may come before the command; a command's own flags follow it)\nRun 'zklock help' for usage.\n", err)
		return nil, nil, exitFailed
	}
	rest = fs.Args()
	global = args[:len(args)-len(rest)]
	if n := len(global); n > 0 && global[n-1] == "--" {
		// The flag package's end of flags, not the command's "--" (a flag
		// value of "--" is written -flag=--, as after the subcommand).
		global = global[:n-1]
	}
	return global, rest, -1
}

// commands maps each subcommand to its function, for help.
var commands = map[string]func([]string) int{
	"lock": cmdLock, "elect": cmdElect, "ls": cmdLs, "observe": cmdObserve, "version": cmdVersion,
}

const commandList = "lock, elect, ls, observe and version"

// usageError reports a usage error of subcommand sub and returns
// exitFailed.
func usageError(sub string, format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "zklock %s: %s\nRun 'zklock %s -h' for usage.\n", sub, fmt.Sprintf(format, args...), sub)
	return exitFailed
}

// failed reports that zklock itself failed and returns exitFailed. An
// error wrapping ErrInvalidArgument is the caller's to fix: it is reported
// as a usage error. (The subcommands check what they can before they
// connect; what the servers' state refuses, such as a semaphore of another
// size, they report themselves, as a lock that could not be taken.)
func failed(sub string, err error) int {
	if errors.Is(err, zklock.ErrInvalidArgument) {
		return usageError(sub, "%s", bare(err))
	}
	fmt.Fprintf(os.Stderr, "zklock %s: %s\n", sub, bare(err))
	return exitFailed
}

// bare is err's text without the library's "zklock: " prefix: the command
// puts its own name and subcommand first.
func bare(err error) string {
	return strings.TrimPrefix(err.Error(), "zklock: ")
}

// commonFlags are the flags every subcommand takes: how to reach ZooKeeper.
type commonFlags struct {
	servers        string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	auth           []authFlag
	tlsFiles       tlsFlags
	verbose        bool

	serverList []string     // parsed by check
	tls        *tls.Config  // read by check from tlsFiles; nil: plaintext
	log        *slog.Logger // -v: debug lines on stderr; otherwise silent

	// bound names the subcommand's own limit on the whole run, which
	// bounds connecting too (e.g. "-timeout 2s"), for messages; "" if none.
	bound string
	// progress is the subcommand that says on stderr that it is still
	// connecting, after stillConnectingAfter; "" says nothing.
	progress string
}

// stillConnectingAfter is when ls and observe first say that they are
// still connecting, and stillConnectingEvery how often they say it again:
// soon enough that an operator knows why nothing is printed, where the
// connect timeout is many seconds.
const (
	stillConnectingAfter = 2 * time.Second
	stillConnectingEvery = 5 * time.Second
)

type authFlag struct {
	scheme string
	cred   []byte
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "servers", "", "ZooKeeper `servers`, comma-separated host:port pairs, a chroot after the last (default $"+serversEnv+")")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 10*time.Second,
		"ZooKeeper session timeout: how long the servers wait before deleting the nodes of a zklock that vanished")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 15*time.Second, "give up if no ZooKeeper session is established within this `duration`")
	fs.Func("auth", "authenticate as `scheme:credentials`, e.g. digest:user:pass (repeatable)", func(s string) error {
		scheme, cred, ok := strings.Cut(s, ":")
		if !ok || scheme == "" {
			return errors.New("want scheme:credentials, e.g. digest:user:pass")
		}
		c.auth = append(c.auth, authFlag{scheme, []byte(cred)})
		return nil
	})
	c.tlsFiles.register(fs)
	fs.BoolVar(&c.verbose, "v", false, "log what zklock and the library do, on stderr")
}

// check validates the common flags after parsing: what can be known wrong
// before any connection is tried.
func (c *commonFlags) check() error {
	servers := c.servers
	if servers == "" {
		servers = os.Getenv(serversEnv)
	}
	if strings.TrimSpace(servers) == "" {
		return fmt.Errorf("no ZooKeeper servers: set %s=host:port[,host:port...] or pass -servers host:port[,...]", serversEnv)
	}
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return fmt.Errorf("the server list %q has an empty entry: separate host:port pairs with single commas", servers)
		}
		c.serverList = append(c.serverList, s)
	}
	if c.sessionTimeout <= 0 {
		return fmt.Errorf("-session-timeout %v must be positive", c.sessionTimeout)
	}
	if c.connectTimeout <= 0 {
		return fmt.Errorf("-connect-timeout %v must be positive", c.connectTimeout)
	}
	var err error
	if c.tls, err = c.tlsFiles.config(); err != nil {
		return err
	}
	c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if c.verbose {
		c.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// connect opens a session, bounded by -connect-timeout and by ctx, whose
// deadline, if any, is the subcommand's limit (c.bound) on the whole run.
func (c *commonFlags) connect(ctx context.Context, extra ...zklock.Option) (*zklock.Client, error) {
	opts := []zklock.Option{zklock.WithSessionTimeout(c.sessionTimeout), zklock.WithLogger(c.log)}
	for _, a := range c.auth {
		opts = append(opts, zklock.WithAuth(a.scheme, a.cred))
	}
	if c.tls != nil {
		opts = append(opts, zklock.WithTLS(c.tls))
	}
	opts = append(opts, extra...)
	limit := fmt.Sprintf("-connect-timeout %v", c.connectTimeout)
	if d, ok := ctx.Deadline(); ok && c.bound != "" && time.Until(d) < c.connectTimeout {
		limit = c.bound
	}
	ctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	c.log.Debug("zklock: connecting", "servers", c.serverList)
	if c.progress != "" {
		defer c.sayStillConnecting(os.Stderr)()
	}
	client, err := zklock.Connect(ctx, c.serverList, opts...)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no ZooKeeper session within %s: check that ZooKeeper at %s is up and reachable (%s)",
				limit, strings.Join(c.serverList, ","), bare(err))
		}
		return nil, err
	}
	c.log.Debug("zklock: connected", "session", fmt.Sprintf("%#x", client.SessionID()))
	return client, nil
}

// sayStillConnecting writes to w, stillConnectingAfter from now and then
// every stillConnectingEvery, that zklock is still connecting, until the
// function it returns is called (which waits for its goroutine).
func (c *commonFlags) sayStillConnecting(w io.Writer) (stop func()) {
	start := time.Now()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(stillConnectingAfter)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				fmt.Fprintf(w, "zklock %s: still connecting to %s (%v)...\n",
					c.progress, strings.Join(c.serverList, ","), now.Sub(start).Round(time.Second))
				t.Reset(stillConnectingEvery)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// parseArgs parses a subcommand's arguments: flags, which may come before
// or after the positional arguments, then, after a "--", the command to
// run. A flag value of "--" must be written -flag=--.
func parseArgs(fs *flag.FlagSet, args []string) (positional, command []string, dashdash bool, err error) {
	flagArgs := args
	for i, a := range args {
		if a == "--" {
			flagArgs, command, dashdash = args[:i], args[i+1:], true
			break
		}
	}
	for {
		if err := fs.Parse(flagArgs); err != nil {
			return nil, nil, false, err
		}
		flagArgs = fs.Args()
		if len(flagArgs) == 0 {
			return positional, command, dashdash, nil
		}
		positional = append(positional, flagArgs[0])
		flagArgs = flagArgs[1:]
	}
}

// newFlagSet returns a subcommand's flag set, which reports nothing itself:
// the caller prints the usage or the error.
func newFlagSet(sub string) *flag.FlagSet {
	fs := flag.NewFlagSet("zklock "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFailed handles a flag parsing error: -h prints the usage and
// succeeds; anything else is a usage error.
func parseFailed(sub string, fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		printUsage(os.Stdout, sub, fs)
		return 0
	}
	return usageError(sub, "%v", err)
}

// printUsage prints a subcommand's usage text, then its flags.
func printUsage(w io.Writer, sub string, fs *flag.FlagSet) {
	fmt.Fprint(w, usages[sub])
	flags := 0
	fs.VisitAll(func(*flag.Flag) { flags++ })
	if flags == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// checkPath checks a lock path as the library will, before connecting, and
// adds a hint for the commonest slip.
func checkPath(p string) error {
	err := zklock.ValidatePath(p)
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "zklock: ") // the command says its own name
	if p != "" && p[0] != '/' {
		msg += ": a ZooKeeper path starts with /, e.g. /locks/" + strings.TrimLeft(p, "./")
	}
	return errors.New(msg)
}

const exitStatuses = `Exit status:
  the command's own   it ran to completion while holding (128+N if signal N killed it)
  123                 the lock was lost while the command ran; the command was sent
                      SIGTERM, then SIGKILL after -grace
  124                 could not lock: -timeout passed, -try found it taken, the path is
                      used otherwise (a semaphore of another size, another library's
                      semaphore), or zklock was interrupted (SIGINT, SIGTERM, SIGHUP)
                      while waiting
  125                 zklock itself failed: a usage error, no connection (also when
                      -timeout passed before a session was established, or TLS failed),
                      a ZooKeeper error (such as a path whose ACL refuses this client)
  126                 the command was found but could not be run
  127                 the command was not found
`

const environment = `The command runs with, in its environment:
  ZKLOCK_PATH    the lock path
  ZKLOCK_TOKEN   the fencing token (decimal): it strictly increases from one holder
                 to the next; pass it to what you protect so it can refuse stale writers
  ZKLOCK_NODE    the znode that holds
  ZKLOCK_NODES   every znode held, space-separated (several with -semaphore -n)
`

const mainUsage = `zklock runs a command while holding a ZooKeeper lock, or while leading an
election; it lists who holds a lock and who waits, and follows the holders
or the leader as they change. Its locks are Apache Curator's on the wire:
they exclude Curator's InterProcessMutex and InterProcessReadWriteLock on
the same path.

Usage:
  zklock lock    [flags] PATH -- COMMAND [ARG...]  run COMMAND while holding the lock PATH
  zklock elect   [flags] PATH -- COMMAND [ARG...]  run COMMAND while leading the election PATH
  zklock ls      [flags] PATH                      list who holds PATH and who waits, or the locks below PATH
  zklock observe [flags] PATH                      print every change of PATH's holders or leader
  zklock version                                   zklock's version and the Go it was built with
  zklock help    [COMMAND]                         this text, or a command's with its flags

The servers come from -servers or $ZKLOCK_SERVERS, a connect string as
ZooKeeper's Java client takes it (host:port,...; a host without a port means
ZooKeeper's 2181; a chroot after the last host, as in zk1:2181,zk2:2181/apps,
roots every PATH, and paths shown and ZKLOCK_NODE are relative to it).
The connection flags (-servers, -session-timeout, -connect-timeout, -auth,
-tls-ca, -tls-cert, -tls-key, -v) may come before the command as well as
after it: zklock -servers zk1:2181 ls /jobs is zklock ls -servers zk1:2181
/jobs; given on both sides, the one after the command wins.

Security: -tls-ca, -tls-cert and -tls-key (PEM files) connect over TLS, to
ZooKeeper's secureClientPort; the client certificate is zklock's identity
for ZooKeeper's x509 ACLs. -auth digest:user:pass authenticates for digest
ACLs. A lock path whose ACL does not let zklock create nodes is refused at
once (exit 125): the command does not run and nothing is left behind.

Examples:
  export ZKLOCK_SERVERS=zk1:2181,zk2:2181,zk3:2181
  zklock lock /jobs/backup -- /usr/local/bin/backup.sh
  zklock lock -try /jobs/backup -- /usr/local/bin/backup.sh   # skip if it runs elsewhere
  zklock elect /services/scheduler -- ./scheduler
  zklock ls /jobs/backup
  zklock ls /jobs                                  # every lock below /jobs: who waits where
  zklock observe /services/scheduler

` + exitStatuses + `
zklock ls exits 0 if it could list, 122 if PATH does not exist, 125 if it
could not list; zklock observe exits 0 when interrupted, 125 if it could
not connect or read PATH.
`

var usages = map[string]string{
	"lock": `Usage: zklock lock [flags] PATH -- COMMAND [ARG...]

Takes the lock PATH, runs COMMAND while holding it, then releases it. Waiters
are served first come, first served. By default the lock is a mutex; -read and
-write take a side of a read-write lock, and -semaphore MAX a lease of a
counting semaphore (at most MAX holders at once). -timeout bounds the whole
wait, connecting included.

A semaphore's nodes are zklock's own unless -layout says otherwise:
-layout curator takes part in Apache Curator's InterProcessSemaphoreV2 on
PATH, -layout kazoo in kazoo's Semaphore (one lease at a time), sharing
their leases: give the size that they were given.

COMMAND runs in a process group of its own (the terminal's foreground group
if zklock's was), with zklock's stdin, stdout and stderr, and is killed if
zklock is. If the lock is lost while it runs (the
ZooKeeper session expired or could not be confirmed in time, or someone
deleted the lock node), zklock sends the group SIGTERM, then SIGKILL after
-grace, and exits 123. SIGINT, SIGTERM and SIGHUP sent to zklock are passed on
to the command; while zklock waits for the lock they stop the wait (exit 124).

Examples:
  ZKLOCK_SERVERS=zk1:2181 zklock lock /jobs/backup -- /usr/local/bin/backup.sh
  zklock lock -timeout 5m /jobs/backup -- sh -c 'backup.sh --token "$ZKLOCK_TOKEN"'
  zklock lock -semaphore 3 /pools/db-migrations -- ./migrate.sh
  zklock lock -semaphore 2 -layout curator /pools/exports -- ./export.sh
  zklock lock -read /config -- ./render-config.sh

` + environment + "\n" + exitStatuses,

	"elect": `Usage: zklock elect [flags] PATH -- COMMAND [ARG...]

Campaigns in the election PATH (Apache Curator's LeaderLatch on the wire), runs
COMMAND once this process leads, and resigns when COMMAND exits, so that the
next candidate leads. If leadership is lost while COMMAND runs, zklock sends
its process group SIGTERM, then SIGKILL after -grace, and exits 123. Signals
and -timeout are handled as by zklock lock.

Examples:
  ZKLOCK_SERVERS=zk1:2181 zklock elect /services/scheduler -- ./scheduler
  while :; do zklock elect -data "$(hostname)" /services/scheduler -- ./scheduler; sleep 1; done

` + environment + "\n" + exitStatuses,

	"ls": `Usage: zklock ls [flags] PATH

Lists the participants of the lock or election PATH, in queue order: who holds
it, then who waits. It reads any lock path, whichever recipe or library made
it (zklock, Apache Curator, kazoo), Curator's InterProcessSemaphoreV2 and
kazoo's Semaphore too (their nodes under PATH/leases and PATH/locks, or
PATH-__lock__). AGE is how long ago each node was created: when its owner
queued, so a holder's AGE includes its wait. DATA is each node's data: the
owner's "host/pid" unless it set -data.

A PATH with no lock nodes of its own, such as a parent of several locks,
lists the lock paths below it instead, sorted: PATH, HOLDERS, WAITERS and
KIND (mutex, rwlock, semaphore, election, semaphore/curator,
semaphore/kazoo), one row each, so that you see which lock everyone waits
on. It reads at most -max-depth levels and -max-nodes nodes below PATH (not
into a lock's own nodes, nor /zookeeper), and says on stderr if that cut
the listing. PATH may be / for the whole tree. So:
  - a lock path: its participants;
  - a PATH with lock paths below it: one row per lock path;
  - a PATH with no lock path at or below it (nobody holds: an idle lock, or
    no children at all): the empty table, exit 0;
  - a PATH that does not exist: said on stderr, exit 122.

With -watch, it prints the list of PATH's participants again after every
change (a participant came, went, or now holds), until interrupted (SIGINT
or SIGTERM: exit 0), following PATH as a lock path even before it exists;
with -json, each list is one line. If the connection to ZooKeeper is lost
and back, it says so on stderr. ls and ls -watch say on stderr every few
seconds while they are still connecting.

Examples:
  ZKLOCK_SERVERS=zk1:2181 zklock ls /jobs/backup
  zklock ls /jobs
  zklock ls -json /jobs/backup | jq -r '.[] | select(.holder) | .data'
  zklock ls -json /jobs | jq -r '.[] | select(.waiters > 0) | .path'
  zklock ls -watch /jobs/backup

Exit status: 0 if it could list (with -watch: until interrupted), 122 if
PATH does not exist, 125 if it could not list.
`,

	"observe": `Usage: zklock observe [flags] PATH

Prints the holders of the lock PATH, or the leader of the election PATH, then
every change of them, one line each, until interrupted (SIGINT or SIGTERM:
exit 0). A line has the time, the word "leader" (an election) or "holders"
(a lock of any kind), then each holder's data and node, or "none" when
nobody holds. The same holders are never printed twice in a row. With -json,
each line is a JSON object instead.

PATH is an election if it has a candidate's node (Curator LeaderLatch's
"-latch-") or if -election is given; zklock then follows the leader with
the library's Election.Observe, which watches the leader's node only. Any
other PATH is watched as a lock: its children, and who of them holds by
each node's kind (as zklock ls decides). A PATH that has no node yet is
watched as a lock until a candidate's node appears.

It reads Curator's InterProcessSemaphoreV2 and kazoo's Semaphore too (their
holders are lease nodes under PATH/leases, or directly under PATH).

ZooKeeper keeps no history: holders that come and go between two reads (a
round trip) are not printed; the state after them is. While the connection
is down the last line stands, and stderr says so ("connection to ZooKeeper
lost; retrying", then "connected again to host:port"); zklock reads again
once it is back. While it first connects, it says on stderr every few
seconds that it is still connecting.

Examples:
  ZKLOCK_SERVERS=zk1:2181 zklock observe /services/scheduler
  zklock observe -json /jobs/backup | jq -r '.holders[0].data // "none"'

Exit status: 0 when interrupted, 125 if it could not connect or read PATH.
`,

	"version": `Usage: zklock version

Prints zklock's module version ("(devel)" for a build from a checkout, with
its VCS revision if known), the Go version it was built with, and the
platform.
`,
}
