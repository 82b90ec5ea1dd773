package session

import (
	"strings"
	"sync"

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

	mu               sync.Mutex
	jobs             []Job // oldest first
	kick, stop, done chan struct{}
}

// Job is a set of our nodes that must go, and the session that owns them.
type Job struct {
	Nodes   []string
	Session int64
	// parent and prefix, when set, name the nodes instead: every child of
	// parent whose name starts with prefix. A create whose reply was lost
	// leaves a node whose name nobody knows but its protected id.
	Parent, Prefix string
	// Grant, with one node, is a grant to fire as the node is deleted
	// ([Door.HandOff]): the exists watch a waiter leaves on its
	// predecessor's grant (handoff.go in the zklock package). If that
	// request fails, the node is deleted as any other.
	Grant string
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
		d := j.delete(jb)
		if d.retry == nil || j.c.Classify(d.retry) == Closing {
			return // what failed for good was logged
		}
		if d.left != nil {
			jb = Job{Nodes: d.left, Session: jb.Session, Grant: jb.Grant}
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
		d := j.delete(jb)
		if j.settle(d) {
			b = nil
			continue
		}
		if b == nil {
			b = j.c.newBackOff()
		}
		wait := b.NextBackOff()
		j.c.log.Warn("zklock: cleanup will retry", "nodes", jb.Nodes, "prefix", jb.Prefix, "err", d.retry, "in", wait)
		if !sleep(j.stop, wait) {
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

// settle drops the oldest job if the delete d says it is done (what
// failed for good was logged and is nobody's to retry), or keeps only the
// nodes left to try again, and reports whether it dropped it.
func (j *janitor) settle(d deletion) bool {
	done := d.retry == nil || j.c.Classify(d.retry) == Closing
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.jobs) == 0 { // only close empties the queue otherwise
		return true
	}
	if done {
		j.jobs = j.jobs[1:]
		return true
	}
	if d.left != nil { // else a prefix job whose listing failed: as it was
		j.jobs[0] = Job{Nodes: d.left, Session: j.jobs[0].Session, Grant: j.jobs[0].Grant}
	}
	return false
}

// delete deletes the nodes of jb, finding them first if it names them by
// prefix.
func (j *janitor) delete(jb Job) deletion {
	zc := j.c.Conn()
	if zc.SessionID() != jb.Session {
		if replaced, unsettled := j.c.sessionFate(jb.Session); !replaced && !unsettled {
			return deletion{} // the server deleted them when the session ended
		}
	}
	nodes := jb.Nodes
	if jb.Prefix != "" {
		var d deletion
		if nodes, d = j.find(zc, jb); nodes == nil {
			return d
		}
	}
	if jb.Grant != "" && len(nodes) == 1 && zc.SessionID() == jb.Session {
		err := zc.HandOff(nodes[0], jb.Grant, j.c.ACL(jb.Grant))
		switch {
		case err == nil || GoneAt(err, nodes[0]):
			return deletion{}
		case classify(err) == Retry || classify(err) == Closing:
			// Try the handoff again, grant and all: a plain delete now
			// would leave the watch on the grant for the session's life.
			var d deletion
			d.later(err, nodes...)
			return d
		}
	}
	return j.c.deleteOwned(zc, nodes, jb.Session)
}

// find lists the nodes a prefix job names, after a sync. nil: none, or
// the listing failed, as d says (d.retry: try the whole job again).
//
// Why the sync must succeed: the job is for a create whose reply was lost,
// so its zxid never reached us, and the connect request's LastZxidSeen
// (zxid.go) cannot keep us off a server that has not applied
// it yet: a follower that lags, or one just synced with a new leader
// (Learner.syncWithLeader starts serving before it commits the proposals
// of the sync). A read there finds nothing, the create is applied later,
// and its node stays, in a live session, at the head of its queue: nobody
// takes the lock until that session ends. A sync that succeeds has the
// server catch up with the leader (Leader.processSync answers once the
// proposals it has sent are committed), and the leader has our create by
// then or never applies it (it came through a server our session has left
// before the sync was sent: PrepRequestProcessor's checkSession refuses
// it as SessionMoved). The sync's reply carries the server's zxid, which
// the wire keeps, so a read on any later connection is of a server at
// least as new. A sync that failed proves nothing: the read after it may
// go out on a new connection, to a server that lags. TestFakeLostCreateAppliedLate.
func (j *janitor) find(zc Conn, jb Job) ([]string, deletion) {
	err := zc.Sync(jb.Parent)
	var names []string
	if err == nil {
		names, err = zc.Children(jb.Parent)
	}
	switch j.c.Classify(err) {
	case Done:
	case Gone:
		return nil, deletion{}
	case Retry, Closing:
		return nil, deletion{retry: err}
	default:
		j.c.log.Warn("zklock: cleanup gave up", "parent", jb.Parent, "prefix", jb.Prefix, "err", err)
		return nil, deletion{failed: err}
	}
	var nodes []string
	for _, n := range names {
		if strings.HasPrefix(n, jb.Prefix) {
			nodes = append(nodes, jb.Parent+"/"+n)
		}
	}
	return nodes, deletion{}
}

// deletion is what deleting a set of nodes left behind.
type deletion struct {
	// left: nodes not deleted for a reason that may pass (the connection
	// dropped): to be tried again, while their session lasts.
	left []string
	// retry is the error of the first of left.
	retry error
	// failed is the first node that cannot be deleted, whatever is tried
	// (no auth, a bad ACL): a *NodeError naming it. Such a node stays
	// the session's until the session ends; nobody tries it again.
	failed error
}

// NodeError is the failure to delete one node.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return "delete " + e.Node + ": " + e.Err.Error() }
func (e *NodeError) Unwrap() error { return e.Err }

// deleteAllOwned deletes nodes owned by session, in one multi-operation
// when there are several, so that a [MultiLock] frees all its paths in one
// transaction; if that fails (one is gone already, one may not be deleted,
// the connection dropped), it deletes them one by one with deleteOwned.
func (c *Session) deleteAllOwned(zc Conn, nodes []string, session int64) deletion {
	if len(nodes) > 1 && zc.SessionID() == session && zc.DeleteAll(nodes) == nil {
		return deletion{}
	}
	return c.deleteOwned(zc, nodes, session)
}

// deleteOwned deletes nodes owned by session, each one whatever becomes
// of the others: a node that may not be deleted must not keep a lease's
// other nodes (a MultiLock's other paths) locked until the session ends,
// as Curator's InterProcessMultiLock.release releases every lock before it
// throws the first failure. Nodes already gone, or gone with their
// session, are fine. Each node that fails for good is logged, with why.
func (c *Session) deleteOwned(zc Conn, nodes []string, session int64) deletion {
	var d deletion
	for i, n := range nodes {
		if zc.SessionID() != session {
			return c.sessionLeft(zc, nodes[i:], session, d)
		}
		err := zc.Delete(n)
		switch classify(err) { // Closing too: the caller's Session.Classify sorts it out
		case Done, Gone:
		case Retry, Closing:
			if r, u := c.sessionFate(session); zc.SessionID() == session || r || u {
				d.later(err, n)
			}
		default:
			c.log.Warn("zklock: node cannot be deleted; it stays until its session ends", "node", n, "err", err)
			d.fail(n, err)
		}
	}
	return d
}

// later leaves nodes to try again, for err.
func (d *deletion) later(err error, nodes ...string) {
	d.left = append(d.left, nodes...)
	if d.retry == nil {
		d.retry = err
	}
}

// fail records node as one that cannot be deleted, for err.
func (d *deletion) fail(node string, err error) {
	if d.failed == nil {
		d.failed = &NodeError{Node: node, Err: err}
	}
}
