package session

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// A session replaced on reconnect. ZooKeeper answers a reconnect that
// names a session with that session or with its expiry (a timeout of 0,
// which go-zookeeper reports as StateExpired before it asks for a new
// one). Other servers of the protocol may answer it with a session of
// their own making (ClickHouse Keeper: ClickHouse#116690, #44571), and
// go-zookeeper takes any non-zero id it is given without a word
// (Conn.authenticate), so the Session tells it by comparing ids: a
// StateHasSession that names another session than the last one, with no
// StateExpired or replacement of our own in between, is a swap.
//
// Why every lease and wait of the old session ends at the handshake, and
// why that is safe:
//
//   - Needed. The old session's ephemeral nodes are not ours any more.
//     Nothing we send renews that session: a server touches only the
//     session of the connection a packet came in on
//     (ZooKeeperServer.processPacket / SessionTrackerImpl.touchSession with
//     the connection's session id), so it expires within its timeout, and
//     the server then deletes its nodes (SessionTrackerImpl's expirer,
//     ZooKeeperServer.expire, DataTree.killSession) while we would think we
//     still hold them. The new session cannot renew them, and nothing it
//     confirms speaks for them: [Session.Confirm] and [Session.Grant] are
//     by session id, and a write of ours on a held node checks ownership by
//     session id too (deleteOwned takes a node of another session for
//     deleted with it), so a lease of the old session would live on only
//     by its deadline, which nothing moves any more, and say nothing.
//   - Safe. Ending a lease early never lets two hold a lock: the holder
//     hears it (Done closed, Err set) before anyone else can take the
//     lock, because its nodes are deleted only after it ended (the leases
//     end here, under c.mu, before the janitor, which deletes their nodes,
//     can see the jobs), or when the old session expires on the server,
//     later still.
//
// Deleting the old session's nodes from the new one is what ZooKeeper
// allows any session with the DELETE permission on the parent
// (PrepRequestProcessor.pRequest2Txn, OpCode.delete: the ACL is checked,
// the ephemeral owner is not). Each node is read first, and deleted only
// if the old session still owns it (Stat.EphemeralOwner): a node of ours
// that the old session's expiry deleted is not re-created by anyone under
// the same name, which carries our own random id. Without the deletes,
// waiters behind those nodes would wait for the old session's timeout.

// ErrSessionReplaced is the cause of every lease and wait that a swapped
// session ended. It wraps [ErrSessionExpired].
var ErrSessionReplaced error = replacedError{}

type replacedError struct{}

func (replacedError) Error() string { return "session replaced" }
func (replacedError) Unwrap() error { return ErrSessionExpired }

// maxSwaps bounds the swapped sessions a Session remembers: a wait or a
// cleanup of one older than that is taken for one of an expired session
// (the wait queues again; the server deletes the nodes at the old
// session's timeout).
const maxSwaps = 16

// swaps is the Session's record of its sessions, to tell a swap. Under c.mu.
type swaps struct {
	had  int64  // the session of the latest StateHasSession; 0 after one ended otherwise
	gone []swap // sessions lost to a swap, oldest first
}

// swap is one session replaced by another at a reconnect.
type swap struct{ old, new int64 }

func (s swap) err() error {
	return fmt.Errorf("%w: the server gave session 0x%x in place of 0x%x on reconnect", ErrSessionReplaced, s.new, s.old)
}

// hasSessionLocked follows the session that a StateHasSession names: if
// it is another than the one the connection had, it ends every lease of
// the old one with ErrSessionReplaced and has the janitor delete their
// nodes, and the Session goes on with the new one. c.mu is held.
func (c *Session) hasSessionLocked(id int64) {
	old := c.swaps.had
	c.swaps.had = id
	if old == 0 || id == 0 || id == old {
		return
	}
	s := swap{old: old, new: id}
	c.swaps.gone = append(c.swaps.gone, s)
	if len(c.swaps.gone) > maxSwaps {
		c.swaps.gone = c.swaps.gone[1:]
	}
	c.log.Warn("zklock: the server gave the Client another session on reconnect; every lease and wait of the old session ends",
		"old", fmt.Sprintf("0x%x", old), "new", fmt.Sprintf("0x%x", id))
	err := s.err()
	for l := range c.held.leases {
		c.loseLocked(l, err) // not ErrSessionExpired itself: the janitor deletes the nodes (grant.go)
	}
	c.session, c.confirmed, c.deadline = 0, time.Time{}, time.Time{}
	// Waiters hear of it at the state change (bumpLocked): the engine asks
	// Replaced why their session is gone.
}

// Replaced returns the error that ends the leases and waits of session if
// a reconnect replaced it with another, and nil otherwise.
func (c *Session) Replaced(session int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replacedLocked(session)
}

func (c *Session) replacedLocked(session int64) error {
	for _, s := range c.swaps.gone {
		if s.old == session {
			return s.err()
		}
	}
	return nil
}

// deleteReplaced deletes those of nodes that session, replaced, still
// owns, from the connection's session (see above): each is read, and
// deleted if the old session owns it. Nodes it could not reach are left to
// try again, as deleteOwned leaves them.
func (c *Session) deleteReplaced(zc Conn, nodes []string, session int64) deletion {
	var d deletion
	for _, n := range nodes {
		_, st, err := zc.Get(n)
		if err == nil && st.EphemeralOwner != session {
			continue // not the old session's
		}
		if err == nil {
			err = zc.Delete(n)
		}
		switch classify(err) {
		case Done, Gone:
		case Retry, Closing:
			d.later(err, n)
		default:
			c.log.Warn("zklock: node of a replaced session cannot be deleted; it stays until that session times out", "node", n, "err", err)
			d.fail(n, err)
		}
	}
	return d
}

// sessionLeft ends deleteOwned, whose deletion so far is d, once the
// connection has another session than the nodes': if a swap replaced
// theirs, the rest are deleted as deleteReplaced does; if the Session has
// not heard yet what became of it, they are left to try again; otherwise
// their session ended, and the server deleted them with it.
func (c *Session) sessionLeft(zc Conn, rest []string, session int64, d deletion) deletion {
	replaced, unsettled := c.sessionFate(session)
	switch {
	case unsettled:
		d.later(zk.ErrConnectionClosed, rest...) // a Retry: the state change is on its way
		return d
	case !replaced:
		return deletion{failed: d.failed}
	}
	r := c.deleteReplaced(zc, rest, session)
	d.later(r.retry, r.left...)
	if d.failed == nil {
		d.failed = r.failed
	}
	return d
}

// sessionFate says what became of session, which the connection no
// longer has: replaced by a swap, or unsettled: the Session has not heard
// yet (go-zookeeper sets the connection's new id, or 0 for an expiry,
// before it reports the state: Conn.authenticate), so it may be either.
// Neither: it ended, and its nodes with it.
func (c *Session) sessionFate(session int64) (replaced, unsettled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replacedLocked(session) != nil, c.swaps.had == session
}
