package zklock_test

import (
	"bytes"
	"strings"
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

// Downgrade takes a read lease at the writer's place and releases the write
// lease: a reader queued behind the writer gets in, a writer queued behind
// them does not.
func TestDowngrade(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	rw := newRW(t, connect(t), path)
	write, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	r2 := async(newRW(t, connect(t), path).ReadLock().Acquire, ctxT(t))
	queued(t, c, path, 2)
	w2 := async(newRW(t, connect(t), path).WriteLock().Acquire, ctxT(t))
	queued(t, c, path, 3)

	read, err := rw.Downgrade(ctxT(t), write)
	must(t, err, "downgrade")
	mustIs(t, write.Err(), zklock.ErrReleased, "the write lease is released")
	must(t, read.Err(), "the read lease holds")
	seq := write.Node()[strings.LastIndex(write.Node(), "__WRIT__")+len("__WRIT__"):]
	if !strings.HasSuffix(read.Node(), "-__READ__"+seq) {
		t.Fatalf("read node %s does not carry the writer's sequence %s", read.Node(), seq)
	}
	if read.Token() <= write.Token() {
		t.Fatalf("read token %d not after the write token %d", read.Token(), write.Token())
	}
	r2l := await(t, r2) // a reader shares with the downgraded reader
	pending(t, w2)      // the writer queued behind still waits
	release(t, read)
	pending(t, w2)
	release(t, r2l)
	release(t, await(t, w2))

	// Misuse.
	_, err = rw.Downgrade(ctxT(t), nil)
	mustIs(t, err, zklock.ErrInvalidArgument, "nil lease")
	r, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	_, err = rw.Downgrade(ctxT(t), r)
	mustIs(t, err, zklock.ErrInvalidArgument, "a read lease cannot be upgraded")
	release(t, r)
	m, err := newMutex(t, c, lockPath(t)).Acquire(ctxT(t))
	must(t, err)
	_, err = rw.Downgrade(ctxT(t), m)
	mustIs(t, err, zklock.ErrInvalidArgument, "a lease of another lock")
	release(t, m)
	_, err = rw.Downgrade(ctxT(t), write)
	mustIs(t, err, zklock.ErrReleased, "a released write lease")
}

// A semaphore's size is recorded in its path: a participant configured with
// another size fails, leaves no node, and never over-grants. A path made
// without a size gets one recorded.
func TestSemaphoreSizeChecked(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	s3, err := zklock.NewSemaphore(connect(t), path, 3)
	must(t, err)
	l, err := s3.Acquire(ctxT(t))
	must(t, err)
	data, _, err := c.Conn().Get(path)
	must(t, err)
	if string(data) != "3" {
		t.Fatalf("the path records %q, want \"3\"", data)
	}

	s5, err := zklock.NewSemaphore(connect(t), path, 5)
	must(t, err)
	_, err = s5.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrInvalidArgument, "a semaphore of 5 on a path of 3")
	if !strings.Contains(err.Error(), `"3"`) {
		t.Fatalf("the error does not say what is recorded: %v", err)
	}
	_, err = s5.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrInvalidArgument, "TryAcquire too")
	eventually(t, func() bool { return len(children(t, c, path)) == 1 }, "the refused participants left no node")
	release(t, l)

	// A path someone else made, with no data: the first participant records
	// its size, and only if nothing was recorded meanwhile.
	bare := lockPath(t)
	for _, p := range parentsOf(bare) {
		if _, err := c.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	s2, err := zklock.NewSemaphore(connect(t), bare, 2)
	must(t, err)
	l, err = s2.Acquire(ctxT(t))
	must(t, err)
	data, _, err = c.Conn().Get(bare)
	must(t, err)
	if !bytes.Equal(data, []byte("2")) {
		t.Fatalf("the bare path records %q, want \"2\"", data)
	}
	release(t, l)
}

// parentsOf returns p's ancestors and p, outermost first.
func parentsOf(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
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
