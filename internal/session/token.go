package session

import (
	"context"
	"errors"
)

// Token returns the lease's fencing token.
//
// A lease granted by a handoff on a server that sent the grant's
// notification without its zxid (ZooKeeper before 3.9: zklock's
// handoff.go) reads its token here, on the first call, while it is held,
// so that the handoff itself waits for no read: the lock path's pzxid,
// then the lease's node, which must still be ours. Why that is a token:
// the two reads go out on one session in order, and a session's reads see
// states that only grow, so the path's read saw a state in which the node
// existed; that state is after the grant (the grant's multi was applied
// when the session was told of it, before the first read was sent), so
// its pzxid is at least the grant's zxid, above the previous holder's
// token; and below the next holder's, which is at least the zxid of our
// node's deletion. A lease that ended before its token was read (released,
// lost, or its node gone) has the token 0, which no fenced resource should
// accept.
func (l *Hold) Token() int64 {
	l.tok.Lock()
	defer l.tok.Unlock()
	if l.lazy != "" {
		l.token.Store(l.readToken(l.lazy))
		l.lazy = ""
	}
	return l.token.Load()
}

// errEnded stops the token's read once the lease has ended.
var errEnded = errors.New("lease ended")

// readToken reads the token of a lease granted by a handoff. If it finds
// the lease's node gone (or another's), the lease has ended: it ends it
// then (ErrNodeDeleted), rather than leave it live with no token until
// the keeper or a watch says so.
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

// KnownToken returns the lease's token without reading it or waiting for
// a read: 0 while it is still to be read. For the Session's hooks, which
// run under its lock.
func (l *Hold) KnownToken() int64 { return l.token.Load() }
