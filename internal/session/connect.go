package session

import (
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// A Session on a connection from [Options.Connect] (internal/zkfake, for
// tests) has no socket, so the wire (wire.go) sees no packets. What the
// Session needs of the wire still holds, without one:
//
//   - The granted session timeout is the one asked for (there is no
//     connect response to read it from).
//   - Every call on the connection counts as a packet sent when it is
//     made (sentConn), on the connection of the session the latest
//     StateHasSession event reported: so [Session.Confirm] derives the
//     lease deadline from the calls, by the same rule as on a socket, and
//     a call made before a reconnect says nothing of the new connection
//     ([sendClock.sentByOn]).
//   - [Session.Sent] sees the paths of each call as the packet's bytes,
//     so the engine's prefetch starts once the create is made.
//   - The wire's keeping of lastZxid fixes a race inside go-zookeeper's
//     reader, which is not there; the handshake bound has no dial to
//     bound, and [wire.drop] has no socket to close.

// openConnect opens a connection through c.connect, reporting its events
// as go-zookeeper's callback would to o's.
func (c *Session) openConnect(o dialOptions) (Conn, error) {
	w := c.wire
	w.hs.grant(w.hs.requested)
	zc, err := c.connect(w.hs.requested, func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			// A new connection: what went out before says nothing of it.
			w.clock.record(w.clock.begin(), time.Now(), w.hs.timeout())
		}
		o.callback(ev)
	})
	if err != nil {
		return nil, err
	}
	return NewConn(sentConn{Backend: zc.b, w: w}), nil
}

// sentConn records each call on a socketless connection as a packet sent
// (see above).
type sentConn struct {
	Backend
	w *wire
}

func (s sentConn) send(paths ...string) {
	if r := s.w.clock.current(); r != nil {
		s.w.clock.record(r, time.Now(), s.w.hs.timeout())
	}
	s.w.marks.sawWrite([]byte(strings.Join(paths, "\x00")))
}

// Do records the call, carrying its paths, and makes it.
func (s sentConn) Do(r Request) (Result, error) {
	s.send(r.Paths...)
	return s.Backend.Do(r)
}

// Dial opens a go-zookeeper connection with no Session around it, and
// reports every event to events, as go-zookeeper's callback has it: for
// tests that hold another Conn to this one (internal/zkfake's
// conformance test).
func Dial(servers []string, timeout time.Duration, events func(zk.Event)) (Conn, error) {
	c, _, err := zk.Connect(servers, timeout, zk.WithEventCallback(events), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	return NewConn(zkBackend{c}), nil
}
