package session

import (
	"context"
	"errors"
)

// Token returns the lease's fencing token.
//
// A lease granted by a handoff whose notification lacked the grant's zxid
// (ZooKeeper before 3.9: zklock's handoff.go) reads it here, on the first
// call, while held, so the handoff waits for no read: the lock path's pzxid,
// then the lease's node, which must still be ours. It is a token: both reads
// go out in order on one session, whose reads see states that only grow, so
// the path's read saw a state in which the node existed, which is after the
// grant (its multi was applied when the session was told, before the first
// read was sent); so the pzxid is at least the grant's zxid, above the
// previous holder's token, and below the next holder's, at least our node's
// deletion's zxid. A lease ended before the read (released, lost, its node
// gone) gets 0, which no fenced resource should accept.
func (l *Hold) Token() int64 {
	l.tok.Lock()
	defer l.tok.Unlock()
	if l.lazy != "" {
		l.token.Store(l.readToken(l.lazy))
		l.lazy = ""
	}
	return l.token.Load()
}

var errEnded = errors.New("lease ended")

// readToken reads the token of a lease granted by a handoff. A node it
// finds gone (or another's) ends the lease now (ErrNodeDeleted), rather
// than leave it live with no token until the keeper or a watch says so.
func (l *Hold) readToken(path string) int64 {
	var token int64
	err := l.s.Retry(context.Background(), func(zc Conn) error {
		if l.Err() != nil {
			return errEnded
		}
		_, ps, err := zc.Get(path)
		if err != nil {
			return err
		}
		_, own, err := zc.Get(l.nodes[0])
		if err != nil {
			return err
		}
		if own.EphemeralOwner != l.session {
			return errGone
		}
		token = ps.Pzxid
		return nil
	})
	if err == errGone || l.s.Classify(err) == Gone {
		l.s.lose(l, errNodeDeleted(l.nodes[0]))
	}
	if err != nil {
		return 0
	}
	return token
}

// errGone: the lease's node is another's.
var errGone = errors.New("node not ours")

// KnownToken returns the lease's token without reading or waiting: 0 while
// it is still to be read. For the Session's hooks, which run under its lock.
func (l *Hold) KnownToken() int64 { return l.token.Load() }
