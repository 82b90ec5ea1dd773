package session

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
)

// Conn is the library's one door to ZooKeeper: every call the engine, the
// leases and the janitor make goes through it, and only the [Session] holds
// one (see [Session.Conn]). It is narrow on purpose, so that the Session can
// put a new connection underneath. Moving to another client library would
// touch more than this file: the wire (wire.go) works below go-zookeeper's
// API, on the behaviours docs/design.md lists in "What the wire relies on".
//
// Errors are go-zookeeper's, unwrapped, so [classify] can read them and
// users can match zk's sentinels; outside this package, callers ask
// [Session.Classify] (or [BadVersion], [NodeExists]) what they mean.
type Conn interface {
	// CreateEach makes one ephemeral-sequential node named prefix<seq> for
	// each prefix, in one multi-operation: all or none, in one transaction,
	// so all of them carry one zxid (and the sequences of one path are
	// consecutive). One prefix is a plain create.
	CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error)
	// CreateContainer makes a container node holding data; one that exists
	// is fine.
	CreateContainer(path string, data []byte, acl []zk.ACL) error
	// CreatePersistent makes a persistent node holding data; one that
	// exists is fine.
	CreatePersistent(path string, data []byte, acl []zk.ACL) error
	// CreateEphemeral makes a plain (not sequential) ephemeral node.
	CreateEphemeral(path string, data []byte, acl []zk.ACL) error
	// CreateEphemeralIf makes a plain ephemeral node, in one
	// multi-operation with a check that guard exists: if guard is gone,
	// nothing is made and it fails with an error for which
	// [GoneAt](err, guard) holds.
	CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error
	// Delete deletes a node, whatever its version.
	Delete(path string) error
	// DeleteAll deletes nodes, whatever their versions, in one
	// multi-operation: all or none.
	DeleteAll(paths []string) error
	// Children lists a node's children.
	Children(path string) ([]string, error)
	// ChildrenStatW lists a node's children with the node's Stat, read
	// together (DataTree.getChildren copies the stat and the list under the
	// node's lock), and leaves a children watch on it, whose Event only the
	// connection's callback sees (see held.go).
	ChildrenStatW(path string) ([]string, ParentStat, error)
	// ChildrenStat is ChildrenStatW without the watch: a read whose
	// decision no watch needs to follow costs no notification later.
	ChildrenStat(path string) ([]string, ParentStat, error)
	// Get reads a node's data and stat.
	Get(path string) ([]byte, Stat, error)
	// GetW reads a node's stat and leaves a watch on it, which fires once:
	// when the node's data changes or it is deleted, or (with a
	// not-watching Event) when the session ends.
	GetW(path string) (Stat, <-chan Event, error)
	// Check is a write that changes nothing: a multi-operation of one
	// version check (any version) on each of paths. ZooKeeper commits it
	// through the leader and a quorum like any write (it takes a zxid), so
	// its reply confirms the session; if a path is gone it fails with a
	// *goneNode naming it (which wraps zk.ErrNoNode).
	Check(paths []string) error
	// Set overwrites a node's data, whatever its version.
	Set(path string, data []byte) error
	// SetIf overwrites a node's data if its version is version.
	SetIf(path string, data []byte, version int32) error
	// GetDataW reads a node's data and stat and leaves a watch on it, as
	// GetW does.
	GetDataW(path string) ([]byte, Stat, <-chan Event, error)
	// ChildrenW lists path's children and watches them (an election's
	// observer, while nobody leads).
	ChildrenW(path string) ([]string, <-chan Event, error)
	// Exists reports whether path exists.
	Exists(path string) (bool, error)
	// ExistsW reports whether path exists, and watches it: for its
	// creation if it does not.
	ExistsW(path string) (bool, <-chan Event, error)
	// Sync makes the server this connection talks to catch up with the
	// leader.
	Sync(path string) error
	// AddAuth sends credentials, now and on every reconnect.
	AddAuth(scheme string, auth []byte) error
	// SessionID is the current session's id, 0 while there is none.
	SessionID() int64
	// Close ends the session and the connection.
	Close()
}

// Stat is what zklock reads of a node's zk.Stat.
type Stat struct {
	Czxid          int64 // the zxid that created the node: a lease's token
	EphemeralOwner int64 // the session that owns an ephemeral node
	Version        int32 // the data Version: a semaphore's hold announcement
	Ctime          int64 // when the node was created, in ms since the epoch (the leader's clock)
}

// ParentStat is what zklock reads of a lock path's stat.
type ParentStat struct {
	Pzxid int64 // the zxid of the latest create or delete of a child
}

// Event is a watch notification.
type Event = zk.Event

// BadVersion reports a conditional write refused for the node's version.
func BadVersion(err error) bool { return errors.Is(err, zk.ErrBadVersion) }

// NodeExists reports a create refused because the node exists.
func NodeExists(err error) bool { return errors.Is(err, zk.ErrNodeExists) }

// Deleted reports a watch Event that says the node is gone.
func Deleted(ev Event) bool { return ev.Type == zk.EventNodeDeleted }

// DataChanged reports a watch Event that says the node's data changed.
func DataChanged(ev Event) bool { return ev.Type == zk.EventNodeDataChanged }

// ChildrenChanged reports a watch Event that says the node's children
// changed.
func ChildrenChanged(ev Event) bool { return ev.Type == zk.EventNodeChildrenChanged }

// sessionState is what a connection reports of its session.
type sessionState int

const (
	stateOther        sessionState = iota // connecting and the like: no change
	stateHasSession                       // connected, with a live session
	stateDisconnected                     // the connection dropped; the session may live on
	stateExpired                          // the session is gone for good
)

// dialOptions is what opening a connection takes.
type dialOptions struct {
	servers        []string
	sessionTimeout time.Duration
	dialer         zk.Dialer
	log            *slog.Logger
	// onState is called, from the connection's own goroutine, on every
	// change of the session's state. It must never block.
	onState func(s sessionState, server string)
	// onWatch is called, from the connection's own goroutine, on every
	// watch Event, before the watch's channel gets it. It must never block.
	onWatch func(ev Event)
	// hosts, if set, is the server list (see [hosts]).
	hosts *hosts
}

// callback is go-zookeeper's event callback: it reports the session's
// state to onState and watch events to onWatch.
func (o dialOptions) callback(ev zk.Event) {
	if ev.Type != zk.EventSession {
		if ev.Type != zk.EventNotWatching {
			o.onWatch(ev)
		}
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		o.onState(stateHasSession, ev.Server)
	case zk.StateDisconnected, zk.StateAuthFailed:
		o.onState(stateDisconnected, ev.Server)
	case zk.StateExpired:
		o.onState(stateExpired, ev.Server)
	}
}

// dial opens a go-zookeeper connection. It returns before the session is
// established; onState reports it.
func dial(o dialOptions) (Conn, error) {
	var hp zk.HostProvider = zk.NewDNSHostProvider()
	if o.hosts != nil {
		hp = o.hosts
	}
	c, _, err := zk.Connect(o.servers, o.sessionTimeout,
		zk.WithHostProvider(hp),
		zk.WithEventCallback(o.callback),
		zk.WithLogger(zkLogger{o.log}),
		zk.WithLogInfo(false),
		zk.WithDialer(o.dialer))
	if err != nil {
		return nil, err
	}
	return zkConn{c}, nil
}

// zkConn is a conn on github.com/go-zookeeper/zk.
type zkConn struct{ c *zk.Conn }

func (z zkConn) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	_, err := z.c.CreateContainer(path, data, zk.FlagContainer, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func (z zkConn) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	_, err := z.c.Create(path, data, 0, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func (z zkConn) Exists(path string) (bool, error) {
	ok, _, err := z.c.Exists(path)
	return ok, err
}

func (z zkConn) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	_, err := z.c.Create(path, data, zk.FlagEphemeral, acl)
	return err
}

func (z zkConn) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	res, err := z.c.Multi(&zk.CheckVersionRequest{Path: guard, Version: -1},
		&zk.CreateRequest{Path: path, Data: data, Acl: acl, Flags: zk.FlagEphemeral})
	if len(res) == 2 {
		switch {
		case errors.Is(res[0].Error, zk.ErrNoNode):
			return &goneNode{path: guard, err: res[0].Error}
		case res[0].Error != nil:
			return res[0].Error
		}
		return res[1].Error
	}
	return err
}

func (z zkConn) SetIf(path string, data []byte, version int32) error {
	_, err := z.c.Set(path, data, version)
	return err
}

func (z zkConn) GetDataW(path string) ([]byte, Stat, <-chan Event, error) {
	data, st, ch, err := z.c.GetW(path)
	if err != nil {
		return nil, Stat{}, nil, err
	}
	return data, statOf(st), ch, nil
}

func (z zkConn) ChildrenW(path string) ([]string, <-chan Event, error) {
	names, _, ch, err := z.c.ChildrenW(path)
	if err != nil {
		return nil, nil, err
	}
	return names, ch, nil
}

func (z zkConn) ExistsW(path string) (bool, <-chan Event, error) {
	ok, _, ch, err := z.c.ExistsW(path)
	if err != nil {
		return false, nil, err
	}
	return ok, ch, nil
}

func (z zkConn) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	if len(prefixes) == 1 {
		node, err := z.c.Create(prefixes[0], data, zk.FlagEphemeralSequential, acl(prefixes[0]))
		if err != nil {
			return nil, err
		}
		return []string{node}, nil
	}
	ops := make([]any, len(prefixes))
	for i, p := range prefixes {
		ops[i] = &zk.CreateRequest{Path: p, Data: data, Acl: acl(p), Flags: zk.FlagEphemeralSequential}
	}
	return multi(z.c.Multi(ops...))
}

func (z zkConn) Delete(path string) error { return z.c.Delete(path, -1) }

func (z zkConn) DeleteAll(paths []string) error {
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
	}
	_, err := multi(z.c.Multi(ops...))
	return err
}

// multi reads a multi-operation's results: the path each op names (the
// created node's, for a create), or the first error.
func multi(res []zk.MultiResponse, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res))
	for i, r := range res {
		if r.Error != nil {
			return nil, r.Error
		}
		out[i] = r.String
	}
	return out, nil
}

func (z zkConn) Children(path string) ([]string, error) {
	names, _, err := z.c.Children(path)
	return names, err
}

func (z zkConn) ChildrenStatW(path string) ([]string, ParentStat, error) {
	names, st, _, err := z.c.ChildrenW(path)
	if err != nil {
		return nil, ParentStat{}, err
	}
	return names, ParentStat{Pzxid: st.Pzxid}, nil
}

func (z zkConn) ChildrenStat(path string) ([]string, ParentStat, error) {
	names, st, err := z.c.Children(path)
	if err != nil {
		return nil, ParentStat{}, err
	}
	return names, ParentStat{Pzxid: st.Pzxid}, nil
}

func (z zkConn) Get(path string) ([]byte, Stat, error) {
	data, st, err := z.c.Get(path)
	if err != nil {
		return nil, Stat{}, err
	}
	return data, statOf(st), nil
}

func (z zkConn) GetW(path string) (Stat, <-chan Event, error) {
	_, st, ch, err := z.c.GetW(path)
	if err != nil {
		return Stat{}, nil, err
	}
	return statOf(st), ch, nil
}

func (z zkConn) Check(paths []string) error {
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.CheckVersionRequest{Path: p, Version: -1}
	}
	res, err := z.c.Multi(ops...)
	for i, r := range res {
		if errors.Is(r.Error, zk.ErrNoNode) && i < len(paths) {
			return &goneNode{path: paths[i], err: r.Error}
		}
	}
	return err
}

// goneNode is the error of a check whose node is gone.
type goneNode struct {
	path string
	err  error
}

func (g *goneNode) Error() string { return g.path + ": " + g.err.Error() }
func (g *goneNode) Unwrap() error { return g.err }

// GoneAt reports an error of [Conn.Check] or [Conn.CreateEphemeralIf]
// that says path is gone.
func GoneAt(err error, path string) bool {
	var g *goneNode
	return errors.As(err, &g) && g.path == path
}

// GoneNodeError is the error [Conn.Check] returns when path is gone (err
// is zk.ErrNoNode), for a Conn other than go-zookeeper's (internal/zkfake).
func GoneNodeError(path string, err error) error { return &goneNode{path: path, err: err} }

func (z zkConn) Set(path string, data []byte) error {
	_, err := z.c.Set(path, data, -1)
	return err
}

func (z zkConn) Sync(path string) error {
	_, err := z.c.Sync(path)
	return err
}

func (z zkConn) AddAuth(scheme string, auth []byte) error { return z.c.AddAuth(scheme, auth) }
func (z zkConn) SessionID() int64                         { return z.c.SessionID() }
func (z zkConn) Close()                                   { z.c.Close() }

func statOf(s *zk.Stat) Stat {
	return Stat{Czxid: s.Czxid, EphemeralOwner: s.EphemeralOwner, Version: s.Version, Ctime: s.Ctime}
}

// zkLogger sends go-zookeeper's messages to slog at Debug.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zk: " + fmt.Sprintf(format, args...))
}
