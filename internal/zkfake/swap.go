package zkfake

import "time"

// ReconnectSwapped ends a [Conn.Disconnect] as a server that hands out a
// new session on reconnect does (ClickHouse Keeper; zktest's
// Forwarder.SwapSessions plays one in front of a real ZooKeeper): the
// reconnect is answered with a new session, with no StateExpired before
// it, as go-zookeeper reports it (Conn.authenticate takes any non-zero
// id). The old session lives on, attached to no connection, with its
// ephemeral nodes, until it expires ([Server.Expire], [Server.ExpireIdle]).
// The connection's watches are set again in the new session, as
// go-zookeeper's setWatches does on every connection (late, after
// [Conn.LateWatches]), and requests that waited for the reconnect run in
// the new session.
func (c *Conn) ReconnectSwapped() {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	c.held = false
	if c.connected || c.closed {
		return
	}
	old := s.sessions[c.sid]
	timeout := 10 * time.Second
	if old != nil && !old.expired {
		timeout = old.timeout
		old.conn = nil
	}
	s.newSessionLocked(c, timeout)
	if old != nil && !old.expired {
		se := s.sessions[c.sid]
		se.dataW, se.childW, se.pending = old.dataW, old.childW, old.pending
		old.dataW, old.childW, old.pending = map[string]bool{}, map[string]bool{}, nil
		s.takeLateLocked(c, se)
	}
	s.state.Broadcast()
}
