//go:build unix

package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// watcher follows a lock path's participants: ls -watch and observe (for a
// lock) read them again after every change of the path's children.
type watcher struct {
	c    *zklock.Client
	path string
	// reconnected receives (without blocking the Client: it holds one) when
	// a session is connected again: a watch may have been dropped.
	reconnected chan struct{}
	listTimeout time.Duration // bounds each read; 0: none
}

// newWatcher returns a watcher of path and the option that the Client it
// watches with must be connected with, so that it hears of reconnections.
func newWatcher(path string, listTimeout time.Duration) (*watcher, zklock.Option) {
	w := &watcher{path: path, reconnected: make(chan struct{}, 1), listTimeout: listTimeout}
	return w, zklock.WithTrace(&zklock.Trace{Session: func(si zklock.SessionInfo) {
		if si.State == zklock.SessionConnected {
			select {
			case w.reconnected <- struct{}{}:
			default: // one is pending already: a read follows anyway
			}
		}
	}})
}

// run calls report with the participants of the path now, then after every
// change of its children, until ctx is done (it returns nil then), report
// asks it to stop, or a read fails for good.
//
// ZooKeeper's watches fire once (ZooKeeper Programmer's Guide, "ZooKeeper
// Watches"), so the watch is set before each read: a change after the
// read fires it and is read next; changes between the watch firing and
// the read are seen by the read, never reported twice. go-zookeeper sets
// its watches again after a reconnect but only logs a failure to, and a
// new session has none: after every reconnection the path is read again.
func (w *watcher) run(ctx context.Context, report func([]zklock.Participant) (stop bool)) error {
	var pause time.Duration
	for {
		fired, err := w.arm()
		if err != nil {
			if !retryable(err) {
				return err
			}
			// Disconnected: read again once connected, or after a pause.
			pause = min(2*pause+100*time.Millisecond, 5*time.Second)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-w.reconnected:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		pause = 0
		ps, err := w.read(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if report(ps) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-fired:
		case <-w.reconnected:
		}
	}
}

// arm sets a watch on the path's children, or, while the path does not
// exist, on its creation.
func (w *watcher) arm() (<-chan zk.Event, error) {
	zc := w.c.Conn()
	for {
		_, _, ch, err := zc.ChildrenW(w.path)
		if !errors.Is(err, zk.ErrNoNode) {
			return ch, err
		}
		exists, _, ch, err := zc.ExistsW(w.path)
		if err != nil || !exists {
			return ch, err
		}
		// Created between the two calls: watch its children.
	}
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
