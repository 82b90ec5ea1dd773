package session_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// faults is a script of the fake's answers: an op named name on path, at
// its n-th time (from 1), fails with err, or waits for the gate first if
// err is nil. Every op is logged.
type faults struct {
	log   opLog
	gate  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	seen  map[string]int
	rules []rule
}

type rule struct {
	name, path string
	from, to   int // the times it applies, inclusive
	err        error
}

func newFaults(t *testing.T, f *zkfake.Server, rules ...rule) *faults {
	fs := &faults{gate: make(chan struct{}), seen: map[string]int{}, rules: rules}
	f.SetHooks(zkfake.Hooks{Before: fs.before})
	t.Cleanup(fs.open) // before the Session's Close, which waits for what the gate holds
	return fs
}

func (fs *faults) before(op zkfake.Op) error {
	fs.log.add(op)
	if len(op.Paths) != 1 {
		return nil
	}
	key := op.Name + " " + op.Paths[0]
	fs.mu.Lock()
	fs.seen[key]++
	n := fs.seen[key]
	fs.mu.Unlock()
	for _, r := range fs.rules {
		if r.name == op.Name && r.path == op.Paths[0] && n >= r.from && n <= r.to {
			if r.err != nil {
				return r.err
			}
			<-fs.gate
		}
	}
	return nil
}

// open lets what the gate holds go on, once and for all.
func (fs *faults) open() { fs.once.Do(func() { close(fs.gate) }) }

const forever = 1 << 30

func jobsOf(s *session.Session) string { return fmt.Sprintf("%+v", s.JanitorJobs()) }

// A Discard whose delete meets a connection loss queues the nodes left for
// the janitor (and only them); one that deleted everything queues nothing.
func TestDiscardQueuesOnlyWhatALossLeft(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/j/a", "/j/b", "/j/c")
	fs := newFaults(t, f,
		rule{"Delete", "/j/a", 1, 1, zk.ErrConnectionClosed},
		rule{"Delete", "/j/a", 2, forever, nil}, // the janitor's: held until the gate opens
		rule{"Delete", "/j/c", 2, forever, nil}, // a second delete of c: held
	)
	s.Discard(session.Job{Nodes: []string{"/j/a", "/j/b"}, Session: s.ID()})
	if f.Exists("/j/b") {
		t.Fatal("Discard left a node it could delete")
	}
	if got, want := jobsOf(s), fmt.Sprintf("%+v", []session.Job{{Nodes: []string{"/j/a"}, Session: s.ID()}}); got != want {
		t.Fatalf("after a connection loss, the janitor has %s, want %s", got, want)
	}
	fs.open()
	eventually(t, func() bool { return !f.Exists("/j/a") && len(s.JanitorJobs()) == 0 }, "the janitor deletes what is left")

	s.Discard(session.Job{Nodes: []string{"/j/c"}, Session: s.ID()})
	if f.Exists("/j/c") {
		t.Fatal("Discard left a node it could delete")
	}
	if jobs := s.JanitorJobs(); len(jobs) != 0 {
		t.Fatalf("a Discard that deleted its nodes queued %+v for the janitor", jobs)
	}
}

// A Discard of nodes named by prefix whose listing meets a connection loss
// queues the job as it was; the janitor's own listing that meets one keeps
// it as it was too: the janitor lists the parent again.
func TestDiscardQueuesAPrefixJobWhole(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/p/_c_x-lock-1", "/p/_c_y-lock-2")
	fs := newFaults(t, f,
		rule{"Children", "/p", 1, 1, zk.ErrConnectionClosed}, // Discard's
		rule{"Children", "/p", 2, 2, nil},                    // the janitor's: held, then...
		rule{"Children", "/p", 2, 2, zk.ErrConnectionClosed}, // ...failed: it lists again
	)
	job := session.Job{Parent: "/p", Prefix: "_c_x-", Session: s.ID()}
	s.Discard(job)
	if got, want := jobsOf(s), fmt.Sprintf("%+v", []session.Job{job}); got != want {
		t.Fatalf("the janitor has %s, want %s", got, want)
	}
	fs.open()
	eventually(t, func() bool { return !f.Exists("/p/_c_x-lock-1") }, "the janitor deletes the node of the prefix")
	if !f.Exists("/p/_c_y-lock-2") {
		t.Fatal("the janitor deleted a node of another prefix")
	}
}

// A prefix job leaves the nodes it excepts: another job deletes them,
// after their grant's fire (zklock's participant.abandon).
func TestDiscardPrefixSparesItsExceptions(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/p/_c_x-lock-1", "/p/_c_x-lock-2", "/p/_c_y-lock-3")
	s.Discard(session.Job{Parent: "/p", Prefix: "_c_x-", Except: []string{"/p/_c_x-lock-2"}, Session: s.ID()})
	if f.Exists("/p/_c_x-lock-1") {
		t.Fatal("the prefix job left a node of its prefix")
	}
	if !f.Exists("/p/_c_x-lock-2") || !f.Exists("/p/_c_y-lock-3") {
		t.Fatal("the prefix job deleted a node it excepts, or one of another prefix")
	}
}

// countingBackOff is a backoff of a millisecond whose calls are counted.
type countingBackOff struct {
	mu    *sync.Mutex
	calls *int
}

func (b countingBackOff) NextBackOff() time.Duration {
	b.mu.Lock()
	*b.calls++
	b.mu.Unlock()
	return time.Millisecond
}

func (countingBackOff) Reset() {}

// backOffs records the backoffs a Session made and their calls.
type backOffs struct {
	mu    sync.Mutex
	calls []*int
}

func (bs *backOffs) make() backoff.BackOff {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	n := new(int)
	bs.calls = append(bs.calls, n)
	return countingBackOff{&bs.mu, n}
}

func (bs *backOffs) String() string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var out []int
	for _, n := range bs.calls {
		out = append(out, *n)
	}
	return fmt.Sprint(out)
}

// The janitor's retries of one job back off: one backoff, whose intervals
// grow, for the failures in a row; after a success the next failure starts
// a fresh one.
func TestJanitorBacksOff(t *testing.T) {
	f := zkfake.New()
	var bs backOffs
	s := openFake(t, f, func(o *session.Options) { o.NewBackOff = bs.make })
	makeNodes(t, s, "/b/a", "/b/b")
	newFaults(t, f,
		rule{"Delete", "/b/a", 1, 4, zk.ErrConnectionClosed}, // Discard's, then three of the janitor's
		rule{"Delete", "/b/b", 1, 2, zk.ErrConnectionClosed}, // Discard's, then one of the janitor's
	)
	s.Discard(session.Job{Nodes: []string{"/b/a"}, Session: s.ID()})
	eventually(t, func() bool { return !f.Exists("/b/a") }, "the janitor deletes a")
	s.Discard(session.Job{Nodes: []string{"/b/b"}, Session: s.ID()})
	eventually(t, func() bool { return !f.Exists("/b/b") }, "the janitor deletes b")
	if got := bs.String(); got != "[3 1]" {
		t.Fatalf("backoffs made, by their calls: %s, want [3 1]: one for each run of failures", got)
	}
}

// A job the janitor deleted in part before a connection loss keeps the
// rest, in the job's own session, and nothing it deleted already.
func TestJanitorKeepsTheRestInItsSession(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/r/a", "/r/b", "/r/s")
	fs := newFaults(t, f, rule{"Delete", "/r/b", 1, 1, zk.ErrConnectionClosed})
	conn := fakeConn(t, f, s)
	conn.Disconnect()
	eventually(t, func() bool { return !s.State().Connected }, "the session sees the connection down")
	s.Discard(session.Job{Nodes: []string{"/r/a", "/r/b"}, Session: s.ID()})
	s.Discard(session.Job{Nodes: []string{"/r/s"}, Session: s.ID()}) // queued behind
	if n := len(s.JanitorJobs()); n != 2 {
		t.Fatalf("discarded while disconnected: %d jobs queued, want 2", n)
	}
	conn.Reconnect()
	eventually(t, func() bool { return !f.Exists("/r/s") }, "the janitor reaches the second job")
	if f.Exists("/r/b") {
		t.Fatal("the node left by a connection loss was dropped")
	}
	if n := fs.log.count("Delete", "/r/a"); n != 1 {
		t.Fatalf("a node deleted before the connection loss was deleted %d times", n)
	}
}

// A job whose parent is gone is done (its nodes went with it): the janitor
// moves on to the next.
func TestJanitorMovesPastAJobWhoseParentIsGone(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/mp/s")
	conn := fakeConn(t, f, s)
	conn.Disconnect()
	eventually(t, func() bool { return !s.State().Connected }, "the session sees the connection down")
	s.Discard(session.Job{Parent: "/mp/gone", Prefix: "_c_x-", Session: s.ID()})
	s.Discard(session.Job{Nodes: []string{"/mp/s"}, Session: s.ID()})
	conn.Reconnect()
	eventually(t, func() bool { return !f.Exists("/mp/s") }, "the janitor reaches the job behind")
}

// Closing the Session while the janitor is deleting ends the janitor
// cleanly: the job it was at is dropped with the rest of the queue.
func TestJanitorStopsCleanlyMidJob(t *testing.T) {
	f := zkfake.New()
	s := openFake(t, f)
	makeNodes(t, s, "/sc/a")
	fs := newFaults(t, f,
		rule{"Delete", "/sc/a", 1, 1, zk.ErrConnectionClosed}, // Discard's
		rule{"Delete", "/sc/a", 2, 2, nil},                    // the janitor's: held
	)
	s.Discard(session.Job{Nodes: []string{"/sc/a"}, Session: s.ID()})
	eventually(t, func() bool { return fs.log.count("Delete", "/sc/a") == 2 }, "the janitor's delete, held")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	eventually(t, func() bool { return len(s.JanitorJobs()) == 0 }, "Close drops the janitor's queue")
	fs.open()
	select {
	case err := <-closed:
		must(t, err, "close")
	case <-time.After(long):
		t.Fatal("Close did not return once the janitor's delete did")
	}
}
