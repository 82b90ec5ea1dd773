package zklock_test

import (
	"testing"

	"github.com/zkrecipes/zklock"
)

func TestClientClose(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, err := zklock.Connect(ctxT(t), servers(t))
	must(t, err)
	m := newMutex(t, a, path)
	held, err := m.Acquire(ctxT(t))
	must(t, err)
	sem := newSem(t, a, path+"sem", 1)
	s1, err := sem.Acquire(ctxT(t))
	must(t, err)
	waiting := async(sem.Acquire, ctxT(t))
	queued(t, connect(t), path+"sem", 2)

	must(t, a.Close())
	if !closed(held.Done()) {
		t.Fatal("a lease of a closed Client is not done")
	}
	mustIs(t, held.Err(), zklock.ErrClientClosed)
	mustIs(t, s1.Err(), zklock.ErrClientClosed)
	mustIs(t, returned(t, waiting).err, zklock.ErrClientClosed, "a waiter when the Client closes")
	_, err = m.Acquire(ctxT(t))
	mustIs(t, err, zklock.ErrClientClosed)
	must(t, a.Close(), "Close twice")
	c := connect(t)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}
