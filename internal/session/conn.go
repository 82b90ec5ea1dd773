package session

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Conn is the library's one door to ZooKeeper: every call of the engine,
// the leases and the janitor goes through it, and only the [Session] holds
// one ([Session.Conn]), so that it can put a new connection underneath.
// Errors are go-zookeeper's, unwrapped: callers outside this package ask
// [Session.Classify] (or [BadVersion], [NodeExists]) what they mean.
//
// Its operations are declared once, as [Door]'s methods: each builds one
// [Request] for the [Backend]'s one method Do, which the connections
// implement (zkBackend, internal/zkfake) and the layers between override
// ([rooted], [sentConn]). A new operation is a method, an [Op], and a case
// in each connection.
type Conn = *Door

// Door is the door's concrete type, held as a [Conn]; nil is no door.
type Door struct{ b Backend }

// NewConn returns the door on b.
func NewConn(b Backend) Conn { return &Door{b: b} }

// Backend is what a [Door] stands on. Do runs one request: its result
// (the fields each [Op] names), or its error. A layer embeds the Backend
// under it and overrides Do alone.
type Backend interface {
	Do(req Request) (Result, error)
	SessionID() int64
	Close()
}

// Op is what a [Request] asks: one per [Door] method, named after it.
type Op uint8

const (
	OpCreateEach        Op = iota // [Door.CreateEach]: Paths are the prefixes; Result.Created
	OpCreateContainer             // [Door.CreateContainer]
	OpCreatePersistent            // [Door.CreatePersistent]
	OpCreateEphemeral             // [Door.CreateEphemeral]
	OpCreateEphemeralIf           // [Door.CreateEphemeralIf]: Paths are guard, then the node
	OpDelete                      // [Door.Delete]
	OpDeleteAll                   // [Door.DeleteAll]
	OpChildren                    // [Door.Children]: Result.Children
	OpChildrenStatW               // [Door.ChildrenStatW]: Result.Children, Parent; a watch no channel hears
	OpChildrenStat                // [Door.ChildrenStat]: Result.Children, Parent
	OpChildrenW                   // [Door.ChildrenW]: Result.Children, Watch
	OpGet                         // [Door.Get]: Result.Data, Stat
	OpGetW                        // [Door.GetW]: Result.Stat, Watch
	OpGetDataW                    // [Door.GetDataW]: Result.Data, Stat, Watch
	OpCheck                       // [Door.Check]
	OpSet                         // [Door.Set]: Version is -1
	OpSetIf                       // [Door.SetIf]
	OpExists                      // [Door.Exists]: Result.Exists
	OpExistsW                     // [Door.ExistsW]: Result.Exists, Watch
	OpSync                        // [Door.Sync]
	OpAddAuth                     // [Door.AddAuth]: Scheme, and the credentials in Data
	OpHandOff                     // [Door.HandOff]: Paths are the node, then the grant
	OpFire                        // [Door.Fire]: Paths are the guard, then the grant
	OpRegister                    // [Door.Register]: Paths are the node, then the entry
	opCount
)

var opNames = [opCount]string{
	"CreateEach", "CreateContainer", "CreatePersistent", "CreateEphemeral", "CreateEphemeralIf",
	"Delete", "DeleteAll", "Children", "ChildrenStatW", "ChildrenStat", "ChildrenW",
	"Get", "GetW", "GetDataW", "Check", "Set", "SetIf", "Exists", "ExistsW", "Sync", "AddAuth",
	"HandOff", "Fire", "Register",
}

// String is the name of the [Door] method that makes the request.
func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Request is one operation through the door. Paths are what a layer
// rewrites (the chroot): no other field names a node.
type Request struct {
	Op      Op
	Paths   []string   // the nodes it names (see [Op])
	Data    []byte     // what a create or a set writes
	ACL     [][]zk.ACL // the ACL of each node a create makes, in order
	Version int32      // a set's expected data version, -1 for any
	Scheme  string     // AddAuth's
}

// Result is what an operation returns. Created holds paths (a layer
// rewrites them); Children, names.
type Result struct {
	Created  []string
	Children []string
	Data     []byte
	Stat     Stat
	Parent   ParentStat
	Exists   bool
	Watch    <-chan Event
}

// do runs req: its result, or its error alone.
func (d *Door) do(req Request) (Result, error) {
	res, err := d.b.Do(req)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

func (d *Door) on(op Op, path string) (Result, error) {
	return d.do(Request{Op: op, Paths: []string{path}})
}

func (d *Door) run(req Request) error {
	_, err := d.do(req)
	return err
}

// CreateEach makes an ephemeral-sequential node prefix<seq> for each
// prefix, in one multi-operation: all or none, with one zxid (the
// sequences of one path consecutive). One prefix is a plain create.
func (d *Door) CreateEach(prefixes []string, data []byte, acl func(path string) []zk.ACL) ([]string, error) {
	acls := make([][]zk.ACL, len(prefixes))
	for i, p := range prefixes {
		acls[i] = acl(p)
	}
	res, err := d.do(Request{Op: OpCreateEach, Paths: prefixes, Data: data, ACL: acls})
	return res.Created, err
}

// CreateContainer makes a container node; one that exists is fine.
func (d *Door) CreateContainer(path string, data []byte, acl []zk.ACL) error {
	return d.run(Request{Op: OpCreateContainer, Paths: []string{path}, Data: data, ACL: [][]zk.ACL{acl}})
}

// CreatePersistent makes a persistent node; one that exists is fine.
func (d *Door) CreatePersistent(path string, data []byte, acl []zk.ACL) error {
	return d.run(Request{Op: OpCreatePersistent, Paths: []string{path}, Data: data, ACL: [][]zk.ACL{acl}})
}

// CreateEphemeral makes a plain (not sequential) ephemeral node.
func (d *Door) CreateEphemeral(path string, data []byte, acl []zk.ACL) error {
	return d.run(Request{Op: OpCreateEphemeral, Paths: []string{path}, Data: data, ACL: [][]zk.ACL{acl}})
}

// CreateEphemeralIf makes a plain ephemeral node in one multi-operation
// with a check that guard exists: if guard is gone, nothing is made, and
// [GoneAt](err, guard) holds.
func (d *Door) CreateEphemeralIf(guard, path string, data []byte, acl []zk.ACL) error {
	return d.run(Request{Op: OpCreateEphemeralIf, Paths: []string{guard, path}, Data: data, ACL: [][]zk.ACL{acl}})
}

// Delete deletes a node, whatever its version.
func (d *Door) Delete(path string) error { return d.run(Request{Op: OpDelete, Paths: []string{path}}) }

// DeleteAll deletes nodes, whatever their versions, all or none.
func (d *Door) DeleteAll(paths []string) error { return d.run(Request{Op: OpDeleteAll, Paths: paths}) }

// Children lists a node's children.
func (d *Door) Children(path string) ([]string, error) {
	res, err := d.on(OpChildren, path)
	return res.Children, err
}

// ChildrenStatW lists a node's children with its Stat, read together
// (DataTree.getChildren copies both under the node's lock), and leaves a
// children watch whose Event only the connection's callback sees (held.go).
func (d *Door) ChildrenStatW(path string) ([]string, ParentStat, error) {
	res, err := d.on(OpChildrenStatW, path)
	return res.Children, res.Parent, err
}

// ChildrenStat is ChildrenStatW without the watch, so without a
// notification later.
func (d *Door) ChildrenStat(path string) ([]string, ParentStat, error) {
	res, err := d.on(OpChildrenStat, path)
	return res.Children, res.Parent, err
}

// ChildrenW lists path's children and watches them (an election's
// observer, while nobody leads).
func (d *Door) ChildrenW(path string) ([]string, <-chan Event, error) {
	res, err := d.on(OpChildrenW, path)
	return res.Children, res.Watch, err
}

// Get reads a node's data and stat.
func (d *Door) Get(path string) ([]byte, Stat, error) {
	res, err := d.on(OpGet, path)
	return res.Data, res.Stat, err
}

// GetW reads a node's stat and leaves a watch that fires once: when its
// data changes or it is deleted, or (not watching) when the session ends.
func (d *Door) GetW(path string) (Stat, <-chan Event, error) {
	res, err := d.on(OpGetW, path)
	return res.Stat, res.Watch, err
}

// GetDataW is GetW with the node's data.
func (d *Door) GetDataW(path string) ([]byte, Stat, <-chan Event, error) {
	res, err := d.on(OpGetDataW, path)
	return res.Data, res.Stat, res.Watch, err
}

// Check is a write that changes nothing: a multi of one version check
// (any version) per path. ZooKeeper commits it through the leader and a
// quorum like any write (it takes a zxid), so its reply confirms the
// session; a path gone fails it with a *goneNode (zk.ErrNoNode) naming it.
func (d *Door) Check(paths []string) error { return d.run(Request{Op: OpCheck, Paths: paths}) }

// Set overwrites a node's data, whatever its version.
func (d *Door) Set(path string, data []byte) error {
	return d.run(Request{Op: OpSet, Paths: []string{path}, Data: data, Version: -1})
}

// SetIf overwrites a node's data if its version is version.
func (d *Door) SetIf(path string, data []byte, version int32) error {
	return d.run(Request{Op: OpSetIf, Paths: []string{path}, Data: data, Version: version})
}

// Exists reports whether path exists.
func (d *Door) Exists(path string) (bool, error) {
	res, err := d.on(OpExists, path)
	return res.Exists, err
}

// ExistsW reports whether path exists, and watches it (for its creation
// if it does not).
func (d *Door) ExistsW(path string) (bool, <-chan Event, error) {
	res, err := d.on(OpExistsW, path)
	return res.Exists, res.Watch, err
}

// Sync makes the server this connection talks to catch up with the leader.
func (d *Door) Sync(path string) error { return d.run(Request{Op: OpSync, Paths: []string{path}}) }

// AddAuth sends credentials, now and on every reconnect.
func (d *Door) AddAuth(scheme string, auth []byte) error {
	return d.run(Request{Op: OpAddAuth, Scheme: scheme, Data: auth})
}

// HandOff deletes node and fires grant in one multi-operation: grant
// created (ephemeral), node deleted, grant deleted (the handoff's release:
// zklock's handoff.go). No read ever lists grant; only the exists watches
// on it fire (NodeCreated). If node is gone it fails whole, with node's
// error.
func (d *Door) HandOff(node, grant string, acl []zk.ACL) error {
	return d.run(Request{Op: OpHandOff, Paths: []string{node, grant}, ACL: [][]zk.ACL{acl}})
}

// Fire fires grant as HandOff does, if guard exists: a check of guard,
// then grant created and deleted, in one multi. If guard is gone it fails
// whole, [GoneAt] guard. If grant's parent is missing (a registry, a
// container the server reaps when empty), Fire makes it, as
// CreateContainer does (with acl's ACL for it), and fires again. If grant
// exists (a registry's entry, made by its owner meanwhile), it returns
// nil: an exists watch set while grant was missing heard NodeCreated when
// it was made, and one set again after a reconnect hears it at once
// (DataTree.setWatches).
func (d *Door) Fire(guard, grant string, acl func(path string) []zk.ACL) error {
	return d.run(Request{Op: OpFire, Paths: []string{guard, grant}, ACL: withParentACL(grant, acl)})
}

// Register makes entry, a plain ephemeral node with no data, and sets
// node's data if its version is version (-1: any), in one multi: a check
// that node exists, the create, then the set. The create comes first so
// that a session with an exists watch on entry hears NodeCreated(entry)
// before NodeDataChanged(node): ZooKeeper applies a multi's operations in
// order, each triggering its own watches (DataTree.processTxn). Nothing is
// made if it fails: [GoneAt](err, node) if node is gone, [BadVersion] if
// its version differs, [NodeExists] if entry exists. If entry's parent is
// missing (a container the server reaps when empty), Register makes it, as
// CreateContainer does, and sends the multi again; the check keeps it
// from making one for a node that is gone. acl gives each node it makes
// its ACL, by its path.
func (d *Door) Register(node, entry string, data []byte, version int32, acl func(path string) []zk.ACL) error {
	return d.run(Request{Op: OpRegister, Paths: []string{node, entry}, Data: data, Version: version, ACL: withParentACL(entry, acl)})
}

// withParentACL is the ACLs of a create under a parent it may make: the
// node's, then the parent's, each as acl gives it for its path.
func withParentACL(path string, acl func(path string) []zk.ACL) [][]zk.ACL {
	return [][]zk.ACL{acl(path), acl(parentOf(path))}
}

// parentOf is path's parent ("/" for a top-level node).
func parentOf(path string) string { return path[:max(strings.LastIndexByte(path, '/'), 1)] }

// SessionID is the current session's id, 0 while there is none.
func (d *Door) SessionID() int64 { return d.b.SessionID() }

// Close ends the session and the connection.
func (d *Door) Close() { d.b.Close() }

// Stat is what zklock reads of a node's zk.Stat.
type Stat struct {
	Czxid          int64 // the zxid that created the node: a lease's token
	EphemeralOwner int64 // the session that owns an ephemeral node
	Version        int32 // the data Version: a semaphore's hold announcement
	Ctime          int64 // when the node was created, in ms since the epoch (the leader's clock)
	Pzxid          int64 // the zxid of the latest create or delete of a child: a granted lease's token
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

// Created reports a watch's NodeCreated: an exists watch's node made.
func Created(ev Event) bool { return ev.Type == zk.EventNodeCreated }

// DataChanged reports a watch Event that says the node's data changed.
func DataChanged(ev Event) bool { return ev.Type == zk.EventNodeDataChanged }

// ChildrenChanged reports a watch Event that says the node's children
// changed.
func ChildrenChanged(ev Event) bool { return ev.Type == zk.EventNodeChildrenChanged }

// dialOptions is what opening a connection takes.
type dialOptions struct {
	servers        []string
	sessionTimeout time.Duration
	dialer         zk.Dialer
	log            *slog.Logger
	// onState (every change of the session's state) and onWatch (every
	// watch Event, before the watch's channel gets it) are called from the
	// connection's own goroutine: they must never block.
	onState func(s zk.State, server string)
	onWatch func(ev Event)
	// hosts, if set, is the server list (see [hosts]).
	hosts *hosts
}

// callback is go-zookeeper's event callback.
func (o dialOptions) callback(ev zk.Event) {
	switch ev.Type {
	case zk.EventSession:
		o.onState(ev.State, ev.Server)
	case zk.EventNotWatching:
	default:
		o.onWatch(ev)
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
	return NewConn(zkBackend{c}), nil
}

// zkBackend is the [Backend] on go-zookeeper: each [Op] in zkOps.
type zkBackend struct{ c *zk.Conn }

func (z zkBackend) Do(r Request) (Result, error) {
	if r.Op >= opCount {
		return Result{}, fmt.Errorf("%v: %w", r.Op, zk.ErrAPIError)
	}
	return zkOps[r.Op](z.c, r)
}

func (z zkBackend) SessionID() int64 { return z.c.SessionID() }
func (z zkBackend) Close()           { z.c.Close() }

var zkOps = [opCount]func(c *zk.Conn, r Request) (Result, error){
	OpCreateEach: zkCreateEach,
	OpCreateContainer: func(c *zk.Conn, r Request) (Result, error) {
		_, err := c.CreateContainer(r.Paths[0], r.Data, zk.FlagContainer, r.ACL[0])
		return Result{}, existsFine(err)
	},
	OpCreatePersistent: func(c *zk.Conn, r Request) (Result, error) {
		_, err := c.Create(r.Paths[0], r.Data, 0, r.ACL[0])
		return Result{}, existsFine(err)
	},
	OpCreateEphemeral: func(c *zk.Conn, r Request) (Result, error) {
		_, err := c.Create(r.Paths[0], r.Data, zk.FlagEphemeral, r.ACL[0])
		return Result{}, err
	},
	OpCreateEphemeralIf: zkCreateEphemeralIf,
	OpDelete: func(c *zk.Conn, r Request) (Result, error) {
		return Result{}, c.Delete(r.Paths[0], -1)
	},
	OpDeleteAll: func(c *zk.Conn, r Request) (Result, error) {
		ops := make([]any, len(r.Paths))
		for i, p := range r.Paths {
			ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
		}
		_, err := multi(c.Multi(ops...))
		return Result{}, err
	},
	OpChildren:      zkChildren,
	OpChildrenStat:  zkChildren,
	OpChildrenStatW: zkChildrenW,
	OpChildrenW:     zkChildrenW,
	OpGet: func(c *zk.Conn, r Request) (Result, error) {
		data, st, err := c.Get(r.Paths[0])
		if err != nil {
			return Result{}, err
		}
		return Result{Data: data, Stat: statOf(st)}, nil
	},
	OpGetW:     zkGetW,
	OpGetDataW: zkGetW,
	OpCheck:    zkCheck,
	OpSet:      zkSet,
	OpSetIf:    zkSet,
	OpExists: func(c *zk.Conn, r Request) (Result, error) {
		ok, _, err := c.Exists(r.Paths[0])
		return Result{Exists: ok}, err
	},
	OpExistsW: func(c *zk.Conn, r Request) (Result, error) {
		ok, _, ch, err := c.ExistsW(r.Paths[0])
		return Result{Exists: ok, Watch: ch}, err
	},
	OpSync: func(c *zk.Conn, r Request) (Result, error) {
		_, err := c.Sync(r.Paths[0])
		return Result{}, err
	},
	OpAddAuth: func(c *zk.Conn, r Request) (Result, error) {
		return Result{}, c.AddAuth(r.Scheme, r.Data)
	},
	OpHandOff:  zkHandOff,
	OpFire:     zkFire,
	OpRegister: zkRegister,
}

// zkHandOff is HandOff's multi: the grant made, the node deleted, the
// grant deleted; the node's NoNode comes back as a [GoneNodeError] at its
// path. The grant's parent is the node's, which exists while it does.
func zkHandOff(c *zk.Conn, r Request) (Result, error) {
	node, grant := r.Paths[0], r.Paths[1]
	ops := []any{&zk.CreateRequest{Path: grant, Acl: r.ACL[0], Flags: zk.FlagEphemeral},
		&zk.DeleteRequest{Path: node, Version: -1}, &zk.DeleteRequest{Path: grant, Version: -1}}
	res, err := c.Multi(ops...)
	if len(res) != len(ops) {
		return Result{}, err
	}
	if errors.Is(res[1].Error, zk.ErrNoNode) {
		return Result{}, &goneNode{path: node, err: res[1].Error}
	}
	_, err = multi(res, nil)
	return Result{}, err
}

// zkFire is Fire's multi, [check guard, create grant, delete grant], with
// grant's parent made when missing; grant found existing is success (see
// [Door.Fire]).
func zkFire(c *zk.Conn, r Request) (Result, error) {
	guard, grant := r.Paths[0], r.Paths[1]
	err := withParent(c, grant, r.ACL[1], func() error {
		return zkGuarded(c, guard, grant, r.ACL[0], &zk.DeleteRequest{Path: grant, Version: -1})
	})
	return Result{}, existsFine(err)
}

// zkRegister is Register's multi, [check node, create entry, set node],
// with entry's parent made when missing.
func zkRegister(c *zk.Conn, r Request) (Result, error) {
	node, entry := r.Paths[0], r.Paths[1]
	return Result{}, withParent(c, entry, r.ACL[1], func() error {
		return zkGuarded(c, node, entry, r.ACL[0], &zk.SetDataRequest{Path: node, Data: r.Data, Version: r.Version})
	})
}

// noParent: a guarded multi's create found its parent missing.
type noParent struct{ err error }

func (e noParent) Error() string { return "parent missing: " + e.err.Error() }
func (e noParent) Unwrap() error { return e.err }

// zkGuarded sends [check guard, create path (ephemeral, no data), then]
// as one multi. A failed multi reports the failing operation's error and
// OK or runtime-inconsistency for the others (PrepRequestProcessor stops
// at the first failure; DataTree.processTxn), so the index tells which
// failed: the guard's NoNode comes back as a [GoneNodeError] at guard, the
// create's as noParent (the guard exists, so path's parent is missing),
// anything else as the multi's first error.
func zkGuarded(c *zk.Conn, guard, path string, acl []zk.ACL, then any) error {
	res, err := c.Multi(&zk.CheckVersionRequest{Path: guard, Version: -1},
		&zk.CreateRequest{Path: path, Acl: acl, Flags: zk.FlagEphemeral}, then)
	switch {
	case len(res) != 3:
		return err
	case errors.Is(res[0].Error, zk.ErrNoNode):
		return &goneNode{path: guard, err: res[0].Error}
	case errors.Is(res[1].Error, zk.ErrNoNode):
		return noParent{res[1].Error}
	}
	return err
}

// maxParentTries bounds the multis a create under a missing parent sends:
// the parent, once made, goes only when the server reaps it, empty, which
// it does once a minute (ContainerManager), so a second try almost always
// finds it.
const maxParentTries = 3

// withParent sends send, and while it finds path's parent missing
// (noParent), makes the parent as a container with acl (one that exists
// is fine) and sends it again, up to maxParentTries in all. A parent that
// cannot be made for its own parent missing (the lock path gone, and the
// guard with it) is left to the next send to report.
func withParent(c *zk.Conn, path string, acl []zk.ACL, send func() error) error {
	parent := parentOf(path)
	for try := 1; ; try++ {
		err := send()
		var np noParent
		if !errors.As(err, &np) {
			return err
		}
		if try == maxParentTries {
			return np.err
		}
		_, err = c.CreateContainer(parent, nil, zk.FlagContainer, acl)
		if err = existsFine(err); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
}

func existsFine(err error) error {
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func zkCreateEach(c *zk.Conn, r Request) (Result, error) {
	if len(r.Paths) == 1 {
		node, err := c.Create(r.Paths[0], r.Data, zk.FlagEphemeralSequential, r.ACL[0])
		if err != nil {
			return Result{}, err
		}
		return Result{Created: []string{node}}, nil
	}
	ops := make([]any, len(r.Paths))
	for i, p := range r.Paths {
		ops[i] = &zk.CreateRequest{Path: p, Data: r.Data, Acl: r.ACL[i], Flags: zk.FlagEphemeralSequential}
	}
	made, err := multi(c.Multi(ops...))
	return Result{Created: made}, err
}

func zkCreateEphemeralIf(c *zk.Conn, r Request) (Result, error) {
	guard, path := r.Paths[0], r.Paths[1]
	res, err := c.Multi(&zk.CheckVersionRequest{Path: guard, Version: -1},
		&zk.CreateRequest{Path: path, Data: r.Data, Acl: r.ACL[0], Flags: zk.FlagEphemeral})
	if len(res) == 2 {
		switch {
		case errors.Is(res[0].Error, zk.ErrNoNode):
			return Result{}, &goneNode{path: guard, err: res[0].Error}
		case res[0].Error != nil:
			return Result{}, res[0].Error
		}
		return Result{}, res[1].Error
	}
	return Result{}, err
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

func zkChildren(c *zk.Conn, r Request) (Result, error) {
	names, st, err := c.Children(r.Paths[0])
	if err != nil {
		return Result{}, err
	}
	return Result{Children: names, Parent: ParentStat{Pzxid: st.Pzxid}}, nil
}

// zkChildrenW hands the watch's channel to ChildrenW alone: nothing reads
// ChildrenStatW's (a layer would only carry it).
func zkChildrenW(c *zk.Conn, r Request) (Result, error) {
	names, st, ch, err := c.ChildrenW(r.Paths[0])
	if err != nil {
		return Result{}, err
	}
	res := Result{Children: names, Parent: ParentStat{Pzxid: st.Pzxid}}
	if r.Op == OpChildrenW {
		res.Watch = ch
	}
	return res, nil
}

func zkGetW(c *zk.Conn, r Request) (Result, error) {
	data, st, ch, err := c.GetW(r.Paths[0])
	if err != nil {
		return Result{}, err
	}
	return Result{Data: data, Stat: statOf(st), Watch: ch}, nil
}

func zkCheck(c *zk.Conn, r Request) (Result, error) {
	ops := make([]any, len(r.Paths))
	for i, p := range r.Paths {
		ops[i] = &zk.CheckVersionRequest{Path: p, Version: -1}
	}
	res, err := c.Multi(ops...)
	for i, m := range res {
		if errors.Is(m.Error, zk.ErrNoNode) && i < len(r.Paths) {
			return Result{}, &goneNode{path: r.Paths[i], err: m.Error}
		}
	}
	return Result{}, err
}

func zkSet(c *zk.Conn, r Request) (Result, error) {
	_, err := c.Set(r.Paths[0], r.Data, r.Version)
	return Result{}, err
}

// goneNode: a check's node is gone.
type goneNode struct {
	path string
	err  error
}

func (g *goneNode) Error() string { return g.path + ": " + g.err.Error() }
func (g *goneNode) Unwrap() error { return g.err }

// GoneAt reports an error of [Door.Check], [Door.CreateEphemeralIf],
// [Door.HandOff], [Door.Fire] or [Door.Register] that says path is gone.
func GoneAt(err error, path string) bool {
	var g *goneNode
	return errors.As(err, &g) && g.path == path
}

// GoneNodeError is [Door.Check]'s error for path gone (err: zk.ErrNoNode),
// for another Backend (internal/zkfake).
func GoneNodeError(path string, err error) error { return &goneNode{path: path, err: err} }

func statOf(s *zk.Stat) Stat {
	return Stat{Czxid: s.Czxid, EphemeralOwner: s.EphemeralOwner, Version: s.Version, Ctime: s.Ctime, Pzxid: s.Pzxid}
}

// zkLogger sends go-zookeeper's messages to slog at Debug.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zk: " + fmt.Sprintf(format, args...))
}

// A connection from [Options.Connect] (internal/zkfake, for tests) has no
// socket, so the wire sees no packets. What the Session needs of it holds
// all the same:
//
//   - The granted session timeout is the one asked for.
//   - Every call counts as a packet sent when made (sentConn), on the
//     connection of the latest StateHasSession: [Session.Confirm] derives
//     the deadline by the socket's rule, and a call made before a
//     reconnect says nothing of the new connection ([sendClock.sentByOn]).
//   - [Session.Sent] sees a call's paths as the packet's bytes once the
//     call succeeded: the prefetched first look then follows its create,
//     as on a socket, where ZooKeeper answers it after. Seen earlier, the
//     read could overtake the create, or follow one that failed.
//   - lastZxid's race (zxid.go) is go-zookeeper's; the handshake bound
//     has no dial to bound, and [wire.drop] no socket to close.

// openConnect opens a connection through c.connect, reporting its events
// to o's callback.
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

// Do records the call as sent, makes it, and shows its paths to the
// markers if it succeeded.
func (s sentConn) Do(r Request) (Result, error) {
	if rec := s.w.clock.current(); rec != nil {
		s.w.clock.record(rec, time.Now(), s.w.hs.timeout())
	}
	res, err := s.Backend.Do(r)
	if err == nil {
		s.w.marks.sawWrite([]byte(strings.Join(r.Paths, "\x00")))
	}
	return res, err
}

// Dial opens a go-zookeeper connection with no Session, reporting every
// event to events: for internal/zkfake's conformance test.
func Dial(servers []string, timeout time.Duration, events func(zk.Event)) (Conn, error) {
	c, _, err := zk.Connect(servers, timeout, zk.WithEventCallback(events), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	return NewConn(zkBackend{c}), nil
}
