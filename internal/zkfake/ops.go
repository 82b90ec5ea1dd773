package zkfake

import (
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
)

// The operations of the door ([session.Conn]), each a transaction on the
// Server's tree.

// CreateEach implements [session.Conn]: ephemeral-sequential nodes, one
// multi.
func (c *Conn) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	var out []string
	err := c.do("CreateEach", prefixes, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			out = nil
			for _, p := range prefixes {
				name, e, err := c.srv.createLocked(p, data, se.id, true, true, evs)
				if err != nil {
					return evs, err
				}
				evs = e
				out = append(out, name)
			}
			return evs, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// CreateContainer implements [session.Conn].
func (c *Conn) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateContainer", []string{path}, func(se *sess) error {
		err := c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, 0, false, false, evs)
			return evs, err
		})
		if err == zk.ErrNodeExists {
			return nil
		}
		if err == nil {
			c.srv.nodes[path].container = true
		}
		return err
	})
}

// CreatePersistent implements [session.Conn].
func (c *Conn) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	err := c.do("CreatePersistent", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, 0, false, false, evs)
			return evs, err
		})
	})
	if err == zk.ErrNodeExists {
		return nil
	}
	return err
}

// Exists implements [session.Conn].
func (c *Conn) Exists(path string) (bool, error) {
	var ok bool
	err := c.do("Exists", []string{path}, func(se *sess) error {
		ok = c.srv.nodes[path] != nil
		return nil
	})
	return ok, err
}

// CreateEphemeral implements [session.Conn].
func (c *Conn) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateEphemeral", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			_, evs, err := c.srv.createLocked(path, data, se.id, true, false, evs)
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

// CreateEphemeralIf implements [session.Conn]: one multi of a check that
// guard exists and the create.
func (c *Conn) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	return c.do("CreateEphemeralIf", []string{guard, path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			if c.srv.nodes[guard] == nil {
				return evs, session.GoneNodeError(guard, zk.ErrNoNode)
			}
			_, evs, err := c.srv.createLocked(path, data, se.id, true, false, evs)
			return evs, err
		})
	})
}

// Delete implements [session.Conn].
func (c *Conn) Delete(path string) error {
	return c.do("Delete", []string{path}, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) { return c.srv.deleteChecked(path, evs) })
	})
}

// DeleteAll implements [session.Conn]: one multi.
func (c *Conn) DeleteAll(paths []string) error {
	return c.do("DeleteAll", paths, func(se *sess) error {
		return c.srv.txn(func(evs []firing) ([]firing, error) {
			for _, p := range paths {
				var err error
				if evs, err = c.srv.deleteChecked(p, evs); err != nil {
					return evs, err
				}
			}
			return evs, nil
		})
	})
}

// Children implements [session.Conn].
func (c *Conn) Children(path string) ([]string, error) {
	names, _, err := c.children("Children", path, false)
	return names, err
}

func (c *Conn) children(name, path string, watch bool) ([]string, session.ParentStat, error) {
	var names []string
	var ps session.ParentStat
	err := c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		// ZooKeeper lists children in its hash set's order; sorted here,
		// so that runs replay (the engine sorts them anyway).
		names = sortedKeys(n.children)
		ps = session.ParentStat{Pzxid: n.pzxid}
		if watch {
			se.childW[path] = true
			c.addWatcherLocked(path, watchChild)
		}
		return nil
	})
	if err != nil {
		return nil, session.ParentStat{}, err
	}
	return names, ps, nil
}

// ChildrenStatW implements [session.Conn].
func (c *Conn) ChildrenStatW(path string) ([]string, session.ParentStat, error) {
	return c.children("ChildrenStatW", path, true)
}

// ChildrenStat implements [session.Conn].
func (c *Conn) ChildrenStat(path string) ([]string, session.ParentStat, error) {
	return c.children("ChildrenStat", path, false)
}

// ChildrenW implements [session.Conn].
func (c *Conn) ChildrenW(path string) ([]string, <-chan session.Event, error) {
	var names []string
	var ch chan zk.Event
	err := c.do("ChildrenW", []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		names = sortedKeys(n.children)
		se.childW[path] = true
		ch = c.addWatcherLocked(path, watchChild)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return names, ch, nil
}

func (c *Conn) get(name, path string, watch bool) ([]byte, session.Stat, chan zk.Event, error) {
	var data []byte
	var st session.Stat
	var ch chan zk.Event
	err := c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		if n == nil {
			return zk.ErrNoNode
		}
		data = append([]byte(nil), n.data...)
		st = session.Stat{Czxid: n.czxid, EphemeralOwner: n.owner, Version: n.version, Ctime: n.ctime}
		if watch {
			se.dataW[path] = true
			ch = c.addWatcherLocked(path, watchData)
		}
		return nil
	})
	if err != nil {
		return nil, session.Stat{}, nil, err
	}
	return data, st, ch, nil
}

// Get implements [session.Conn].
func (c *Conn) Get(path string) ([]byte, session.Stat, error) {
	data, st, _, err := c.get("Get", path, false)
	return data, st, err
}

// GetW implements [session.Conn].
func (c *Conn) GetW(path string) (session.Stat, <-chan session.Event, error) {
	_, st, ch, err := c.get("GetW", path, true)
	if err != nil {
		return st, nil, err
	}
	return st, ch, nil
}

// GetDataW implements [session.Conn].
func (c *Conn) GetDataW(path string) ([]byte, session.Stat, <-chan session.Event, error) {
	data, st, ch, err := c.get("GetDataW", path, true)
	if err != nil {
		return nil, st, nil, err
	}
	return data, st, ch, nil
}

// ExistsW implements [session.Conn]: a data watch if the node exists, an
// exists watch if not (go-zookeeper's ExistsW).
func (c *Conn) ExistsW(path string) (bool, <-chan session.Event, error) {
	var ok bool
	var ch chan zk.Event
	err := c.do("ExistsW", []string{path}, func(se *sess) error {
		ok = c.srv.nodes[path] != nil
		se.dataW[path] = true
		if ok {
			ch = c.addWatcherLocked(path, watchData)
		} else {
			ch = c.addWatcherLocked(path, watchExist)
		}
		return nil
	})
	if err != nil {
		return false, nil, err
	}
	return ok, ch, nil
}

// Check implements [session.Conn]: a multi of version checks, a write
// that changes nothing but takes a zxid.
func (c *Conn) Check(paths []string) error {
	return c.do("Check", paths, func(se *sess) error {
		for _, p := range paths {
			if c.srv.nodes[p] == nil {
				return session.GoneNodeError(p, zk.ErrNoNode)
			}
		}
		c.srv.zxid++
		return nil
	})
}

// Set implements [session.Conn].
func (c *Conn) Set(path string, data []byte) error { return c.set("Set", path, data, -1) }

// SetIf implements [session.Conn].
func (c *Conn) SetIf(path string, data []byte, version int32) error {
	return c.set("SetIf", path, data, version)
}

func (c *Conn) set(name, path string, data []byte, version int32) error {
	return c.do(name, []string{path}, func(se *sess) error {
		n := c.srv.nodes[path]
		switch {
		case n == nil:
			return zk.ErrNoNode
		case version != -1 && version != n.version:
			return zk.ErrBadVersion
		}
		c.srv.zxid++
		n.data, n.version, n.mzxid = append([]byte(nil), data...), n.version+1, c.srv.zxid
		c.srv.fireLocked([]firing{{zk.EventNodeDataChanged, path}})
		return nil
	})
}

// Sync implements [session.Conn].
func (c *Conn) Sync(path string) error {
	return c.do("Sync", []string{path}, func(se *sess) error { return nil })
}

// AddAuth implements [session.Conn]: accepted, and not checked (the fake
// has no ACLs).
func (c *Conn) AddAuth(scheme string, auth []byte) error {
	return c.do("AddAuth", nil, func(se *sess) error { return nil })
}

// SessionID implements [session.Conn].
func (c *Conn) SessionID() int64 {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.sid
}

// Raw implements [session.Conn]: there is no go-zookeeper connection.
func (c *Conn) Raw() *zk.Conn { return nil }

// Close implements [session.Conn]: the session ends (its ephemerals are
// deleted), the watchers get ErrClosing, and later requests fail with
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
