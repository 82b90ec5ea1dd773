package zklock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// Names other clients write under a lock path, by format (see the README's
// "Mixed fleets"), before ZooKeeper's sequence suffix.
const (
	junkUUID = "0d6c4a1e-5b7f-4c3a-9e2d-8f1b6a7c9d0e" // Curator's protected id
	junkHex  = "0123456789abcdef0123456789abcdef"     // kazoo's uuid4().hex, go-zookeeper's id
)

// mkpath creates path and its parents, as containers (as the recipes do).
func mkpath(t testing.TB, c *zklock.Client, path string) {
	t.Helper()
	for _, dir := range parentsOf(path) {
		_, err := c.Conn().CreateContainer(dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", dir, err)
		}
	}
}

// junk creates a child of path named prefix, sequential or not, with data,
// as another client would, and returns its name.
func junk(t testing.TB, c *zklock.Client, path, prefix string, sequential bool, data []byte) string {
	t.Helper()
	flags := int32(0)
	if sequential {
		flags = zk.FlagEphemeralSequential
	}
	p, err := c.Conn().Create(path+"/"+prefix, data, flags, zk.WorldACL(zk.PermAll))
	must(t, err, "create %s/%s", path, prefix)
	return p[len(path)+1:]
}

// oneHolder checks, on path's participants as zklock reads them, that
// holders are readers only or one exclusive participant, and returns them.
func oneHolder(t testing.TB, c *zklock.Client, path string) []zklock.Participant {
	t.Helper()
	parts, err := zklock.Participants(ctxT(t), c, path)
	must(t, err, "participants of %s", path)
	var held []zklock.Participant
	exclusive := false
	for _, p := range parts {
		if p.Holder {
			held = append(held, p)
			exclusive = exclusive || p.Kind != zklock.KindRead
		}
	}
	if exclusive && len(held) > 1 {
		t.Fatalf("%d holders on %s, one of them exclusive: %+v", len(held), path, held)
	}
	return held
}

// A lock path's children that are not lock nodes, or not zklock's: plain
// names are ignored by every recipe (a Semaphore refuses the plain nodes
// of another library's semaphore layout instead, with ErrUnknownNode).
// TestUnknownNodeRefused shows one plain node; these are the names that
// look most like lock nodes without being one.
func TestJunkPlainChildrenIgnored(t *testing.T) {
	t.Parallel()
	c, other := connect(t), connect(t)
	path := lockPath(t)
	mkpath(t, other, path)
	for _, name := range []string{
		"plain", "_c_", "_c_" + junkUUID + "-lock-", "_c_" + junkUUID + "-lock-00000000",
		junkHex + "__lock__", junkHex + "__rlock__12", "lock-12345", "__READ__", "__WRIT__x",
		"_c_" + junkUUID + "-lease-00000000x1", "zamek-\u017c\u00f3\u0142w", "00000000001x",
	} {
		junk(t, other, path, name, false, []byte("junk"))
	}
	m := newMutex(t, c, path)
	l, err := m.TryAcquire(ctxT(t))
	must(t, err, "Mutex.TryAcquire among plain nodes")
	if held := oneHolder(t, c, path); len(held) != 1 || held[0].Node != l.Node() {
		t.Fatalf("holders %+v, want only %s", held, l.Node())
	}
	release(t, l)
	rw := newRW(t, c, path)
	for _, side := range []zklock.Locker{rw.ReadLock(), rw.WriteLock()} {
		l, err := side.TryAcquire(ctxT(t))
		must(t, err, "RWMutex TryAcquire among plain nodes")
		release(t, l)
	}
	e, err := zklock.NewElection(c, path)
	must(t, err)
	l, err = e.Campaign(ctxT(t))
	must(t, err, "Campaign among plain nodes")
	release(t, l)
	s := newSem(t, c, path, 2)
	l, err = s.TryAcquire(ctxT(t))
	must(t, err, "Semaphore.TryAcquire among plain nodes")
	release(t, l)

	// kazoo's Semaphore keeps one plain node per lease, named by 32 hex
	// digits; Curator's InterProcessSemaphoreV2 keeps "locks" and "leases".
	for _, name := range []string{junkHex, "leases", "locks"} {
		path := lockPath(t)
		mkpath(t, other, path)
		junk(t, other, path, name, false, nil)
		_, err := newSem(t, c, path, 2).TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrUnknownNode, "Semaphore beside a plain %q", name)
		if kids := children(t, c, path); len(kids) != 1 {
			t.Fatalf("a refused Semaphore acquire left nodes: %v", kids)
		}
		l, err := newMutex(t, c, path).TryAcquire(ctxT(t))
		must(t, err, "Mutex beside a plain %q", name)
		release(t, l)
	}
}

// A sequential child of no format zklock knows fails every acquire, of
// every recipe, with ErrUnknownNode, and the acquire leaves nothing
// behind: zklock cannot tell where such a node stands in the queue, nor
// whether it excludes. TestUnknownNodeRefused shows one name and a Mutex;
// here are the near misses of each format.
func TestJunkUnknownSequentialRefused(t *testing.T) {
	t.Parallel()
	c, other := connect(t), connect(t)
	for _, prefix := range []string{
		"", "foo-", "lock-", "plain-named-as-if-sequential-0000000042", "_c_" + junkUUID[1:] + "-lock-", "_c_" + junkUUID + "-mutex-",
		"_c_" + junkUUID + "-lock", "_c_" + junkHex + "-__READ__", "_c_" + junkHex[1:] + "-lock-",
		junkHex[1:] + "__lock__", strings.ToUpper(junkHex) + "__lock__", junkHex + "__wlock__",
		junkUUID + "__lock__", "_c_" + junkUUID + "-__read__",
	} {
		path := lockPath(t)
		mkpath(t, other, path)
		// A node whose name ends in a sequence is taken for sequential:
		// zklock cannot tell how it was created.
		sequential := !strings.HasSuffix(prefix, "0000000042")
		name := junk(t, other, path, prefix, sequential, nil)
		rw := newRW(t, c, path)
		e, err := zklock.NewElection(c, path)
		must(t, err)
		for _, try := range []struct {
			what    string
			acquire func(context.Context) (*zklock.Lease, error)
		}{
			{"Mutex.Acquire", newMutex(t, c, path).Acquire},
			{"Mutex.TryAcquire", newMutex(t, c, path).TryAcquire},
			{"read Acquire", rw.ReadLock().Acquire},
			{"write TryAcquire", rw.WriteLock().TryAcquire},
			{"Semaphore.Acquire", newSem(t, c, path, 3).Acquire},
			{"Campaign", e.Campaign},
		} {
			ctx, cancel := context.WithTimeout(ctxT(t), long)
			_, err := try.acquire(ctx)
			cancel()
			mustIs(t, err, zklock.ErrUnknownNode, "%s beside %q", try.what, name)
			if kids := children(t, c, path); len(kids) != 1 || kids[0] != name {
				t.Fatalf("%s beside %q left nodes behind: %v", try.what, name, kids)
			}
		}
		_, err = zklock.Participants(ctxT(t), c, path)
		mustIs(t, err, zklock.ErrUnknownNode, "Participants beside %q", name)
	}
}

// The nodes of every other library are queued as what they are: an
// exclusive one (Curator's mutex, writer and LeaderLatch, kazoo's Lock,
// go-zookeeper's zk.Lock) makes a Mutex, a writer and a reader wait
// (TryAcquire: ErrLocked), and lets them through once deleted; a reader
// (Curator's and kazoo's) shares with zklock's readers and excludes the
// rest. Never two holders, as zklock counts them.
func TestJunkForeignNodesQueued(t *testing.T) {
	t.Parallel()
	c, other := connect(t), connect(t)
	for _, f := range []struct {
		prefix string
		kind   zklock.Kind
	}{
		{"_c_" + junkUUID + "-lock-", zklock.KindMutex},    // Curator InterProcessMutex
		{"_c_" + junkUUID + "-__WRIT__", zklock.KindWrite}, // Curator write lock
		{"_c_" + junkUUID + "-__READ__", zklock.KindRead},  // Curator read lock
		{"_c_" + junkUUID + "-latch-", zklock.KindLatch},   // Curator LeaderLatch
		{junkHex + "__lock__", zklock.KindMutex},           // kazoo Lock, WriteLock
		{junkHex + "__rlock__", zklock.KindRead},           // kazoo ReadLock
		{"_c_" + junkHex + "-lock-", zklock.KindMutex},     // go-zookeeper zk.Lock
	} {
		path := lockPath(t)
		mkpath(t, other, path)
		name := junk(t, other, path, f.prefix, true, []byte("foreign"))
		parts, err := zklock.Participants(ctxT(t), c, path)
		must(t, err)
		if len(parts) != 1 || parts[0].Node != path+"/"+name || parts[0].Kind != f.kind || !parts[0].Holder ||
			!bytes.Equal(parts[0].Data, []byte("foreign")) {
			t.Fatalf("%s: participants %+v, want it alone, a holder of kind %v", name, parts, f.kind)
		}

		m, rw := newMutex(t, c, path), newRW(t, c, path)
		_, err = m.TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrLocked, "Mutex.TryAcquire behind %s", name)
		_, err = rw.WriteLock().TryAcquire(ctxT(t))
		mustIs(t, err, zklock.ErrLocked, "write TryAcquire behind %s", name)
		r, err := rw.ReadLock().TryAcquire(ctxT(t))
		if f.kind == zklock.KindRead {
			must(t, err, "read TryAcquire beside the reader %s", name)
			if held := oneHolder(t, c, path); len(held) != 2 {
				t.Fatalf("%s: holders %+v, want the two readers", name, held)
			}
			release(t, r)
		} else {
			mustIs(t, err, zklock.ErrLocked, "read TryAcquire behind %s", name)
		}
		if kids := children(t, c, path); len(kids) != 1 {
			t.Fatalf("%s: failed TryAcquires left nodes: %v", name, kids)
		}

		// Acquire waits behind it, and holds once it is gone.
		ctx, cancel := context.WithCancel(ctxT(t))
		ch := async(m.Acquire, ctx)
		queued(t, c, path, 2)
		pending(t, ch)
		if held := oneHolder(t, c, path); len(held) != 1 || held[0].Node != path+"/"+name {
			t.Fatalf("%s: holders %+v, want it alone", name, held)
		}
		must(t, other.Conn().Delete(path+"/"+name, -1), "delete %s", name)
		l := await(t, ch)
		cancel()
		if held := oneHolder(t, c, path); len(held) != 1 || held[0].Node != l.Node() {
			t.Fatalf("%s gone: holders %+v, want only %s", name, held, l.Node())
		}
		release(t, l)
	}
}

// A child carrying about 1 MB of data (just under ZooKeeper's
// jute.maxbuffer of 1 MiB, with the request's other fields), plain or a
// foreign holder, and thousands of plain children beside a foreign holder
// do not break the reads: acquires decide as usual, Participants reads the
// big node's data whole. (TestQueueOverOneMiBIsRead reads a queue of
// 18,500 lock nodes.)
func TestJunkBigChildren(t *testing.T) {
	t.Parallel()
	c, other := connect(t), connect(t)
	path := lockPath(t)
	mkpath(t, other, path)
	big := bytes.Repeat([]byte{0xa5}, 1_000_000)
	junk(t, other, path, "big", false, big)
	name := junk(t, other, path, junkHex+"__lock__", true, big)

	m := newMutex(t, c, path)
	_, err := m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "TryAcquire behind a holder of 1 MB")
	parts, err := m.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 1 || parts[0].Node != path+"/"+name || !bytes.Equal(parts[0].Data, big) {
		t.Fatalf("participants: %d, want the kazoo node with its %d bytes", len(parts), len(big))
	}
	ch := async(m.Acquire, ctxT(t))
	queued(t, c, path, 3)
	pending(t, ch)
	must(t, other.Conn().Delete(path+"/"+name, -1))
	l := await(t, ch)
	release(t, l)

	// 5,000 plain children, made in multis of 500, and a kazoo holder.
	path = lockPath(t)
	mkpath(t, other, path)
	const plain = 5000
	acl := zk.WorldACL(zk.PermAll)
	for made := 0; made < plain; {
		var ops []any
		for ; made < plain && len(ops) < 500; made++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/junk-%s-%06d", path, junkUUID, made), Acl: acl})
		}
		_, err := other.Conn().Multi(ops...)
		must(t, err, "create the plain children")
	}
	name = junk(t, other, path, junkHex+"__lock__", true, nil)
	m = newMutex(t, c, path)
	_, err = m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "TryAcquire behind a kazoo node among %d plain ones", plain)
	if held := oneHolder(t, c, path); len(held) != 1 || held[0].Node != path+"/"+name {
		t.Fatalf("holders %+v, want only %s", held, name)
	}
	ch = async(m.Acquire, ctxT(t))
	queued(t, c, path, plain+2)
	pending(t, ch)
	must(t, other.Conn().Delete(path+"/"+name, -1))
	l = await(t, ch)
	if held := oneHolder(t, c, path); len(held) != 1 || held[0].Node != l.Node() {
		t.Fatalf("holders %+v, want only %s", held, l.Node())
	}
	release(t, l)
}
