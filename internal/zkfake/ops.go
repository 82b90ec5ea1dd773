package zkfake

import (
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
)

// The operations of the door ([session.Request]), each a transaction on
// the Server's tree. Hooks see each op by its name, the [session.Door]
// method's.

// Do implements [session.Backend].
func (c *Conn) Do(r session.Request) (session.Result, error) {
	if r.Op >= session.Op(len(ops)) || ops[r.Op] == nil {
		return session.Result{}, fmt.Errorf("%v: %w", r.Op, zk.ErrAPIError)
	}
	res, err := ops[r.Op](c, r)
	if err != nil {
		return session.Result{}, err
	}
	return res, nil
}

var ops = [...]func(c *Conn, r session.Request) (session.Result, error){
	session.OpCreateEach:        createEach,
	session.OpCreateContainer:   createContainer,
	session.OpCreatePersistent:  createPersistent,
	session.OpCreateEphemeral:   createEphemeral,
	session.OpCreateEphemeralIf: createEphemeralIf,
	session.OpDelete:            deleteOne,
	session.OpDeleteAll:         deleteAll,
	session.OpChildren:          children,
	session.OpChildrenStatW:     children,
	session.OpChildrenStat:      children,
	session.OpChildrenW:         children,
	session.OpGet:               get,
	session.OpGetW:              get,
	session.OpGetDataW:          get,
	session.OpCheck:             check,
	session.OpSet:               set,
	session.OpSetIf:             set,
	session.OpExists:            exists,
	session.OpExistsW:           existsW,
	session.OpSync:              nothing,
	session.OpAddAuth:           nothing, // accepted, and not checked: the fake has no ACLs
	session.OpHandOff:           handOff,
	session.OpFire:              fire,
	session.OpRegister:          register,
}

// handOff is HandOff's multi: the grant created, the node deleted, the
// grant deleted, in one transaction: its exists watches fire NodeCreated,
// then the node's watches NodeDeleted, then the grant's deletion fires
// nothing (its watches were spent).
func handOff(c *Conn, r session.Request) (session.Result, error) {
	node, g := r.Paths[0], r.Paths[1]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			evs, err := c.srv.guardedCreateLocked(node, g, se.id, evs)
			if err == errNoParent {
				err = zk.ErrNoNode // not met: the grant's parent is the node's
			}
			if err != nil {
				return evs, err
			}
			if evs, err = c.srv.deleteChecked(node, evs); err != nil {
				return evs, err
			}
			return c.srv.deleteChecked(g, evs)
		})
	})
}

// fire is Fire's multi: the guard checked, the grant created and deleted,
// with the grant's parent made first if missing; a grant that exists is
// success, as the op sees it (the After hook gets nil).
func fire(c *Conn, r session.Request) (session.Result, error) {
	guard, g := r.Paths[0], r.Paths[1]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		err := c.srv.withParentLocked(g, func() error {
			return c.srv.txn(func(evs []firing) ([]firing, error) {
				evs, err := c.srv.guardedCreateLocked(guard, g, se.id, evs)
				if err != nil {
					return evs, err
				}
				return c.srv.deleteChecked(g, evs)
			})
		})
		if err == zk.ErrNodeExists {
			return nil
		}
		return err
	})
}

// register is Register's multi: the node checked, the entry created, the
// node's data set if its version matches, with the entry's parent made
// first if missing. The create's watches fire before the set's.
func register(c *Conn, r session.Request) (session.Result, error) {
	node, entry := r.Paths[0], r.Paths[1]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.withParentLocked(entry, func() error {
			return c.srv.txn(func(evs []firing) ([]firing, error) {
				evs, err := c.srv.guardedCreateLocked(node, entry, se.id, evs)
				if err != nil {
					return evs, err
				}
				return c.srv.setLocked(node, r.Data, r.Version, evs)
			})
		})
	})
}

// errNoParent: a guarded create's parent is missing (withParentLocked).
var errNoParent = errors.New("zkfake: parent missing")

// guardedCreateLocked checks that guard exists ([session.GoneNodeError]
// if not), then creates path, a plain ephemeral of owner with no data;
// errNoParent if path's parent is missing.
func (s *Server) guardedCreateLocked(guard, path string, owner int64, evs []firing) ([]firing, error) {
	if s.nodes[guard] == nil {
		return evs, session.GoneNodeError(guard, zk.ErrNoNode)
	}
	if pp, _ := parentOf(path); s.nodes[pp] == nil {
		return evs, errNoParent
	}
	_, evs, err := s.createLocked(path, nil, owner, true, false, evs)
	return evs, err
}

// withParentLocked runs send; if it finds path's parent missing, it makes
// the parent as a container (one that exists is fine) in a transaction of
// its own and runs send again, as the door on go-zookeeper does. Nothing
// reaps the parent in between: srv.mu is held.
func (s *Server) withParentLocked(path string, send func() error) error {
	err := send()
	if err != errNoParent {
		return err
	}
	pp, _ := parentOf(path)
	if err := s.containerLocked(pp, nil); err != nil && err != zk.ErrNodeExists && err != zk.ErrNoNode {
		return err
	}
	if err = send(); err == errNoParent {
		return zk.ErrNoNode // the parent's own parent is missing
	}
	return err
}

// createEach makes ephemeral-sequential nodes, one multi.
func createEach(c *Conn, r session.Request) (session.Result, error) {
	var out []string
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			out = nil
			for _, p := range r.Paths {
				name, e, err := c.srv.createLocked(p, r.Data, se.id, true, true, evs)
				if err != nil {
					return evs, err
				}
				evs = e
				out = append(out, name)
			}
			return evs, nil
		})
	})
	return session.Result{Created: out}, err
}

// txn runs f as one transaction at a new zxid: if it fails, the tree is
// put back and no watch fires. srv.mu is held.
func (s *Server) txn(f func(evs []firing) ([]firing, error)) error {
	saved := s.snapshot()
	s.zxid++
	evs, err := f(nil)
	if err != nil {
		s.restore(saved)
		return err
	}
	s.fireLocked(evs)
	return nil
}

type snap struct {
	zxid  int64
	nodes map[string]znode
}

func (s *Server) snapshot() snap {
	m := make(map[string]znode, len(s.nodes))
	for p, n := range s.nodes {
		cp := *n
		cp.children = make(map[string]bool, len(n.children))
		for k := range n.children {
			cp.children[k] = true
		}
		m[p] = cp
	}
	return snap{s.zxid, m}
}

func (s *Server) restore(sn snap) {
	s.zxid = sn.zxid
	s.nodes = make(map[string]*znode, len(sn.nodes))
	for p, n := range sn.nodes {
		n := n
		s.nodes[p] = &n
	}
}

// createContainer: one that exists is fine, as the op sees it (the After
// hook gets nil).
func createContainer(c *Conn, r session.Request) (session.Result, error) {
	path := r.Paths[0]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		if err := c.srv.containerLocked(path, r.Data); err != zk.ErrNodeExists {
			return err
		}
		return nil
	})
}

// containerLocked creates a container node in a transaction of its own.
func (s *Server) containerLocked(path string, data []byte) error {
	err := s.txn(func(evs []firing) ([]firing, error) {
		_, evs, err := s.createLocked(path, data, 0, false, false, evs)
		return evs, err
	})
	if err == nil {
		s.nodes[path].container = true
	}
	return err
}

// createPersistent: one that exists is fine, after the hooks (the After
// hook gets zk.ErrNodeExists).
func createPersistent(c *Conn, r session.Request) (session.Result, error) {
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(r.Paths[0], r.Data, 0, false, false, evs)
			return evs, err
		})
	})
	if err == zk.ErrNodeExists {
		return session.Result{}, nil
	}
	return session.Result{}, err
}

func exists(c *Conn, r session.Request) (session.Result, error) {
	var ok bool
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		ok = c.srv.nodes[r.Paths[0]] != nil
		return nil
	})
	return session.Result{Exists: ok}, err
}

func createEphemeral(c *Conn, r session.Request) (session.Result, error) {
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(r.Paths[0], r.Data, se.id, true, false, evs)
			return evs, err
		})
	})
}

func (s *Server) deleteChecked(path string, evs []firing) ([]firing, error) {
	n := s.nodes[path]
	switch {
	case n == nil:
		return evs, zk.ErrNoNode
	case len(n.children) > 0:
		return evs, zk.ErrNotEmpty
	}
	return s.deleteLocked(path, evs), nil
}

// createEphemeralIf: one multi of a check that the guard exists and the
// create.
func createEphemeralIf(c *Conn, r session.Request) (session.Result, error) {
	guard, path := r.Paths[0], r.Paths[1]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			if c.srv.nodes[guard] == nil {
				return evs, session.GoneNodeError(guard, zk.ErrNoNode)
			}
			_, evs, err := c.srv.createLocked(path, r.Data, se.id, true, false, evs)
			return evs, err
		})
	})
}

func deleteOne(c *Conn, r session.Request) (session.Result, error) {
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) { return c.srv.deleteChecked(r.Paths[0], evs) })
	})
}

// deleteAll: one multi.
func deleteAll(c *Conn, r session.Request) (session.Result, error) {
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			for _, p := range r.Paths {
				var err error
				if evs, err = c.srv.deleteChecked(p, evs); err != nil {
					return evs, err
				}
			}
			return evs, nil
		})
	})
}

// children lists a node's children, with its stat, and leaves a children
// watch for the ops that do: ChildrenW's on a channel it returns,
// ChildrenStatW's for the callback alone.
func children(c *Conn, r session.Request) (session.Result, error) {
	path := r.Paths[0]
	var res session.Result
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		// ZooKeeper lists children in its hash set's order; sorted here,
		// so that runs replay (the engine sorts them anyway).
		res.Children = sortedKeys(n.children)
		res.Parent = session.ParentStat{Pzxid: n.pzxid}
		if r.Op == session.OpChildrenW || r.Op == session.OpChildrenStatW {
			se.childW[path] = true
			ch := c.addWatcherLocked(path, watchChild)
			if r.Op == session.OpChildrenW {
				res.Watch = ch
			}
		}
		return nil
	})
	return res, err
}

// get reads a node's data and stat, and leaves a data watch for GetW and
// GetDataW.
func get(c *Conn, r session.Request) (session.Result, error) {
	path := r.Paths[0]
	var res session.Result
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		res.Data = append([]byte(nil), n.data...)
		res.Stat = session.Stat{Czxid: n.czxid, EphemeralOwner: n.owner, Version: n.version, Ctime: n.ctime, Pzxid: n.pzxid}
		if r.Op != session.OpGet {
			se.dataW[path] = true
			res.Watch = c.addWatcherLocked(path, watchData)
		}
		return nil
	})
	return res, err
}

// existsW: a data watch if the node exists, an exists watch if not
// (go-zookeeper's ExistsW).
func existsW(c *Conn, r session.Request) (session.Result, error) {
	path := r.Paths[0]
	var res session.Result
	err := c.do(r.Op.String(), r.Paths, func(se *sess) error {
		res.Exists = c.srv.nodes[path] != nil
		se.dataW[path] = true
		if res.Exists {
			res.Watch = c.addWatcherLocked(path, watchData)
		} else {
			res.Watch = c.addWatcherLocked(path, watchExist)
		}
		return nil
	})
	return res, err
}

// check: a multi of version checks, a write that changes nothing but
// takes a zxid.
func check(c *Conn, r session.Request) (session.Result, error) {
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		for _, p := range r.Paths {
			if c.srv.nodes[p] == nil {
				return session.GoneNodeError(p, zk.ErrNoNode)
			}
		}
		c.srv.zxid++
		return nil
	})
}

// set overwrites a node's data if its version is r.Version (-1: any).
func set(c *Conn, r session.Request) (session.Result, error) {
	path := r.Paths[0]
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error {
		s := c.srv
		s.zxid++
		evs, err := s.setLocked(path, r.Data, r.Version, nil)
		if err != nil {
			s.zxid-- // refused: no transaction
			return err
		}
		s.fireLocked(evs)
		return nil
	})
}

// setLocked sets path's data at s.zxid if its version is version (-1:
// any). It changes nothing if it fails.
func (s *Server) setLocked(path string, data []byte, version int32, evs []firing) ([]firing, error) {
	n := s.nodes[path]
	switch {
	case n == nil:
		return evs, zk.ErrNoNode
	case version != -1 && version != n.version:
		return evs, zk.ErrBadVersion
	}
	n.data, n.version, n.mzxid = append([]byte(nil), data...), n.version+1, s.zxid
	return append(evs, firing{zk.EventNodeDataChanged, path}), nil
}

// nothing is an op that changes nothing on the fake: a round trip.
func nothing(c *Conn, r session.Request) (session.Result, error) {
	return session.Result{}, c.do(r.Op.String(), r.Paths, func(se *sess) error { return nil })
}

// SessionID implements [session.Backend].
func (c *Conn) SessionID() int64 {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.sid
}

// Close implements [session.Backend]: the session ends (its ephemerals
// are deleted), the watchers get ErrClosing, and later requests fail with
// zk.ErrClosing.
func (c *Conn) Close() {
	s := c.srv
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return
	}
	c.closed = true
	if se := s.sessions[c.sid]; se != nil && !se.expired {
		s.endSessionLocked(se)
	}
	c.invalidateLocked(zk.ErrClosing)
	if c.connected {
		c.connected = false
		c.emitLocked(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected, Server: "zkfake"})
	}
	s.state.Broadcast()
	s.mu.Unlock()
	c.qmu.Lock()
	c.done = true
	c.qmu.Unlock()
	c.qcond.Broadcast()
}
