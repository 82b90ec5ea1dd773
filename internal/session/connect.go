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
	return sentConn{Conn: zc, w: w}, nil
}

// sentConn records each call on a socketless connection as a packet sent
// (see above).
type sentConn struct {
	Conn
	w *wire
}

func (s sentConn) send(paths ...string) {
	if r := s.w.clock.current(); r != nil {
		s.w.clock.record(r, time.Now(), s.w.hs.timeout())
	}
	s.w.marks.sawWrite([]byte(strings.Join(paths, "\x00")))
}

func (s sentConn) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	s.send(prefixes...)
	return s.Conn.CreateEach(prefixes, data, acl)
}

func (s sentConn) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	s.send(path)
	return s.Conn.CreateContainer(path, data, acl)
}

func (s sentConn) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	s.send(path)
	return s.Conn.CreatePersistent(path, data, acl)
}

func (s sentConn) Exists(path string) (bool, error) { s.send(path); return s.Conn.Exists(path) }

func (s sentConn) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	s.send(path)
	return s.Conn.CreateEphemeral(path, data, acl)
}

func (s sentConn) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	s.send(path)
	return s.Conn.CreateEphemeralIf(guard, path, data, acl)
}

func (s sentConn) Delete(path string) error { s.send(path); return s.Conn.Delete(path) }

func (s sentConn) DeleteAll(paths []string) error { s.send(paths...); return s.Conn.DeleteAll(paths) }

func (s sentConn) Children(path string) ([]string, error) { s.send(path); return s.Conn.Children(path) }

func (s sentConn) ChildrenStatW(path string) ([]string, ParentStat, error) {
	s.send(path)
	return s.Conn.ChildrenStatW(path)
}

func (s sentConn) ChildrenStat(path string) ([]string, ParentStat, error) {
	s.send(path)
	return s.Conn.ChildrenStat(path)
}

func (s sentConn) Get(path string) ([]byte, Stat, error) { s.send(path); return s.Conn.Get(path) }

func (s sentConn) GetW(path string) (Stat, <-chan Event, error) {
	s.send(path)
	return s.Conn.GetW(path)
}

func (s sentConn) Check(paths []string) error { s.send(paths...); return s.Conn.Check(paths) }

func (s sentConn) Set(path string, data []byte) error { s.send(path); return s.Conn.Set(path, data) }

func (s sentConn) SetIf(path string, data []byte, version int32) error {
	s.send(path)
	return s.Conn.SetIf(path, data, version)
}

func (s sentConn) GetDataW(path string) ([]byte, Stat, <-chan Event, error) {
	s.send(path)
	return s.Conn.GetDataW(path)
}

func (s sentConn) ChildrenW(path string) ([]string, <-chan Event, error) {
	s.send(path)
	return s.Conn.ChildrenW(path)
}

func (s sentConn) ExistsW(path string) (bool, <-chan Event, error) {
	s.send(path)
	return s.Conn.ExistsW(path)
}

func (s sentConn) Sync(path string) error { s.send(path); return s.Conn.Sync(path) }

func (s sentConn) AddAuth(scheme string, auth []byte) error {
	s.send()
	return s.Conn.AddAuth(scheme, auth)
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
	return zkConn{c}, nil
}
