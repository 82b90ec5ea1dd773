package zklock_test

import (
	"bytes"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// A create whose request would exceed ZooKeeper's 1 MiB limit
// (jute.maxbuffer) is refused with ErrInvalidArgument before any
// ZooKeeper call: the server would close the connection, which looks like
// a connection loss and would be retried until the context ends.
func TestAcquireOverRequestLimitIsRefused(t *testing.T) {
	c := connect(t)
	ctx := ctxT(t)

	path := lockPath(t)
	s, err := zklock.NewSemaphore(c, path, 50000)
	must(t, err)
	_, err = s.AcquireN(ctx, 20000) // 20,000 creates in one multi: about 1.6 MB
	mustIs(t, err, zklock.ErrInvalidArgument, "AcquireN of 20,000")
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("a refused AcquireN left %d nodes", len(kids))
	}

	big := bytes.Repeat([]byte("x"), 400<<10)
	s, err = zklock.NewSemaphore(c, lockPath(t), 3, zklock.WithNodeData(big))
	must(t, err)
	_, err = s.AcquireN(ctx, 3) // three nodes of 400 KiB each
	mustIs(t, err, zklock.ErrInvalidArgument, "AcquireN of 3 x 400 KiB")

	// Within the limit, the same works.
	leases, err := s.AcquireN(ctx, 2)
	must(t, err, "AcquireN of 2 x 400 KiB")
	for _, l := range leases {
		release(t, l)
	}
}

// A lock path whose children no longer fit in ZooKeeper's 1 MiB
// (jute.maxbuffer) are still read: the server does not bound a response,
// and go-zookeeper reads one of any size unless told otherwise
// (zk.WithMaxBufferSize, which zklock does not set). Java clients do
// bound it, and fail such a read as a connection loss, forever; see
// docs/semantics.md, "Limits". 18,500 Curator-format mutex nodes are a getChildren
// reply of about 1.1 MB: TryAcquire reads it and says ErrLocked,
// Participants lists every node.
func TestQueueOverOneMiBIsRead(t *testing.T) {
	const n = 18500
	c, other := connect(t), connect(t)
	ctx := ctxT(t)
	path := lockPath(t)
	m, err := zklock.NewMutex(c, path)
	must(t, err)
	l, err := m.Acquire(ctx) // the path exists, and this holds
	must(t, err)

	// Curator's names, made by another session in multis of 500.
	prefix := path + "/_c_" + "0d6c4a1e-5b7f-4c3a-9e2d-8f1b6a7c9d0e" + "-lock-"
	acl := zk.WorldACL(zk.PermAll)
	for made := 1; made < n; {
		var ops []any
		for ; made < n && len(ops) < 500; made++ {
			ops = append(ops, &zk.CreateRequest{Path: prefix, Acl: acl, Flags: zk.FlagEphemeralSequential})
		}
		_, err := other.Conn().Multi(ops...)
		must(t, err, "create the queue")
	}
	names := children(t, c, path)
	size := 0
	for _, name := range names {
		size += 4 + len(name)
	}
	if len(names) != n || size <= 1<<20 {
		t.Fatalf("%d children, %d bytes of names: want %d, over 1 MiB", len(names), size, n)
	}

	_, err = m.TryAcquire(ctx)
	mustIs(t, err, zklock.ErrLocked, "TryAcquire behind %d nodes", n)
	parts, err := m.Participants(ctx)
	must(t, err)
	if len(parts) != n || parts[0].Node != l.Node() || !parts[0].Holder {
		t.Fatalf("%d participants, the first %+v: want %d, ours first and holding", len(parts), parts[0], n)
	}
	release(t, l)
}
