package zklock_test

import (
	"bytes"
	"testing"

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
