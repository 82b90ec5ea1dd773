package session

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/cenkalti/backoff/v4"
)

// janitor deletes our nodes that must go and that nobody else will delete (of
// an abandoned acquire, a lease lost to a disconnect, a release out of time),
// with backoff while their session lives: once it has ended, the server has
// deleted them (they are ephemeral). One of a [Session]'s two goroutines.
type janitor struct {
	c *Session

	mu               sync.Mutex
	jobs             []Job // oldest first
	kick, stop, done chan struct{}
}

// Job is a set of our nodes that must go, and the session that owns them.
type Job struct {
	Nodes []string
	// Then are nodes deleted only once every one of the job's nodes (Nodes,
	// or those Prefix names) is gone: a lease's extras ([Hold.Attach]).
	Then    []string
	Session int64
	// Parent and Prefix, when set, name the nodes instead: every child of
	// Parent whose name starts with Prefix (a create whose reply was lost
	// leaves a node known only by its protected id), but those in Except
	// (nodes another job deletes, after its grant's fire).
	Parent, Prefix string
	Except         []string
	// Grant, with one node, is a grant watch of ours to fire before the
	// node is deleted ([janitor.fire]), and Heard the watch's channel
	// (required with Grant: the node stays until it has its event).
	Grant string
	Heard <-chan Event

	unheard int // fires of Grant that went through unheard ([janitor.fire])
}

// rest is what is left of jb to retry after d: its nodes left, named, and
// one more unheard fire if that is why.
func (jb Job) rest(d deletion) Job {
	r := Job{Nodes: d.left, Then: d.then, Session: jb.Session, Grant: jb.Grant, Heard: jb.Heard, unheard: jb.unheard}
	if d.retry == errUnheard {
		r.unheard++
	}
	return r
}

func newJanitor(c *Session) *janitor {
	j := &janitor{c: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go j.run()
	return j
}

// discard deletes jb's nodes now if it can, else queues them. It does I/O:
// never call it from the connection's Event callback (use enqueue).
func (j *janitor) discard(jb Job) {
	if len(jb.Nodes) == 0 && len(jb.Then) == 0 && jb.Prefix == "" {
		return
	}
	if j.c.State().Connected {
		d := j.delete(jb)
		if d.retry == nil || j.c.Classify(d.retry) == Closing {
			return // what failed for good was logged
		}
		if d.left != nil {
			jb = jb.rest(d)
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

// wake has the goroutine look at its queue again (a new job, a state
// change). It never blocks.
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
			select {
			case <-j.stop:
				return
			case <-j.kick:
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
		level := slog.LevelWarn
		if d.retry == errUnheard { // not a failure: the watches are on their way
			level = slog.LevelDebug
		}
		j.c.log.Log(context.Background(), level, "zklock: cleanup will retry", "nodes", jb.Nodes, "prefix", jb.Prefix, "err", d.retry, "in", wait)
		if !sleep(j.stop, wait) {
			return
		}
	}
}

// next returns the oldest job, if any and the session is connected. It
// reads the state before j.mu: c.mu is taken before j.mu elsewhere.
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

// settle drops the oldest job if d finishes it (what failed for good was
// logged, nobody's to retry), else keeps only d.left; true: dropped.
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
		j.jobs[0] = j.jobs[0].rest(d)
	}
	return false
}

// delete deletes jb's nodes, first finding them if it names them by prefix.
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
		if nodes, d = j.find(zc, jb); nodes == nil && (len(jb.Then) == 0 || d.retry != nil || d.failed != nil) {
			return d // none found, or the listing failed (Then waits with the job)
		}
	}
	// In another session too (ours was swapped): the fire checks the node,
	// not the session, and go-zookeeper set our watches again in it.
	if jb.Grant != "" && len(nodes) == 1 {
		if d, fired := j.fire(zc, jb, nodes[0]); !fired {
			return d
		}
	}
	return j.c.deleteThen(zc, nodes, jb.Then, jb.Session)
}

// maxUnheard bounds the fires of a grant that go through unheard before
// its node is deleted all the same ([janitor.fire]).
const maxUnheard = 8

// errUnheard: a fire of a grant watch went through, and the watch did not
// hear it ([janitor.fire]).
var errUnheard = errors.New("zklock: the grant watch did not hear its fire; the watches are being set again")

// fire fires jb's grant watch, with a check that node (ours) exists
// ([Door.Fire]), before node is deleted. fired: delete node now (the
// watch heard it, or the fire failed for good); else d says why not.
//
// Why the watch must hear it first. Once node is gone nobody may fire the
// grant (zklock's handoff.go: a fire needs its firer's node), so a watch
// still to be set would stay for the session's life. And it may be still
// to be set: after a reconnect go-zookeeper sets the session's watches
// again from a goroutine of its own (conn.go, sendSetWatches), so a
// request queued before it (ours, sent as the connection comes back)
// reaches the server first; the fire then tells nobody, and the late
// setWatches sets the watch again on the missing grant
// (DataTree.setWatches adds an exists watch on a missing path). A watch
// that heard the fire is gone: its notification comes before the fire's
// reply (one connection, in zxid order; go-zookeeper hands an event to its
// channel before it reads the next reply). Until it hears one, node stays
// and the fire is tried again (safe: the check); the setWatches is on its
// way. TestGiveUpAtAReconnectLeavesNoWatch.
//
// Unless it never comes: a setWatches the server refused, which
// go-zookeeper only logs (conn.go, "Failed to set previous watches"),
// leaves the watch in its map and not on the server. After maxUnheard
// fires (about five seconds with the default backoff; go-zookeeper sends
// setWatches as it connects) the node is deleted all the same: a watch may
// then come back at a later reconnect, but a node kept would hold up every
// waiter behind it.
// TestFakeHandoffGiveUpWithTheWatchesLost.
func (j *janitor) fire(zc Conn, jb Job, node string) (d deletion, fired bool) {
	err := zc.Fire(node, jb.Grant, j.c.ACL)
	switch {
	case err == nil && Heard(jb.Heard):
		return deletion{}, true
	case err == nil && jb.unheard >= maxUnheard:
		j.c.log.Warn("zklock: the grant watch of an abandoned wait never heard its fire; its node is deleted, and the watch may stay until the session ends",
			"node", node, "grant", jb.Grant)
		return deletion{}, true
	case err == nil:
		return deletion{left: []string{node}, retry: errUnheard}, false
	case GoneAt(err, node):
		// Gone before us (someone else deleted it): nobody may fire the
		// grant now, so the watch stays until the predecessor grants or
		// the session ends (docs/model.md, "A finding").
		j.c.log.Info("zklock: a waiting node was deleted by someone else; its watch on the predecessor's grant stays until that grant or the session's end",
			"node", node, "grant", jb.Grant)
		return deletion{}, false
	case classify(err) == Retry || classify(err) == Closing:
		return deletion{left: []string{node}, retry: err}, false
	}
	return deletion{}, true // it cannot be fired: delete node as any other
}

// Heard reports whether a watch's channel has had its event (go-zookeeper
// closes it after it), without waiting: after a request's reply, an event
// the server sent before it (zklock's participant.disarm, [janitor.fire]).
func Heard(ch <-chan Event) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// find lists the nodes a prefix job names, after a sync. nil: none, or the
// listing failed, as d says (d.retry: retry the whole job).
//
// The sync must succeed. The create's reply was lost, so its zxid never
// reached us and the connect's LastZxidSeen (zxid.go) cannot keep us off a
// server that has not applied it: a lagging follower, or one just synced with
// a new leader (Learner.syncWithLeader serves before it commits the sync's
// proposals). A read there finds nothing, the create is applied later, and
// its node heads its queue in a live session: nobody gets the lock until that
// session ends. A successful sync has the server catch up with the leader
// (Leader.processSync answers once the proposals it sent are committed),
// which by then has our create or never applies it (it came via a server our
// session left before sending the sync: PrepRequestProcessor's checkSession
// refuses it as SessionMoved). Its reply carries the server's zxid, which the
// wire keeps, so a read on any later connection is of a server at least as
// new. A failed sync proves nothing: the next read may go, on a new
// connection, to a lagging server. TestFakeLostCreateAppliedLate.
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
		if node := jb.Parent + "/" + n; strings.HasPrefix(n, jb.Prefix) && !slices.Contains(jb.Except, node) {
			nodes = append(nodes, node)
		}
	}
	return nodes, deletion{}
}

// deletion is what deleting a set of nodes left behind.
type deletion struct {
	// left: nodes not deleted for a reason that may pass (a dropped
	// connection), to retry while their session lasts; retry is the error
	// of the first.
	left  []string
	then  []string // what must wait for left to go first (Job.Then)
	retry error
	// failed: a *NodeError naming the first node that cannot be deleted,
	// whatever is tried (no auth, a bad ACL). It stays the session's until
	// the session ends; nobody tries it again.
	failed error
}

// NodeError is the failure to delete one node.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return "delete " + e.Node + ": " + e.Err.Error() }
func (e *NodeError) Unwrap() error { return e.Err }

// deleteAllOwned deletes session's nodes, then those of then, in one
// multi-op when there are several, so a [MultiLock] frees its paths in one
// transaction; if that fails (one gone or undeletable, a dropped
// connection), via deleteThen.
func (c *Session) deleteAllOwned(zc Conn, nodes, then []string, session int64) deletion {
	all := nodes
	if len(then) > 0 {
		all = append(slices.Clip(nodes), then...)
	}
	if len(all) > 1 && zc.SessionID() == session && zc.DeleteAll(all) == nil {
		return deletion{}
	}
	return c.deleteThen(zc, nodes, then, session)
}

// deleteThen deletes nodes as deleteOwned does, then, once every one of
// them is gone, those of then; else then waits (d.then) behind the nodes
// left to retry, or, behind a node that cannot be deleted, stays with it
// until the session ends (closeSession deletes all of a session's
// ephemerals in one transaction: DataTree.killSession). So a lease's
// extra is never deleted while its node exists ([Hold.Attach]).
func (c *Session) deleteThen(zc Conn, nodes, then []string, session int64) deletion {
	d := c.deleteOwned(zc, nodes, session)
	switch {
	case len(then) == 0:
		return d
	case d.failed != nil:
		c.log.Warn("zklock: nodes stay with a node that cannot be deleted, until the session ends", "nodes", then)
		return d
	case d.left != nil:
		d.then = then
		return d
	}
	return c.deleteOwned(zc, then, session)
}

// deleteOwned deletes each of session's nodes whatever becomes of the
// others, as Curator's InterProcessMultiLock.release releases every lock
// before it throws the first failure: an undeletable node must not keep a
// lease's other nodes (a MultiLock's paths) locked until the session ends.
// Nodes gone already, or with their session, are fine.
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
