package session

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// A chroot roots every path the Session's users name: "/locks/a" under the
// chroot "/apps/billing" is "/apps/billing/locks/a" on the server, and every
// path that comes back (a created node's name, a gone node, an event's path)
// comes back relative to it, as with ZooKeeper's Java client (ClientCnxn's
// chroot, stripped from created names and event paths) and kazoo.
// go-zookeeper has none, so the Session puts [rooted] over its connection:
// the recipes, the keeper and the janitor all see relative paths.
//
// Unlike the Java client, kazoo and Curator (CURATOR-50, -280, -357), the
// Session creates a missing chroot: the first create that finds it missing (a
// lock path's top ancestor, NONODE) creates its missing nodes as containers,
// as a lock path's ancestors are, with the Session's default ACL (the ACL
// provider speaks of paths under the chroot, which is not one), and tries
// again. The server reaps such a container once its last child is gone
// (ContainerManager); the next create makes it again.

// rooted is a Backend whose paths are under root. Every request and
// result passes its one method, Do: a new operation needs nothing here.
type rooted struct {
	Backend
	root    string   // "/apps/billing": valid, not "/", no trailing slash
	acl     []zk.ACL // for the chroot's own nodes
	watches *relays  // of the connection under it
}

func (r rooted) over(b Backend) rooted {
	r.Backend, r.watches = b, &relays{rel: r.relEvent}
	return r
}

// Do roots the request's paths and unroots what comes back.
func (r rooted) Do(req Request) (Result, error) {
	paths := req.Paths
	req.Paths = make([]string, len(paths))
	for i, p := range paths {
		req.Paths[i] = r.abs(p)
	}
	res, err := r.Backend.Do(req)
	if makesRoot(req.Op) && topLevel(paths[0]) && errors.Is(err, zk.ErrNoNode) {
		if err = r.ensureRoot(); err == nil {
			res, err = r.Backend.Do(req)
		}
	}
	for i, n := range res.Created {
		res.Created[i] = r.rel(n)
	}
	if res.Watch != nil {
		res.Watch = r.watches.relay(res.Watch)
	}
	r.watches.flush()
	return res, r.relErr(err)
}

// makesRoot reports the creates that make a missing chroot: the ones that
// make a lock path's ancestors, before any other create under them.
func makesRoot(op Op) bool { return op == OpCreateContainer || op == OpCreatePersistent }

func (r rooted) abs(path string) string {
	if path == "/" {
		return r.root
	}
	return r.root + path
}

// rel is a server path as the Session's users name it; one outside the chroot
// is left as it is (as the Java client's stripChroot does).
func (r rooted) rel(path string) string {
	switch {
	case path == r.root:
		return "/"
	case strings.HasPrefix(path, r.root) && len(path) > len(r.root) && path[len(r.root)] == '/':
		return path[len(r.root):]
	}
	return path
}

// relErr rewrites the path an error names ([goneNode]).
func (r rooted) relErr(err error) error {
	if err == nil {
		return nil // and no errors.As, whose target escapes
	}
	var g *goneNode
	if errors.As(err, &g) {
		return &goneNode{path: r.rel(g.path), err: g.err}
	}
	return err
}

// relEvent is a watch event as the Session's users see it: on a watch's
// channel (relays) and in the Session's callback ([Session.open]).
func (r rooted) relEvent(ev Event) Event {
	if ev.Path != "" {
		ev.Path = r.rel(ev.Path)
	}
	return ev
}

// ensureRoot creates the chroot's missing nodes, outermost first.
func (r rooted) ensureRoot() error {
	for i := 1; i <= len(r.root); i++ {
		if i < len(r.root) && r.root[i] != '/' {
			continue
		}
		req := Request{Op: OpCreateContainer, Paths: []string{r.root[:i]}, ACL: [][]zk.ACL{r.acl}}
		if _, err := r.Backend.Do(req); err != nil {
			return err
		}
	}
	return nil
}

// topLevel reports whether path's parent is the chroot itself: a create
// there that finds no parent finds the chroot missing.
func topLevel(path string) bool { return strings.LastIndexByte(path, '/') == 0 }

// relays hand a watch's event on to a channel of their own with the path
// rewritten (rel), as a channel's value cannot be changed in place. Each
// watch's relay is one goroutine, which the connection stops: it closes every
// watch channel once the watch fires, with the event, or with a not-watching
// event when the session ends or the connection closes (go-zookeeper's
// conn.go, notifyWatches and invalidateWatches; zkfake's Conn.deliver).
//
// A relay must not delay an event past a reply: ZooKeeper sends a watch's
// event before the reply to any later request, go-zookeeper puts it on the
// watch's channel before it reads the next reply (conn.go, recvLoop; zkfake's
// Conn.do waits for the events queued before it), and the engine relies on it
// (participant.quiet, grant.go). So after every reply flush hands on each
// event already on a connection's channel: one that preceded the reply is
// there, as the connection put it there before handing on the reply.
type relays struct {
	rel  func(Event) Event
	mu   sync.Mutex
	live []*relay     // watches not known to have fired
	n    atomic.Int32 // len(live), set under mu: a Do that finds none takes no lock
}

// relay is one watch's. Two may receive from's event: its goroutine, and
// flush if it looks first. Whichever receives it, or finds from closed
// with nothing (no connection does that), hands it on under mu, once.
type relay struct {
	from   <-chan Event
	to     chan Event
	passed chan struct{} // closed once to has the event and is closed
	rel    func(Event) Event
	mu     sync.Mutex
	taken  bool // handed on, under mu
}

// relay returns the channel of from's event, rewritten.
func (rs *relays) relay(from <-chan Event) <-chan Event {
	rl := &relay{from: from, to: make(chan Event, 1), passed: make(chan struct{}), rel: rs.rel}
	rs.mu.Lock()
	rs.live = append(rs.live, rl)
	rs.n.Store(int32(len(rs.live)))
	rs.mu.Unlock()
	go func() {
		ev, ok := <-rl.from
		rl.mu.Lock()
		defer rl.mu.Unlock()
		// If flush took the event, it did so under mu before this
		// receive found from closed: taken says so.
		if !rl.taken {
			rl.hand(ev, ok)
		}
	}()
	return rl.to
}

// flush hands on every event already on its connection's channel. A
// watch whose channel a caller holds was relayed before it got it, so a
// flush in the caller's later requests sees the relay's count.
func (rs *relays) flush() {
	if rs.n.Load() == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	keep := rs.live[:0]
	for _, rl := range rs.live {
		if !rl.settled() {
			keep = append(keep, rl)
		}
	}
	clear(rs.live[len(keep):])
	rs.live = keep
	rs.n.Store(int32(len(keep)))
}

// settled hands the event on if it has come; true: it is handed on.
func (rl *relay) settled() bool {
	rl.mu.Lock()
	if rl.taken {
		rl.mu.Unlock()
		return true
	}
	select {
	case ev, ok := <-rl.from:
		// Closed (!ok): the goroutine got the event first, and hands it
		// on once it has mu; wait for that.
		if ok {
			rl.hand(ev, ok)
		}
		rl.mu.Unlock()
		<-rl.passed
		return true
	default:
		rl.mu.Unlock()
		return false
	}
}

// hand puts the event, if any, on to and closes it. rl.mu is held.
func (rl *relay) hand(ev Event, ok bool) {
	if ok {
		rl.to <- rl.rel(ev)
	}
	rl.taken = true
	close(rl.to)
	close(rl.passed)
}
