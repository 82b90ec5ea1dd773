package zkfake_test

// The fake held to the real thing: one script of operations through the
// session's door, run against the fake and against a real ZooKeeper
// (ZKLOCK_TEST_SERVERS, which `make test` sets), with the results, errors,
// watch events (the callback's and each watcher channel's, in order) and
// stats of both written down, absolute zxids and session ids replaced by
// their rank, and compared line by line. Like the root package's tests it
// fails, never skips, without a server.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/internal/session"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// client is one connection of the script, with what it heard.
type client struct {
	name  string
	conn  session.Conn
	mu    sync.Mutex
	heard []string       // watch events from the callback, in order
	chans []watchChannel // watcher channels, in the order they were set
}

type watchChannel struct {
	what string
	ch   <-chan session.Event
}

func (c *client) callback(ev zk.Event) {
	if ev.Type == zk.EventSession || ev.Type == zk.EventNotWatching {
		return
	}
	c.mu.Lock()
	c.heard = append(c.heard, fmt.Sprintf("%v %s", ev.Type, ev.Path))
	c.mu.Unlock()
}

// world opens the script's clients.
type world interface {
	open(name string, heard func(zk.Event)) session.Conn
}

type fakeWorld struct{ f *zkfake.Server }

func (w fakeWorld) open(name string, heard func(zk.Event)) session.Conn {
	return w.f.Dial(heard, 10*time.Second).Door
}

type realWorld struct {
	t       *testing.T
	servers []string
}

func (w realWorld) open(name string, heard func(zk.Event)) session.Conn {
	var once sync.Once
	up := make(chan struct{})
	c, err := session.Dial(w.servers, 10*time.Second, func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			once.Do(func() { close(up) })
		}
		heard(ev)
	})
	if err != nil {
		w.t.Fatal(err)
	}
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		w.t.Fatalf("no session with %v", w.servers)
	}
	return c
}

// transcript is what a run of the script wrote down.
type transcript struct {
	root  string
	lines []string
}

func (tr *transcript) add(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	tr.lines = append(tr.lines, strings.ReplaceAll(s, tr.root, "/R"))
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty,
		zk.ErrNoChildrenForEphemerals, zk.ErrClosing, zk.ErrConnectionClosed, zk.ErrSessionExpired, zk.ErrInvalidPath} {
		if errors.Is(err, e) {
			return fmt.Sprintf("err(%v; %s)", e, err.Error())
		}
	}
	return "err(" + err.Error() + ")"
}

func ps(p session.ParentStat) string {
	// Cversion moves are seen in the sequential names the script creates.
	return fmt.Sprintf("{pzxid z{%d}}", p.Pzxid)
}

func st(s session.Stat) string {
	return fmt.Sprintf("{czxid z{%d} owner s{%d} version %d}", s.Czxid, s.EphemeralOwner, s.Version)
}

func sorted(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}

// settle has c make a round trip after the others' writes, so that every
// event they caused reached c first (ZooKeeper sends a client the watch
// event before any later reply), and writes down what c heard.
func (tr *transcript) settle(c *client, sortEvents bool) {
	_ = c.conn.Sync("/")
	_, _ = c.conn.Exists("/")
	c.mu.Lock()
	heard := c.heard
	c.heard = nil
	chans := c.chans
	c.mu.Unlock()
	if sortEvents {
		heard = sorted(heard)
	}
	for _, h := range heard {
		tr.add("%s heard %s", c.name, h)
	}
	var keep []watchChannel
	for _, w := range chans {
		select {
		case ev := <-w.ch:
			tr.add("%s channel %s: %v %s err=%v", c.name, w.what, ev.Type, ev.Path, ev.Err)
		default:
			keep = append(keep, w)
		}
	}
	c.mu.Lock()
	c.chans = keep
	c.mu.Unlock()
}

func (c *client) watch(what string, ch <-chan session.Event) {
	if ch == nil {
		return
	}
	c.mu.Lock()
	c.chans = append(c.chans, watchChannel{what, ch})
	c.mu.Unlock()
}

// script runs the operations on w, under root, and returns the transcript.
func script(t *testing.T, w world, root string) []string {
	tr := &transcript{root: root}
	a := &client{name: "A"}
	b := &client{name: "B"}
	a.conn = w.open("A", a.callback)
	b.conn = w.open("B", b.callback)
	defer b.conn.Close()
	sid := func(c *client) string { return fmt.Sprintf("s{%d}", c.conn.SessionID()) }
	tr.add("sessions A %s B %s", sid(a), sid(b))
	acl := zk.WorldACL(zk.PermAll)
	aclf := func(string) []zk.ACL { return acl }
	R, P := root, root+"/p"
	settle := func(sortEvents bool) { tr.settle(a, sortEvents); tr.settle(b, sortEvents) }

	tr.add("container R: %s", errName(a.conn.CreateContainer(R, nil, acl)))
	tr.add("container R again: %s", errName(a.conn.CreateContainer(R, nil, acl)))
	tr.add("persistent P: %s", errName(a.conn.CreatePersistent(P, []byte("x"), acl)))
	tr.add("persistent P again: %s", errName(a.conn.CreatePersistent(P, []byte("x"), acl)))
	ok, err := a.conn.Exists(P)
	tr.add("exists P: %v %s", ok, errName(err))
	ok, err = a.conn.Exists(R + "/q")
	tr.add("exists q: %v %s", ok, errName(err))

	names, p, err := b.conn.ChildrenStatW(R)
	tr.add("B childrenStatW R: %v %s %s", sorted(names), ps(p), errName(err))
	ok, ch, err := b.conn.ExistsW(R + "/e")
	b.watch("exists e", ch)
	tr.add("B existsW e: %v %s", ok, errName(err))
	tr.add("A ephemeral e: %s", errName(a.conn.CreateEphemeral(R+"/e", []byte("d"), acl)))
	settle(false)
	tr.add("A ephemeral e again: %s", errName(a.conn.CreateEphemeral(R+"/e", nil, acl)))
	tr.add("A ephemeral under e: %s", errName(a.conn.CreateEphemeral(R+"/e/x", nil, acl)))
	tr.add("A ephemeral under missing: %s", errName(a.conn.CreateEphemeral(R+"/missing/x", nil, acl)))
	err = a.conn.CreateEphemeralIf(R+"/e", R+"/f", []byte("f"), acl)
	tr.add("A ephemeral f if e: %s", errName(err))
	err = a.conn.CreateEphemeralIf(R+"/e", R+"/f", nil, acl)
	tr.add("A ephemeral f if e again: %s is-nonode=%v", errName(err), errors.Is(err, zk.ErrNoNode))
	err = a.conn.CreateEphemeralIf(R+"/gone", R+"/g", nil, acl)
	tr.add("A ephemeral g if gone: %s is-nonode=%v", errName(err), errors.Is(err, zk.ErrNoNode))
	ok, err = a.conn.Exists(R + "/g")
	tr.add("exists g: %v %s", ok, errName(err))

	made, err := a.conn.CreateEach([]string{P + "/s-", P + "/s-"}, []byte("m"), aclf)
	tr.add("A createEach s-,s-: %v %s", made, errName(err))
	made, err = a.conn.CreateEach([]string{P + "/s-", R + "/missing/s-"}, nil, aclf)
	tr.add("A createEach s-,missing: %v %s", made, errName(err))
	made, err = a.conn.CreateEach([]string{P + "/s-", P + "/x-", P + "/s-"}, nil, aclf)
	tr.add("A createEach s-,x-,s-: %v %s", made, errName(err))
	names, p, err = a.conn.ChildrenStat(P)
	tr.add("A childrenStat P: %v %s %s", sorted(names), ps(p), errName(err))
	made, err = a.conn.CreateEach([]string{P + "/t-"}, nil, aclf)
	tr.add("A createEach t-: %v %s", made, errName(err))
	tnode := ""
	if len(made) == 1 {
		tnode = made[0]
	}

	s0 := P + "/s-0000000000"
	stt, ch, err := b.conn.GetW(s0)
	b.watch("getW s0", ch)
	tr.add("B getW s0: %s %s", st(stt), errName(err))
	stt, ch, err = b.conn.GetW(s0)
	b.watch("getW s0 again", ch)
	tr.add("B getW s0 again: %s %s", st(stt), errName(err))
	ok, ch, err = b.conn.ExistsW(s0)
	b.watch("existsW s0", ch)
	tr.add("B existsW s0: %v %s", ok, errName(err))
	data, stt, ch, err := b.conn.GetDataW(P)
	b.watch("getDataW P", ch)
	tr.add("B getDataW P: %q %s %s", data, st(stt), errName(err))
	names, ch, err = b.conn.ChildrenW(P)
	b.watch("childrenW P", ch)
	tr.add("B childrenW P: %v %s", sorted(names), errName(err))
	_, ch, err = b.conn.GetW(R + "/none")
	b.watch("getW none", ch)
	tr.add("B getW none: %s", errName(err))
	_, ch, err = b.conn.ChildrenW(R + "/none")
	b.watch("childrenW none", ch)
	tr.add("B childrenW none: %s", errName(err))

	tr.add("A setIf P v0: %s", errName(a.conn.SetIf(P, []byte("y"), 0)))
	tr.add("A setIf P v0 again: %s", errName(a.conn.SetIf(P, []byte("z"), 0)))
	settle(false)
	tr.add("A set P: %s", errName(a.conn.Set(P, []byte("w"))))
	tr.add("A set missing: %s", errName(a.conn.Set(R+"/none", nil)))
	settle(false)
	data, stt, err = b.conn.Get(P)
	tr.add("B get P: %q %s %s", data, st(stt), errName(err))

	tr.add("A delete P: %s", errName(a.conn.Delete(P)))
	tr.add("A delete missing: %s", errName(a.conn.Delete(R+"/none")))
	tr.add("A deleteAll s0,missing: %s", errName(a.conn.DeleteAll([]string{s0, P + "/none"})))
	names, p, err = b.conn.ChildrenStat(P)
	tr.add("B childrenStat P: %v %s %s", sorted(names), ps(p), errName(err))
	tr.add("A deleteAll s0,s1: %s", errName(a.conn.DeleteAll([]string{s0, P + "/s-0000000001"})))
	settle(false)
	names, p, err = b.conn.ChildrenStat(P)
	tr.add("B childrenStat P: %v %s %s", sorted(names), ps(p), errName(err))

	err = a.conn.Check([]string{P, tnode})
	tr.add("A check P,t: %s", errName(err))
	err = a.conn.Check([]string{P, R + "/gone", tnode})
	tr.add("A check P,gone,t: %s is-nonode=%v", errName(err), errors.Is(err, zk.ErrNoNode))

	data, stt, err = a.conn.Get(R + "/e")
	tr.add("A get e: %q %s %s", data, st(stt), errName(err))
	_, ch, err = b.conn.GetW(R + "/e")
	b.watch("getW e", ch)
	tr.add("B getW e: %s", errName(err))
	_, p, err = b.conn.ChildrenStatW(R)
	tr.add("B childrenStatW R: %s %s", ps(p), errName(err))
	names, ch, err = b.conn.ChildrenW(P)
	b.watch("childrenW P", ch)
	tr.add("B childrenW P: %v %s", sorted(names), errName(err))
	tr.add("A sync: %s", errName(a.conn.Sync(R)))

	// The handoff's grant (zklock's handoff.go): B watches the grant and
	// the node; A hands off. B hears the grant made, then the node gone;
	// the grant never stays. Fire: only while its guard exists.
	made, err = a.conn.CreateEach([]string{R + "/h-"}, nil, aclf)
	tr.add("A createEach h-: %v %s", made, errName(err))
	hnode, grant := R+"/h-0000000000", R+"/_g_0000000000_"
	if len(made) == 1 {
		hnode = made[0]
	}
	ok, ch, err = b.conn.ExistsW(grant)
	b.watch("existsW grant", ch)
	tr.add("B existsW grant: %v %s", ok, errName(err))
	_, ch, err = b.conn.GetW(hnode)
	b.watch("getW h", ch)
	tr.add("B getW h: %s", errName(err))
	_, ch, err = b.conn.ChildrenW(R)
	b.watch("childrenW R", ch)
	tr.add("B childrenW R: %s", errName(err))
	tr.add("A handOff h: %s", errName(a.conn.HandOff(hnode, grant, acl)))
	settle(false)
	ok, err = b.conn.Exists(grant)
	tr.add("B exists grant: %v %s", ok, errName(err))
	err = a.conn.HandOff(hnode, grant, acl)
	tr.add("A handOff h again: %s gone-at-h=%v", errName(err), session.GoneAt(err, hnode))
	ok, ch, err = b.conn.ExistsW(grant)
	b.watch("existsW grant again", ch)
	tr.add("B existsW grant again: %v %s", ok, errName(err))
	err = a.conn.Fire(hnode, grant, aclFor(acl))
	tr.add("A fire, guard gone: %s gone-at-h=%v", errName(err), session.GoneAt(err, hnode))
	tr.add("A fire, guard e: %s", errName(a.conn.Fire(R+"/e", grant, aclFor(acl))))
	settle(false)
	ok, err = b.conn.Exists(grant)
	tr.add("B exists grant: %v %s", ok, errName(err))

	// What the semaphore's holder registry, designed and not built
	// (model/registry.pml), relies on: an exists watch on an entry whose
	// registry (a container) is missing is set all the same, and fires when
	// the entry is made; an entry made under a missing registry fails with
	// NoNode, not as its node gone; the end of A's session (below) deletes
	// an entry and its node at one zxid.
	made, err = a.conn.CreateEach([]string{R + "/k-"}, nil, aclf)
	tr.add("A createEach k-: %v %s", made, errName(err))
	knode, H := R+"/k-0000000000", R+"/_holders"
	if len(made) == 1 {
		knode = made[0]
	}
	entry := H + "/r-" + knode[len(knode)-10:]
	ok, ch, err = b.conn.ExistsW(entry)
	b.watch("existsW entry", ch)
	tr.add("B existsW entry, no registry: %v %s", ok, errName(err))
	err = a.conn.CreateEphemeralIf(knode, entry, nil, acl)
	tr.add("A entry, no registry: %s gone-at-k=%v", errName(err), session.GoneAt(err, knode))
	tr.add("A container registry: %s", errName(a.conn.CreateContainer(H, nil, acl)))
	tr.add("A entry: %s", errName(a.conn.CreateEphemeralIf(knode, entry, nil, acl)))
	settle(false)
	names, err = b.conn.Children(H)
	tr.add("B children registry: %v %s", sorted(names), errName(err))

	// The registration (Door.Register): [check node, create entry, set
	// node's data], one multi. B, watching the entry's creation and the
	// node's data, hears the entry made first.
	L2, L3 := R+"/l2", R+"/l3"
	mnode, mentry := registerRows(tr, a, b, R, H, aclf, settle)
	registerParentRows(tr, a, b, L2, aclf, settle)

	// Fire under a missing registry makes it and fires; Fire on an entry
	// that exists leaves it and succeeds; a guard gone makes nothing.
	tr.add("A container l3: %s", errName(a.conn.CreateContainer(L3, nil, acl)))
	made, err = a.conn.CreateEach([]string{L3 + "/f-"}, nil, aclf)
	tr.add("A createEach l3/f-: %v %s", made, errName(err))
	fnode, fgrant := L3+"/f-0000000000", L3+"/_holders/r-0000000099"
	if len(made) == 1 {
		fnode = made[0]
	}
	ok, ch, err = b.conn.ExistsW(fgrant)
	b.watch("existsW l3 grant", ch)
	tr.add("B existsW l3 grant, no registry: %v %s", ok, errName(err))
	_, ch, err = b.conn.ChildrenW(L3)
	b.watch("childrenW l3", ch)
	tr.add("B childrenW l3: %s", errName(err))
	tr.add("A fire, no registry: %s", errName(a.conn.Fire(fnode, fgrant, aclFor(acl))))
	names, err = b.conn.Children(L3 + "/_holders")
	tr.add("B children l3 registry: %v %s", sorted(names), errName(err))
	settle(false)
	tr.add("A fire, grant exists: %s", errName(a.conn.Fire(mnode, mentry, aclFor(acl))))
	ok, err = b.conn.Exists(mentry)
	tr.add("B exists m entry: %v %s", ok, errName(err))
	err = a.conn.Fire(R+"/gone", L3+"/_none/r-x", aclFor(acl))
	tr.add("A fire, guard gone, no parent: %s gone-at-gone=%v", errName(err), session.GoneAt(err, R+"/gone"))
	ok, err = b.conn.Exists(L3 + "/_none")
	tr.add("B exists l3/_none: %v %s", ok, errName(err))
	settle(false)

	// A's session ends: its ephemerals go, in one transaction.
	a.conn.Close()
	settle(true)
	names, pH, err := b.conn.ChildrenStat(H)
	tr.add("B childrenStat registry: %v %s %s", sorted(names), ps(pH), errName(err))
	_, pR, err := b.conn.ChildrenStat(R)
	tr.add("B entry and node gone at one zxid: %v %s", pH.Pzxid == pR.Pzxid, errName(err))
	ok, err = b.conn.Exists(R + "/e")
	tr.add("B exists e: %v %s", ok, errName(err))
	names, p, err = b.conn.ChildrenStat(P)
	tr.add("B childrenStat P: %v %s %s", sorted(names), ps(p), errName(err))
	names, p, err = b.conn.ChildrenStat(R)
	tr.add("B childrenStat R: %v %s %s", sorted(names), ps(p), errName(err))
	// go-zookeeper picks at random between failing it with ErrClosing and
	// queueing it to be flushed with ErrConnectionClosed (queueRequest).
	_, _, err = a.conn.Get(P)
	tr.add("A get after close fails as closed: %v", errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrConnectionClosed))

	// Clean up on the real server (the fake is thrown away).
	for _, n := range sorted(names) {
		_ = b.conn.DeleteAll(prefixAll(P, childrenOf(b.conn, P+"/"+n)))
	}
	_ = b.conn.DeleteAll(prefixAll(P, childrenOf(b.conn, P)))
	_ = b.conn.Delete(P)
	_ = b.conn.Delete(H)
	for _, p := range []string{L2 + "/_holders", L2, L3 + "/_holders", L3} {
		_ = b.conn.Delete(p)
	}
	_ = b.conn.Delete(R)
	return normalise(tr.lines)
}

// registerRows registers a new node of A's under the registry H: with
// B's watches on the entry and the node; then again (the entry exists),
// with a bad version, and with the node gone. It returns the node and its
// entry.
func registerRows(tr *transcript, a, b *client, R, H string, aclf func(string) []zk.ACL, settle func(bool)) (node, entry string) {
	acl := aclf(R)
	made, err := a.conn.CreateEach([]string{R + "/m-"}, []byte("m"), aclf)
	tr.add("A createEach m-: %v %s", made, errName(err))
	node = R + "/m-0000000000"
	if len(made) == 1 {
		node = made[0]
	}
	entry = H + "/r-" + node[len(node)-10:]
	ok, ch, err := b.conn.ExistsW(entry)
	b.watch("existsW m entry", ch)
	tr.add("B existsW m entry: %v %s", ok, errName(err))
	_, ch, err = b.conn.GetW(node)
	b.watch("getW m", ch)
	tr.add("B getW m: %s", errName(err))
	tr.add("A register m: %s", errName(a.conn.Register(node, entry, []byte("reg"), 0, aclFor(acl))))
	settle(false)
	data, stt, err := b.conn.Get(node)
	tr.add("B get m: %q %s %s", data, st(stt), errName(err))
	data, stt, err = b.conn.Get(entry)
	tr.add("B get m entry: %q %s %s", data, st(stt), errName(err))

	err = a.conn.Register(node, entry, []byte("again"), 1, aclFor(acl))
	tr.add("A register m again: %s node-exists=%v", errName(err), session.NodeExists(err))
	other := H + "/u-" + node[len(node)-10:]
	err = a.conn.Register(node, other, []byte("bad"), 0, aclFor(acl))
	tr.add("A register m, bad version: %s bad-version=%v", errName(err), session.BadVersion(err))
	ok, err = b.conn.Exists(other)
	tr.add("B exists u entry: %v %s", ok, errName(err))
	err = a.conn.Register(R+"/gone", H+"/r-gone", nil, -1, aclFor(acl))
	tr.add("A register gone: %s gone-at-gone=%v", errName(err), session.GoneAt(err, R+"/gone"))
	err = a.conn.Register(R+"/gone", R+"/_none/r-gone", nil, -1, aclFor(acl))
	tr.add("A register gone, no registry: %s gone-at-gone=%v", errName(err), session.GoneAt(err, R+"/gone"))
	ok, err = b.conn.Exists(R + "/_none")
	tr.add("B exists _none: %v %s", ok, errName(err))
	data, stt, err = b.conn.Get(node)
	tr.add("B get m: %q %s %s", data, st(stt), errName(err))
	settle(false)
	return node, entry
}

// registerParentRows registers a node of A's on lock path L, whose
// registry is missing: Register makes it (a container) and registers.
func registerParentRows(tr *transcript, a, b *client, L string, aclf func(string) []zk.ACL, settle func(bool)) {
	acl := aclf(L)
	tr.add("A container l2: %s", errName(a.conn.CreateContainer(L, nil, acl)))
	made, err := a.conn.CreateEach([]string{L + "/n-"}, nil, aclf)
	tr.add("A createEach l2/n-: %v %s", made, errName(err))
	node := L + "/n-0000000000"
	if len(made) == 1 {
		node = made[0]
	}
	entry := L + "/_holders/r-" + node[len(node)-10:]
	ok, ch, err := b.conn.ExistsW(L + "/_holders")
	b.watch("existsW l2 registry", ch)
	tr.add("B existsW l2 registry: %v %s", ok, errName(err))
	ok, ch, err = b.conn.ExistsW(entry)
	b.watch("existsW l2 entry", ch)
	tr.add("B existsW l2 entry: %v %s", ok, errName(err))
	_, ch, err = b.conn.ChildrenW(L)
	b.watch("childrenW l2", ch)
	tr.add("B childrenW l2: %s", errName(err))
	tr.add("A register l2, no registry: %s", errName(a.conn.Register(node, entry, []byte("reg"), -1, aclFor(acl))))
	settle(false)
	names, err := b.conn.Children(L + "/_holders")
	tr.add("B children l2 registry: %v %s", sorted(names), errName(err))
	data, stt, err := b.conn.Get(node)
	tr.add("B get l2 node: %q %s %s", data, st(stt), errName(err))
}

func childrenOf(c session.Conn, p string) []string {
	names, _ := c.Children(p)
	return names
}

func prefixAll(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + "/" + n
	}
	return out
}

var zxidRe = regexp.MustCompile(`([zs])\{(-?\d+)\}`)

// normalise replaces each zxid z{n} and session id s{n} by its rank among
// the transcript's (0 stays 0): the servers' absolute numbers differ, and
// a shared server's other clients add transactions in between.
func normalise(lines []string) []string {
	seen := map[string]map[int64]bool{"z": {}, "s": {}}
	for _, l := range lines {
		for _, m := range zxidRe.FindAllStringSubmatch(l, -1) {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			seen[m[1]][n] = true
		}
	}
	rank := map[string]map[int64]int{}
	for k, set := range seen {
		var ns []int64
		for n := range set {
			if n != 0 {
				ns = append(ns, n)
			}
		}
		sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
		rank[k] = map[int64]int{0: 0}
		for i, n := range ns {
			rank[k][n] = i + 1
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = zxidRe.ReplaceAllStringFunc(l, func(s string) string {
			m := zxidRe.FindStringSubmatch(s)
			n, _ := strconv.ParseInt(m[2], 10, 64)
			return fmt.Sprintf("%s%d", m[1], rank[m[1]][n])
		})
	}
	return out
}

func TestConformance(t *testing.T) {
	env := os.Getenv("ZKLOCK_TEST_SERVERS")
	if strings.TrimSpace(env) == "" {
		t.Fatal("ZKLOCK_TEST_SERVERS is not set: run `make test`, or `go run ./tools/zkrun -env ZKLOCK_TEST_SERVERS -- go test ./internal/zkfake`")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	root := "/zkfake-conformance-" + hex.EncodeToString(b[:])
	real := script(t, realWorld{t, strings.Split(env, ",")}, root)
	fake := script(t, fakeWorld{zkfake.New()}, root)
	for i := 0; i < max(len(real), len(fake)); i++ {
		var r, f string
		if i < len(real) {
			r = real[i]
		}
		if i < len(fake) {
			f = fake[i]
		}
		if r != f {
			t.Errorf("line %d:\n  zookeeper: %s\n  fake:      %s", i+1, r, f)
		}
	}
	if t.Failed() {
		t.Logf("ZooKeeper's transcript:\n%s", strings.Join(real, "\n"))
		t.Logf("the fake's:\n%s", strings.Join(fake, "\n"))
	} else {
		t.Logf("%d lines alike", len(real))
	}
}

// aclFor is an ACL provider that gives every path acl.
func aclFor(acl []zk.ACL) func(string) []zk.ACL {
	return func(string) []zk.ACL { return acl }
}
