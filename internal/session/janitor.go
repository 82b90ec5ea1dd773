package session

import (
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// janitor deletes the nodes of ours that must go and that nobody else will
// delete: the nodes of an abandoned acquire, of a lease lost to a
// disconnect, of a release that could not finish in time. It keeps trying,
// with backoff, while the session that owns the nodes lives; once that
// session has ended the server has deleted them (they are ephemeral), and
// the job is done. It is one of the two goroutines of a [Session].
type janitor struct {
	c *Session

	mu   sync.Mutex
	jobs []Job // oldest first
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// job is a set of our nodes that must go, and the session that owns them.
type Job struct {
	Nodes   []string
	Session int64
	// parent and prefix, when set, name the nodes instead: every child of
	// parent whose name starts with prefix. A create whose reply was lost
	// leaves a node whose name nobody knows but its protected id.
	Parent, Prefix string
}

func newJanitor(c *Session) *janitor {
	j := &janitor{c: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go j.run()
	return j
}

// discard deletes job's nodes now if it can, and otherwise queues them for
// the janitor's goroutine. It does I/O: never call it from the connection's
// Event callback (use enqueue).
func (j *janitor) discard(jb Job) {
	if len(jb.Nodes) == 0 && jb.Prefix == "" {
		return
	}
	if j.c.State().Connected {
		switch err := j.delete(jb); j.c.Classify(err) {
		case Done, Closing:
			return
		case Permanent, Gone:
			j.c.log.Warn("zklock: delete abandoned node", "nodes", jb.Nodes, "prefix", jb.Prefix, "err", err)
			return
		}
	}
	j.enqueue(jb)
}

// enqueue hands job to the janitor's goroutine. It never blocks.
func (j *janitor) enqueue(jb Job) {
	j.mu.Lock()
	select {
	case <-j.stop:
	default:
		j.jobs = append(j.jobs, jb)
	}
	j.mu.Unlock()
	j.wake()
}

// wake makes the goroutine look at its queue again (the session's state
// changed, or there is a new job). It never blocks.
func (j *janitor) wake() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// close stops the goroutine, drops what is queued (the session is ending,
// and its nodes with it) and waits for the goroutine to exit.
func (j *janitor) close() {
	j.mu.Lock()
	j.jobs = nil
	close(j.stop)
	j.mu.Unlock()
	<-j.done
}

func (j *janitor) run() {
	defer close(j.done)
	var b backoff.BackOff
	for {
		jb, ok := j.next()
		if !ok {
			if !j.idle() {
				return
			}
			continue
		}
		err := j.delete(jb)
		if j.settle(jb, err) {
			b = nil
			continue
		}
		if b == nil {
			b = j.c.newBackOff()
		}
		d := b.NextBackOff()
		j.c.log.Warn("zklock: cleanup will retry", "nodes", jb.Nodes, "prefix", jb.Prefix, "err", err, "in", d)
		if !j.pause(d) {
			return
		}
	}
}

// next returns the oldest job, if there is one and the session is
// connected to do it. (The Session's mutex is taken before the janitor's
// elsewhere, so never while holding j.mu.)
func (j *janitor) next() (Job, bool) {
	if !j.c.State().Connected {
		return Job{}, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.jobs) == 0 {
		return Job{}, false
	}
	return j.jobs[0], true
}

// idle waits for a kick; it reports false once the janitor must stop.
func (j *janitor) idle() bool {
	select {
	case <-j.stop:
		return false
	case <-j.kick:
		return true
	}
}

// settle drops the oldest job if the delete's err says it is done, or
// that trying again cannot help (logged), and reports that it did.
func (j *janitor) settle(jb Job, err error) bool {
	o := j.c.Classify(err)
	if o == Retry {
		return false
	}
	if o != Done && o != Closing {
		j.c.log.Warn("zklock: cleanup gave up", "nodes", jb.Nodes, "prefix", jb.Prefix, "err", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.jobs) > 0 { // only close empties the queue otherwise
		j.jobs = j.jobs[1:]
	}
	return true
}

// pause waits d (a second if the backoff says stop), or until the janitor
// is stopped: then it reports false.
func (j *janitor) pause(d time.Duration) bool {
	if d == backoff.Stop {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-j.stop:
		return false
	case <-t.C:
		return true
	}
}

// delete deletes the nodes of jb, finding them first if it names them by
// prefix. It returns nil once they are gone, or gone with their session.
func (j *janitor) delete(jb Job) error {
	zc := j.c.Conn()
	if zc.SessionID() != jb.Session {
		return nil // the server deleted them when the session ended
	}
	nodes := jb.Nodes
	if jb.Prefix != "" {
		_ = zc.Sync(jb.Parent) // see what the leader has
		names, err := zc.Children(jb.Parent)
		if j.c.Classify(err) == Gone {
			return nil
		}
		if err != nil {
			return err
		}
		nodes = nil
		for _, n := range names {
			if strings.HasPrefix(n, jb.Prefix) {
				nodes = append(nodes, jb.Parent+"/"+n)
			}
		}
	}
	return deleteOwned(zc, nodes, jb.Session)
}

// deleteAllOwned deletes nodes owned by session, in one multi-operation
// when there are several, so that a [MultiLock] frees all its paths in one
// transaction; if that fails (one is gone already, the connection dropped),
// it deletes them one by one with deleteOwned.
func deleteAllOwned(zc Conn, nodes []string, session int64) error {
	if len(nodes) > 1 && zc.SessionID() == session && zc.DeleteAll(nodes) == nil {
		return nil
	}
	return deleteOwned(zc, nodes, session)
}

// deleteOwned deletes nodes owned by session. Nodes already gone, or gone
// with their session, are fine.
func deleteOwned(zc Conn, nodes []string, session int64) error {
	for _, n := range nodes {
		if zc.SessionID() != session {
			return nil // the server deleted them when the session ended
		}
		err := zc.Delete(n)
		switch classify(err) { // Closing: the caller's Session.Classify sorts it out
		case Done, Gone:
			continue
		case Retry:
			if zc.SessionID() != session {
				return nil
			}
		}
		return err
	}
	return nil
}
