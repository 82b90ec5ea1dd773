package zklock_test

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

// Revocation is cooperative and Curator's: Revoke writes "__REVOKE__" into
// the holder's node, the holder's Revoked closes, and the lease stays held
// until the holder releases it. Other changes of the node's data do not
// count.
func TestRevoke(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	m := newMutex(t, connect(t), path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	revoked := held.Revoked()
	other := connect(t)

	_, err = other.Conn().Set(held.Node(), []byte("something else"), -1)
	must(t, err)
	w := async(newMutex(t, other, path).Acquire, ctxT(t))
	queued(t, other, path, 2)
	if closed(revoked) {
		t.Fatal("Revoked closed on a data change that is not a revocation")
	}

	must(t, zklock.Revoke(ctxT(t), other, held.Node()), "revoke")
	select {
	case <-revoked:
	case <-ctxT(t).Done():
		t.Fatal("the holder did not see the revocation")
	}
	if held.Revoked() != revoked {
		t.Fatal("Revoked returned a different channel")
	}
	must(t, held.Err(), "revocation is a request, the lease is still held")
	pending(t, w)
	release(t, held)
	release(t, await(t, w))

	err = zklock.Revoke(ctxT(t), other, held.Node())
	mustIs(t, err, zk.ErrNoNode, "revoking a node that is gone")
	mustIs(t, zklock.Revoke(ctxT(t), nil, held.Node()), zklock.ErrInvalidArgument, "nil client")
	mustIs(t, zklock.Revoke(ctxT(t), other, "not/a/path"), zklock.ErrInvalidArgument, "bad path")
}

// A semaphore waiter asked to let go keeps the request once it holds: the
// hold announcement to the waiters behind it bumps its node's version
// without writing over "__REVOKE__". The waiter behind it still moves up.
func TestRevokeSemaphoreWaiter(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	sem := func() *zklock.Semaphore {
		s, err := zklock.NewSemaphore(connect(t), path, 1)
		must(t, err)
		return s
	}
	a, err := sem().Acquire(ctxT(t))
	must(t, err)
	b := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 2)
	cw := async(sem().Acquire, ctxT(t))
	queued(t, c, path, 3)
	parts, err := sem().Participants(ctxT(t))
	must(t, err)
	must(t, zklock.Revoke(ctxT(t), c, parts[1].Node), "revoke the waiter")

	release(t, a)
	bl := await(t, b)
	select {
	case <-bl.Revoked():
	case <-ctxT(t).Done():
		t.Fatal("the revocation written while it waited is lost")
	}
	pending(t, cw)
	release(t, bl)
	release(t, await(t, cw))
}
