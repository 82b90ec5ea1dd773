package zklock

import (
	"bytes"
	"sync"

	"github.com/zkrecipes/zklock/internal/session"
)

// Held-back marks: how a zklock semaphore's participant that the rule lets
// hold, but the count does not, tells the participants ahead of it that it
// holds no lease ([semaphorePolicy], "The count"). The policy asks for
// the marks (reads.marks); the engine reads them and asks again.

// heldBackMark starts the data of a node whose participant is held back:
// the rule lets it hold, and it does not. Only the node's owner writes it,
// in front of the data already there, and takes it off before it holds
// ([participant.unmark]); [Participants] shows the data without it. A
// write by anyone else (Revoke's "__REVOKE__") takes it off: the node then
// counts as one that may hold, which can only make the others wait.
var heldBackMark = []byte("\x00zklock:held-back\x00")

// heldBackData reports whether data carries the mark.
func heldBackData(data []byte) bool {
	return bytes.HasPrefix(data, heldBackMark)
}

// readMarks reads, after the read of kids and on the same session,
// whether each of the children asked about carries the mark, for the
// policy to decide again with. It returns too the data version of each
// node read, by path, for the wait: a node whose version changed before
// its watch was set may have changed its mark. A node gone counts as
// marked: it holds nothing, and never will.
//
// The order is what the count's proof needs: ZooKeeper serves a session's
// requests in order, and a read after a read of state S sees a state at
// least S (a server's state only grows, and a session moves only to a
// server whose state is at least the last zxid it saw: the lastZxidSeen
// check of ZooKeeperServer.processConnectRequest).
func (p *participant) readMarks(w *waiter, kids []Child, asked []int) (map[int]bool, map[string]int32, error) {
	type read struct {
		data []byte
		st   session.Stat
		err  error
	}
	// Sent together, answered in order on the one connection: one round
	// trip for all of them, all after the read of kids.
	zc, reads := p.c.s.Conn(), make([]read, len(asked))
	var wg sync.WaitGroup
	for j, i := range asked {
		wg.Add(1)
		go func(r *read, node string) {
			defer wg.Done()
			r.data, r.st, r.err = zc.Get(node)
		}(&reads[j], w.l.path+"/"+kids[i].Name)
	}
	wg.Wait()
	marked := make(map[int]bool, len(asked))
	seen := make(map[string]int32, len(asked))
	for j, i := range asked {
		switch r := reads[j]; p.c.s.Classify(r.err) {
		case session.Done:
			marked[i], seen[w.l.path+"/"+kids[i].Name] = heldBackData(r.data), r.st.Version
		case session.Gone:
			marked[i] = true
		default:
			return nil, nil, r.err
		}
	}
	return marked, seen, nil
}

// mark puts the held-back mark on our last node of w, unless it is there
// already: it is called on every decision that holds us back, so that a
// mark that failed, or that a Revoke replaced, is written again (the wait
// watches our node for the latter). From the moment the request is sent,
// the node may carry it: w.marked says so until an unmark has succeeded,
// so that no read of ours grants while it may be there. w.markedAt is
// the node's version with the mark on, for the wait: a write after it (a
// Revoke's) shows as another version when the wait sets its watch.
func (p *participant) mark(w *waiter) error {
	w.marked = true
	var err error
	w.markedAt, err = p.rewrite(w, func(data []byte) ([]byte, bool) {
		if heldBackData(data) {
			return nil, false
		}
		out := make([]byte, 0, len(heldBackMark)+len(data))
		return append(append(out, heldBackMark...), data...), true
	})
	return err
}

// unmark takes the held-back mark off our last node of w, if it is there.
// The caller then decides again, on a read made after the write: a grant
// on it counts for every participant ahead that reads our mark later (the
// proof at [semaphorePolicy]). A mark request of ours cannot land after
// it: ZooKeeper applies a session's writes in the order sent, and one sent
// through a server the session has left fails rather than apply late
// (PrepRequestProcessor checks each setData's owner:
// SessionTrackerImpl.checkSession, SessionMovedException).
func (p *participant) unmark(w *waiter) error {
	_, err := p.rewrite(w, func(data []byte) ([]byte, bool) {
		if !heldBackData(data) {
			return nil, false
		}
		return data[len(heldBackMark):], true
	})
	if err == nil {
		w.marked = false
	}
	return err
}

// rewrite reads our last node on w's path and writes back what edit makes
// of its data (write false: nothing to do), at the version read: again if
// someone wrote in between, so that what they wrote stays. It returns the
// node's version as it left it: the version read, or the one after it
// once written (a setData at version v leaves v+1:
// PrepRequestProcessor.checkAndIncVersion).
func (p *participant) rewrite(w *waiter, edit func([]byte) ([]byte, bool)) (int32, error) {
	zc, node := p.c.s.Conn(), w.nodes[len(w.nodes)-1]
	for {
		data, st, err := zc.Get(node)
		if err != nil {
			return 0, err
		}
		out, write := edit(data)
		if !write {
			return st.Version, nil
		}
		if err = zc.SetIf(node, out, st.Version); !session.BadVersion(err) {
			return st.Version + 1, err
		}
	}
}
