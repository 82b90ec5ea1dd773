package session

import (
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"
)

// A chroot roots every path the Session's users name: "/locks/a" under the
// chroot "/apps/billing" is "/apps/billing/locks/a" on the server, and
// every path that comes back (a created node's name, a gone node, a watch
// event's path) comes back relative to it, as ZooKeeper's Java client does
// (ClientCnxn's chroot, stripped from created names and event paths), and
// kazoo. go-zookeeper has no chroot, so the Session puts [rooted] over its
// connection: the recipes, the keeper and the janitor all see relative
// paths.
//
// Unlike the Java client, kazoo and Curator (CURATOR-50, -280, -357), the
// Session creates a chroot that does not exist: the first create that
// finds it missing (a lock path's top ancestor, NONODE) creates its
// missing nodes as container nodes, as a lock path's ancestors are, with
// the Session's default ACL (the ACL provider speaks of paths under the
// chroot, and the chroot is not one), and tries again. The server reaps
// such a container once its last child is gone (ContainerManager), and the
// next create makes it again.

// rooted is a Conn whose paths are under root.
type rooted struct {
	Conn
	root string   // "/apps/billing": valid, not "/", no trailing slash
	acl  []zk.ACL // for the chroot's own nodes
}

// abs is path on the server.
func (r rooted) abs(path string) string {
	if path == "/" {
		return r.root
	}
	return r.root + path
}

// rel is a path from the server as the Session's users name it; a path
// outside the chroot is left as it is (the Java client's stripChroot does
// the same).
func (r rooted) rel(path string) string {
	switch {
	case path == r.root:
		return "/"
	case strings.HasPrefix(path, r.root) && len(path) > len(r.root) && path[len(r.root)] == '/':
		return path[len(r.root):]
	}
	return path
}

func (r rooted) absAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = r.abs(p)
	}
	return out
}

// relErr rewrites the path an error names ([goneNode]).
func (r rooted) relErr(err error) error {
	var g *goneNode
	if errors.As(err, &g) {
		return &goneNode{path: r.rel(g.path), err: g.err}
	}
	return err
}

// relEvent is a watch event as the Session's users see it.
func (r rooted) relEvent(ev Event) Event {
	if ev.Path != "" {
		ev.Path = r.rel(ev.Path)
	}
	return ev
}

// ensureRoot creates the chroot's missing nodes, outermost first.
func (r rooted) ensureRoot() error {
	for i := 1; i <= len(r.root); i++ {
		if i < len(r.root) && r.root[i] != '/' {
			continue
		}
		if err := r.Conn.CreateContainer(r.root[:i], nil, r.acl); err != nil {
			return err
		}
	}
	return nil
}

// topLevel reports whether path's parent is the chroot itself: a create
// there that finds no parent finds the chroot missing.
func topLevel(path string) bool { return strings.LastIndexByte(path, '/') == 0 }

// orRoot runs create, and again once the chroot is made if it failed for
// want of the chroot.
func (r rooted) orRoot(path string, create func() error) error {
	err := create()
	if topLevel(path) && errors.Is(err, zk.ErrNoNode) {
		if rerr := r.ensureRoot(); rerr != nil {
			return rerr
		}
		err = create()
	}
	return err
}

func (r rooted) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	names, err := r.Conn.CreateEach(r.absAll(prefixes), data, func(p string) []zk.ACL { return acl(r.rel(p)) })
	for i, n := range names {
		names[i] = r.rel(n)
	}
	return names, r.relErr(err)
}

func (r rooted) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	return r.orRoot(path, func() error { return r.Conn.CreateContainer(r.abs(path), data, acl) })
}

func (r rooted) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	return r.orRoot(path, func() error { return r.Conn.CreatePersistent(r.abs(path), data, acl) })
}

func (r rooted) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	return r.Conn.CreateEphemeral(r.abs(path), data, acl)
}

func (r rooted) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	return r.relErr(r.Conn.CreateEphemeralIf(r.abs(guard), r.abs(path), data, acl))
}

func (r rooted) Delete(path string) error { return r.Conn.Delete(r.abs(path)) }

func (r rooted) DeleteAll(paths []string) error { return r.relErr(r.Conn.DeleteAll(r.absAll(paths))) }

func (r rooted) Children(path string) ([]string, error) { return r.Conn.Children(r.abs(path)) }

func (r rooted) ChildrenStatW(path string) ([]string, ParentStat, error) {
	return r.Conn.ChildrenStatW(r.abs(path))
}

func (r rooted) ChildrenStat(path string) ([]string, ParentStat, error) {
	return r.Conn.ChildrenStat(r.abs(path))
}

func (r rooted) Get(path string) ([]byte, Stat, error) { return r.Conn.Get(r.abs(path)) }

// GetW, GetDataW, ChildrenW and ExistsW hand back go-zookeeper's watch
// channel as it is: the Event on it names the path on the server. Nothing
// reads a channel's Event's path (it only says that the watch fired); the
// Session's callback, which does, sees it relative ([Session.open]).
func (r rooted) GetW(path string) (Stat, <-chan Event, error) { return r.Conn.GetW(r.abs(path)) }

func (r rooted) Check(paths []string) error { return r.relErr(r.Conn.Check(r.absAll(paths))) }

func (r rooted) Set(path string, data []byte) error { return r.Conn.Set(r.abs(path), data) }

func (r rooted) SetIf(path string, data []byte, version int32) error {
	return r.Conn.SetIf(r.abs(path), data, version)
}

func (r rooted) GetDataW(path string) ([]byte, Stat, <-chan Event, error) {
	return r.Conn.GetDataW(r.abs(path))
}

func (r rooted) ChildrenW(path string) ([]string, <-chan Event, error) {
	return r.Conn.ChildrenW(r.abs(path))
}

func (r rooted) Exists(path string) (bool, error) { return r.Conn.Exists(r.abs(path)) }

func (r rooted) ExistsW(path string) (bool, <-chan Event, error) {
	return r.Conn.ExistsW(r.abs(path))
}

func (r rooted) Sync(path string) error { return r.Conn.Sync(r.abs(path)) }

// unrooted is the connection under c, paths as on the server.
func unrooted(c Conn) Conn {
	if r, ok := c.(rooted); ok {
		return r.Conn
	}
	return c
}
