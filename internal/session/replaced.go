package session

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// A session replaced on reconnect. ZooKeeper answers a reconnect naming a
// session with that session or its expiry (timeout 0: go-zookeeper reports
// StateExpired, then asks for a new one). Other servers of the protocol may
// answer with a session of their own (ClickHouse Keeper: ClickHouse#116690,
// #44571), and go-zookeeper takes any non-zero id silently
// (Conn.authenticate). So a StateHasSession naming another session than
// the last, with no StateExpired or replacement of ours between, is a swap,
// and every lease and wait of the old session ends at the handshake:
//
//   - Needed. Its ephemerals are no longer ours: a server touches only the
//     session of a packet's connection (ZooKeeperServer.processPacket,
//     SessionTrackerImpl.touchSession), so it expires within its timeout
//     and the server deletes its nodes (SessionTrackerImpl's expirer,
//     ZooKeeperServer.expire, DataTree.killSession) while we think we hold
//     them. The new session speaks for none: [Session.Confirm],
//     [Session.Grant] and our writes' ownership checks go by session id
//     (deleteOwned takes another session's node for deleted with it), so an
//     old lease would live on, saying nothing, by a deadline nothing moves.
//   - Safe. Ending a lease early never lets two hold a lock: the holder
//     hears it (Done closed, Err set) before another can take the lock, as
//     its nodes go only after: by the janitor, which sees the jobs once the
//     leases ended here under c.mu, or at the old session's expiry.
//
// Any session with DELETE on the parent may delete the old session's nodes
// (PrepRequestProcessor.pRequest2Txn, OpCode.delete checks the ACL, not the
// ephemeral owner). Each is read first and deleted only if the old session
// still owns it (Stat.EphemeralOwner): a node its expiry deleted is not
// re-created by anyone under that name, which carries our random id.
// Without the deletes, waiters behind them would wait out its timeout.

// ErrSessionReplaced is the cause of every lease and wait that a swapped
// session ended. It wraps [ErrSessionExpired].
var ErrSessionReplaced error = replacedError{}

type replacedError struct{}

func (replacedError) Error() string { return "session replaced" }
func (replacedError) Unwrap() error { return ErrSessionExpired }

// maxSwaps bounds the swapped sessions a Session remembers: a wait or
// cleanup of an older one is taken for an expired session's (the wait
// queues again; the server deletes the nodes at the old session's timeout).
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

// hasSessionLocked follows the session a StateHasSession names: on a swap
// it ends the old one's leases with ErrSessionReplaced, the janitor
// deleting their nodes, and the Session goes on with the new one.
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

// deleteReplaced deletes, from the connection's session, those of nodes
// that session, replaced, still owns (see above). Nodes it could not reach
// are left to try again, as deleteOwned leaves them.
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

// sessionLeft ends deleteOwned (d its deletion so far) once the connection
// has another session than the nodes': if a swap replaced theirs, the rest
// go as in deleteReplaced; if the Session has not heard yet what became of
// it, they are left to try again; else the server deleted them with it.
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

// sessionFate says what became of session, which the connection no longer
// has: replaced by a swap; unsettled, not heard of yet (go-zookeeper sets
// the connection's new id, or 0 on expiry, before it reports the state:
// Conn.authenticate), so either; neither: it ended, and its nodes with it.
func (c *Session) sessionFate(session int64) (replaced, unsettled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replacedLocked(session) != nil, c.swaps.had == session
}
