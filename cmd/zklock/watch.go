//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// watcher follows a lock path's participants: ls -watch and observe (for a
// lock) read them again after every change of the path's children, and of
// the nodes where another library's semaphore keeps them (Curator's leases/
// and locks/, kazoo's <path>-__lock__).
type watcher struct {
	c    *zklock.Client
	path string
	// reconnected receives (without blocking the Client: it holds one) when
	// a session is connected again: a watch may have been dropped.
	reconnected chan struct{}
	listTimeout time.Duration // bounds each read; 0: none
	notes       *connNotes    // says when the connection is lost and back; nil: silent

	// The watches outstanding, by node, each with the generation that set
	// it; a reconnection starts a new generation, whose watches are set
	// again. Only run's goroutine touches them.
	armed map[string]uint64
	gen   uint64
	fired chan firing // a watch fired
	quit  chan struct{}
	wg    sync.WaitGroup // the goroutines that wait for the watches
}

// firing is a watch that fired: its node and generation.
type firing struct {
	node string
	gen  uint64
}

// newWatcher returns a watcher of path and the option that the Client it
// watches with must be connected with, so that it hears of reconnections.
// If sub is not "", it says on stderr, as zklock sub, when the connection
// is lost and when it is back. close stops it.
func newWatcher(sub, path string, listTimeout time.Duration) (*watcher, zklock.Option) {
	w := &watcher{
		path: path, reconnected: make(chan struct{}, 1), listTimeout: listTimeout,
		armed: map[string]uint64{}, fired: make(chan firing), quit: make(chan struct{}),
	}
	if sub != "" {
		w.notes = newConnNotes(sub, os.Stderr)
	}
	return w, zklock.WithTrace(&zklock.Trace{Session: func(si zklock.SessionInfo) {
		if w.notes != nil {
			w.notes.session(si)
		}
		if si.State == zklock.SessionConnected {
			select {
			case w.reconnected <- struct{}{}:
			default: // one is pending already: a read follows anyway
			}
		}
	}})
}

// close stops what the watcher runs: call it before closing the Client, so
// that the close is not reported as a lost connection.
func (w *watcher) close() {
	if w.notes != nil {
		w.notes.stop()
	}
	close(w.quit)
	w.wg.Wait()
}

// run calls report with the participants of the path now, then after every
// change of its children, until ctx is done (it returns nil then), report
// asks it to stop, or a read fails for good.
//
// ZooKeeper's watches fire once (ZooKeeper Programmer's Guide, "ZooKeeper
// Watches"), so a watch is set before each read that follows it firing: a
// change after the read fires it and is read next; changes between the
// watch firing and the read are seen by the read, never reported twice.
// go-zookeeper sets its watches again after a reconnect but only logs a
// failure to, and a new session has none: after every reconnection the
// watches are set again and the path is read again.
func (w *watcher) run(ctx context.Context, report func([]zklock.Participant) (stop bool)) error {
	var pause time.Duration
	for {
		armed, err := w.armOrWait(ctx, &pause)
		switch {
		case err != nil:
			return err
		case ctx.Err() != nil:
			return nil
		case !armed:
			continue
		}
		ps, err := w.read(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if report(ps) || !w.awaitChange(ctx) {
			return nil
		}
	}
}

// awaitChange waits until a watch fires or the session is connected again;
// it returns false if ctx is done first.
func (w *watcher) awaitChange(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case f := <-w.fired:
		w.done(f)
	case <-w.reconnected:
		w.forget()
	}
	return true
}

// armOrWait sets the watches and reports whether it could. If it cannot
// for now (disconnected), it waits until the session is connected again,
// or for *pause, which grows with each failure in a row, or until ctx is
// done; the caller tries again. Any other failure is returned.
func (w *watcher) armOrWait(ctx context.Context, pause *time.Duration) (bool, error) {
	err := w.arm()
	if err == nil {
		*pause = 0
		return true, nil
	}
	if !retryable(err) {
		return false, err
	}
	*pause = min(2**pause+100*time.Millisecond, 5*time.Second)
	t := time.NewTimer(*pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.reconnected:
		w.forget()
	case <-t.C:
	}
	return false, nil
}

// done notes that watch f fired: it is set again before the next read.
func (w *watcher) done(f firing) {
	if w.armed[f.node] == f.gen {
		delete(w.armed, f.node)
	}
}

// forget starts a new generation of watches after a reconnection.
func (w *watcher) forget() {
	w.gen++
	clear(w.armed)
}

// arm sets the watches that are not outstanding: on the path's children
// (or, while it does not exist, on its creation), and on the children of
// the nodes where another library's semaphore keeps its participants.
func (w *watcher) arm() error {
	zc := w.c.Conn()
	names, err := w.armOne(zc, w.path)
	if err != nil {
		return err
	}
	for _, node := range layoutNodes(w.path, names) {
		if _, err := w.armOne(zc, node); err != nil {
			return err
		}
	}
	return nil
}

// armOne sets a watch on node's children, or while it does not exist on
// its creation, unless one of this generation is outstanding, and returns
// its children (nil if it does not exist). The raw connection is not
// chrooted: node is the Client's path under its chroot.
func (w *watcher) armOne(zc *zk.Conn, node string) ([]string, error) {
	full := w.c.Chroot() + node
	if gen, ok := w.armed[node]; ok && gen == w.gen {
		names, _, err := zc.Children(full)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return names, err
	}
	for {
		names, _, ch, err := zc.ChildrenW(full)
		if err == nil {
			w.follow(node, ch)
			return names, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		exists, _, ch, err := zc.ExistsW(full)
		if err != nil {
			return nil, err
		}
		if !exists {
			w.follow(node, ch)
			return nil, nil
		}
		// Created between the two calls: watch its children.
	}
}

// follow waits, in a goroutine of its own, for the watch ch on node to
// fire, and tells run.
func (w *watcher) follow(node string, ch <-chan zk.Event) {
	gen := w.gen
	w.armed[node] = gen
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		select {
		case <-ch:
			select {
			case w.fired <- firing{node, gen}:
			case <-w.quit:
			}
		case <-w.quit:
		}
	}()
}

// layoutNodes returns the nodes besides path whose children are
// participants of path if it is another library's semaphore: Curator's
// leases/ and locks/ if path has them, kazoo's <path>-__lock__ if every
// child of path could be a kazoo lease (an existing path with no child
// too: its first lease or waiter comes there).
func layoutNodes(path string, names []string) []string {
	if names == nil {
		return nil // path does not exist
	}
	var out []string
	for _, n := range names {
		if n == "leases" || n == "locks" {
			out = append(out, path+"/"+n)
		}
	}
	if len(out) == 0 && allKazooLeases(names) {
		out = append(out, path+"-__lock__")
	}
	return out
}

// allKazooLeases reports names that are all kazoo Semaphore leases: 32
// lower-case hex digits (kazoo's uuid4().hex).
func allKazooLeases(names []string) bool {
	for _, n := range names {
		if len(n) != 32 || strings.Trim(n, "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}

func (w *watcher) read(ctx context.Context) ([]zklock.Participant, error) {
	if w.listTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.listTimeout)
		defer cancel()
	}
	return zklock.Participants(ctx, w.c, w.path)
}

// retryable reports whether a go-zookeeper error passes once the
// connection is back.
func retryable(err error) bool {
	for _, e := range []error{zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrSessionMoved} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sameHolders reports whether a and b list the same holders, in the same
// order.
func sameHolders(a, b []zklock.Participant) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node {
			return false
		}
	}
	return true
}

// sameList reports whether two listings show the same participants, in
// the same order, each holding or waiting as in the other.
func sameList(a, b []zklock.Participant) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node || a[i].Holder != b[i].Holder {
			return false
		}
	}
	return true
}

func holdersOf(ps []zklock.Participant) []zklock.Participant {
	var hs []zklock.Participant
	for _, p := range ps {
		if p.Holder {
			hs = append(hs, p)
		}
	}
	return hs
}

// connNotes says, for ls -watch and observe, when the connection to
// ZooKeeper is lost and when it is back, from the Client's Trace. The
// Trace's callbacks must not block: they hand each line to a goroutine
// that writes it.
type connNotes struct {
	sub   string
	lines chan string
	done  chan struct{}

	mu        sync.Mutex
	connected bool // a session was established once
	lost      bool // and the connection is lost since
	stopped   bool
}

func newConnNotes(sub string, w io.Writer) *connNotes {
	n := &connNotes{sub: sub, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for line := range n.lines {
			fmt.Fprintln(w, line)
		}
	}()
	return n
}

// session is the Trace's Session callback.
func (n *connNotes) session(si zklock.SessionInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var line string
	switch si.State {
	case zklock.SessionConnected:
		if n.lost {
			line = fmt.Sprintf("zklock %s: connected again to %s", n.sub, si.Server)
		}
		n.connected, n.lost = true, false
	case zklock.SessionDisconnected:
		if n.connected && !n.lost {
			line = fmt.Sprintf("zklock %s: connection to ZooKeeper lost; retrying", n.sub)
		}
		n.lost = n.connected
	case zklock.SessionExpired:
		if n.connected {
			line = fmt.Sprintf("zklock %s: the ZooKeeper session expired; retrying with a new one", n.sub)
		}
		n.lost = n.connected
	}
	if line == "" || n.stopped {
		return
	}
	select {
	case n.lines <- line:
	default: // 16 lines behind: the connection flaps faster than stderr takes it
	}
}

// stop ends the notes: nothing is said after it returns.
func (n *connNotes) stop() {
	n.mu.Lock()
	if !n.stopped {
		n.stopped = true
		close(n.lines)
	}
	n.mu.Unlock()
	<-n.done
}
