package zklock

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
)

// conn is the library's one door to ZooKeeper: every call the engine, the
// leases and the janitor make goes through it, and only the [Client] holds
// one (see [Client.conn]). It is narrow on purpose, so that the Client can
// put a new connection underneath, and so that moving to another client
// library touches this file alone.
//
// Errors are go-zookeeper's, unwrapped, so [classify] can read them and
// users can match zk's sentinels.
type conn interface {
	// create makes n ephemeral-sequential nodes named prefix<seq>, in one
	// multi-operation when n > 1 (all or none, consecutive sequences).
	create(prefix string, data []byte, acl []zk.ACL, n int) ([]string, error)
	// createContainer makes a container node; one that exists is fine.
	createContainer(path string, acl []zk.ACL) error
	// delete deletes a node, whatever its version.
	delete(path string) error
	// children lists a node's children.
	children(path string) ([]string, error)
	// get reads a node's data and stat.
	get(path string) ([]byte, stat, error)
	// getW reads a node's stat and leaves a watch on it, which fires once:
	// when the node's data changes or it is deleted, or (with a
	// not-watching event) when the session ends.
	getW(path string) (stat, <-chan event, error)
	// set overwrites a node's data, whatever its version.
	set(path string, data []byte) error
	// sync makes the server this connection talks to catch up with the
	// leader.
	sync(path string) error
	// addAuth sends credentials, now and on every reconnect.
	addAuth(scheme string, auth []byte) error
	// sessionID is the current session's id, 0 while there is none.
	sessionID() int64
	// raw is the go-zookeeper connection, for [Client.Conn].
	raw() *zk.Conn
	// close ends the session and the connection.
	close()
}

// stat is what zklock reads of a node's zk.Stat.
type stat struct {
	czxid          int64 // the zxid that created the node: a lease's token
	ephemeralOwner int64 // the session that owns an ephemeral node
	version        int32 // the data version: a semaphore's hold announcement
}

// event is a watch notification.
type event = zk.Event

// deleted reports a watch event that says the node is gone.
func deleted(ev event) bool { return ev.Type == zk.EventNodeDeleted }

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
}

// dial opens a go-zookeeper connection. It returns before the session is
// established; onState reports it.
func dial(o dialOptions) (conn, error) {
	c, _, err := zk.Connect(o.servers, o.sessionTimeout,
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type != zk.EventSession {
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
		}),
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

func (z zkConn) create(prefix string, data []byte, acl []zk.ACL, n int) ([]string, error) {
	if n == 1 {
		node, err := z.c.Create(prefix, data, zk.FlagEphemeralSequential, acl)
		if err != nil {
			return nil, err
		}
		return []string{node}, nil
	}
	ops := make([]any, n)
	for i := range ops {
		ops[i] = &zk.CreateRequest{Path: prefix, Data: data, Acl: acl, Flags: zk.FlagEphemeralSequential}
	}
	res, err := z.c.Multi(ops...)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, len(res))
	for i, r := range res {
		if r.Error != nil {
			return nil, r.Error
		}
		nodes[i] = r.String
	}
	return nodes, nil
}

func (z zkConn) createContainer(path string, acl []zk.ACL) error {
	_, err := z.c.CreateContainer(path, nil, zk.FlagContainer, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func (z zkConn) delete(path string) error { return z.c.Delete(path, -1) }

func (z zkConn) children(path string) ([]string, error) {
	names, _, err := z.c.Children(path)
	return names, err
}

func (z zkConn) get(path string) ([]byte, stat, error) {
	data, st, err := z.c.Get(path)
	if err != nil {
		return nil, stat{}, err
	}
	return data, statOf(st), nil
}

func (z zkConn) getW(path string) (stat, <-chan event, error) {
	_, st, ch, err := z.c.GetW(path)
	if err != nil {
		return stat{}, nil, err
	}
	return statOf(st), ch, nil
}

func (z zkConn) set(path string, data []byte) error {
	_, err := z.c.Set(path, data, -1)
	return err
}

func (z zkConn) sync(path string) error {
	_, err := z.c.Sync(path)
	return err
}

func (z zkConn) addAuth(scheme string, auth []byte) error { return z.c.AddAuth(scheme, auth) }
func (z zkConn) sessionID() int64                         { return z.c.SessionID() }
func (z zkConn) raw() *zk.Conn                            { return z.c }
func (z zkConn) close()                                   { z.c.Close() }

func statOf(s *zk.Stat) stat {
	return stat{czxid: s.Czxid, ephemeralOwner: s.EphemeralOwner, version: s.Version}
}

// zkLogger sends go-zookeeper's messages to slog at Debug.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zk: " + fmt.Sprintf(format, args...))
}
