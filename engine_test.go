package zklock_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// rawNode creates an ephemeral lock node by name through c's raw
// connection, as another library (or an operator) would, under path.
func rawNode(t *testing.T, c *zklock.Client, path, name string) string {
	t.Helper()
	m, err := zklock.NewMutex(c, path)
	must(t, err)
	// Make the parents the way zklock does: take and drop the lock.
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
	node, err := c.Conn().Create(path+"/"+name, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	must(t, err, "create %s", name)
	return node
}

// A waiter whose own node is deleted (an operator clearing the path, as
// Curator's "no orphaned nodes" test does) must not be granted a lease on a
// node that no longer exists when its predecessor goes: it queues again,
// behind everyone who queued meanwhile.
func TestWaiterWhoseNodeIsDeletedQueuesAgain(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	m := func() *zklock.Mutex {
		m, err := zklock.NewMutex(connect(t), path)
		must(t, err)
		return m
	}
	a, err := m().Acquire(ctxT(t))
	must(t, err)
	b := async(m().Acquire, ctxT(t))
	queued(t, c, path, 2)
	var bNode string // getChildren lists in no particular order
	for _, k := range children(t, c, path) {
		if path+"/"+k != a.Node() {
			bNode = k
		}
	}
	cc := async(m().Acquire, ctxT(t))
	queued(t, c, path, 3)

	must(t, c.Conn().Delete(path+"/"+bNode, -1), "delete the waiter's node")
	// B notices and queues again, behind C: the path holds A, C, B's new node.
	eventually(t, func() bool {
		kids := children(t, c, path)
		return len(kids) == 3 && !strings.Contains(strings.Join(kids, ","), bNode)
	}, "the waiter queued again")

	release(t, a)
	cl := await(t, cc)
	pending(t, b) // behind C
	release(t, cl)
	release(t, await(t, b))
}

// The fast path hands the lock over on the predecessor's delete event alone.
// If our own node was deleted before it, in the same transaction, the fast
// path must not fire: ZooKeeper sends a client's notifications in the order
// of the changes, so our node's event comes first and is seen.
func TestOwnNodeDeletedBeforePredecessorNoHandover(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	// A holder made by name with sequence 0: ahead of every node made after.
	holder := rawNode(t, c, path, "_c_"+"0d6c4a1e-5b7f-4c3a-9e2d-8f1b6a7c9d0e"+"-lock-0000000000")

	bm, err := zklock.NewMutex(connect(t), path)
	must(t, err)
	b := async(bm.Acquire, ctxT(t))
	queued(t, c, path, 2)
	var bNode string
	for _, k := range children(t, c, path) {
		if path+"/"+k != holder {
			bNode = path + "/" + k
		}
	}
	// One transaction: B's node first, then the holder it watches.
	_, err = c.Conn().Multi(&zk.DeleteRequest{Path: bNode, Version: -1}, &zk.DeleteRequest{Path: holder, Version: -1})
	must(t, err, "delete both")

	// B must queue again rather than take the lock on a deleted node. With
	// nobody else left it then holds, on a node that exists.
	l := await(t, b)
	if l.Node() == bNode {
		t.Fatalf("granted a lease on the deleted node %s", bNode)
	}
	if kids := children(t, c, path); len(kids) != 1 || path+"/"+kids[0] != l.Node() {
		t.Fatalf("the lease's node %s is not the only child: %v", l.Node(), kids)
	}
	release(t, l)
}

// After 2^31 creates under one parent the sequence suffix is negative and
// eleven characters long. Such a node is a lock node like any other, and
// ordered by serial-number arithmetic: -2147483000 was created before 1
// (2147483001 creates before it, counting across the wrap; less than 2^31).
func TestWrappedSequenceIsOrdered(t *testing.T) {
	t.Parallel()
	path := lockPath(t) + "-fresh"
	c := connect(t)
	// A fresh parent: the holder is its first child made by name, so our
	// node's sequence will be small (its cversion counts creates).
	holder := rawNode(t, c, path, "_c_"+"0d6c4a1e-5b7f-4c3a-9e2d-8f1b6a7c9d0e"+"-lock--2147483000")

	m, err := zklock.NewMutex(connect(t), path)
	must(t, err)
	_, err = m.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "the wrapped node is ahead of us and holds")

	w := async(m.Acquire, ctxT(t))
	queued(t, c, path, 2)
	parts, err := m.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 2 || parts[0].Node != holder || !parts[0].Holder || parts[1].Holder {
		t.Fatalf("participants %+v: want the wrapped node holding, first", parts)
	}
	pending(t, w)
	must(t, c.Conn().Delete(holder, -1))
	release(t, await(t, w))
}

// Errors read "zklock: <op> <path>: <sentinel>", the sentinel bare.
func TestErrorText(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	m, err := zklock.NewMutex(connect(t), path)
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	_, err = m.TryAcquire(ctxT(t))
	if want := "zklock: try acquire " + path + ": locked"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	release(t, l)
	err = l.Release(ctxT(t))
	if want := "zklock: release " + path + ": " + l.Node() + ": lease released"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	_, err = zklock.NewMutex(nil, path)
	if want := "zklock: new mutex " + path + ": invalid argument: nil client"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	for _, s := range []error{zklock.ErrInvalidArgument, zklock.ErrLocked, zklock.ErrReleased,
		zklock.ErrSessionExpired, zklock.ErrConnectionSuspended, zklock.ErrClientClosed, zklock.ErrUnknownNode} {
		if strings.Contains(s.Error(), "zklock") {
			t.Errorf("sentinel %q repeats the prefix", s)
		}
	}
}

// WithNodeData copies: changing the caller's slice afterwards changes
// nothing in the nodes.
func TestWithNodeDataCopies(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	data := []byte("owner-1")
	opt := zklock.WithNodeData(data)
	copy(data, "OWNER-2")
	m, err := zklock.NewMutex(connect(t), path, opt)
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	got, _, err := connect(t).Conn().Get(l.Node())
	must(t, err)
	if !bytes.Equal(got, []byte("owner-1")) {
		t.Fatalf("node data %q, want %q", got, "owner-1")
	}
	release(t, l)
}
