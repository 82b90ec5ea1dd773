package zklock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// A permanent ZooKeeper error is returned at once, wrapped, with
// ZooKeeper's sentinel reachable; it is not retried until ctx ends.
func TestPermanentErrorReturnsAtOnce(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	alice := connect(t, zklock.WithAuth("digest", []byte("alice:secret")))
	open := zk.WorldACL(zk.PermAll)
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			_, err := alice.Conn().Create(path[:i], nil, 0, open)
			if !errors.Is(err, zk.ErrNodeExists) {
				must(t, err, "create %s", path[:i])
			}
		}
	}
	_, err := alice.Conn().Create(path, nil, 0, zk.DigestACL(zk.PermAll, "alice", "secret"))
	must(t, err, "create %s", path)

	m := newMutex(t, connect(t), path)
	ctx := ctxT(t)
	_, err = m.Acquire(ctx)
	mustIs(t, err, zk.ErrNoAuth)
	refusedBeforeItsContext(t, ctx, err)
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("the error does not say where: %v", err)
	}

	// With the credentials, the same path works.
	l, err := newMutex(t, alice, path).Acquire(ctxT(t))
	must(t, err, "acquire with the credentials")
	release(t, l)
}

// A lock path whose ACL lets its creator do everything and others only
// read (zk.AuthACL with a digest identity, plus world:anyone READ), as
// docs/security.md advises: a client authenticated as someone else, or not at
// all, is refused by every recipe with zk.ErrNoAuth before its context
// ends (not retried until then), leaves no node and no retry behind, and
// the holder's lease lives on.
func TestDigestACLRefusal(t *testing.T) {
	t.Parallel()
	alice := connect(t, zklock.WithAuth("digest", []byte("alice:secret")),
		zklock.WithACL(append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)))
	bob := connect(t, zklock.WithAuth("digest", []byte("bob:secret")))
	anonymous := connect(t)

	path := lockPath(t)
	// The ancestors are everyone's; the lock path and below are alice's.
	for _, p := range parentsOf(path)[:len(parentsOf(path))-1] {
		_, err := alice.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		if !errors.Is(err, zk.ErrNodeExists) {
			must(t, err, "create %s", p)
		}
	}
	held, err := newMutex(t, alice, path).Acquire(ctxT(t))
	must(t, err)
	_, err = alice.Conn().Create(path+"-sem", nil, 0, append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...))
	must(t, err)
	before := children(t, alice, path)

	for name, c := range map[string]*zklock.Client{"bob": bob, "anonymous": anonymous} {
		for what, acquire := range map[string]func(context.Context) error{
			"Mutex": func(ctx context.Context) error {
				_, err := newMutex(t, c, path).Acquire(ctx)
				return err
			},
			"RWMutex.WriteLock": func(ctx context.Context) error {
				rw, err := zklock.NewRWMutex(c, path)
				must(t, err)
				_, err = rw.WriteLock().Acquire(ctx)
				return err
			},
			"Semaphore": func(ctx context.Context) error {
				s, err := zklock.NewSemaphore(c, path+"-sem", 3)
				must(t, err)
				_, err = s.Acquire(ctx)
				return err
			},
			"Election": func(ctx context.Context) error {
				e, err := zklock.NewElection(c, path)
				must(t, err)
				_, err = e.Campaign(ctx)
				return err
			},
			"MultiLock": func(ctx context.Context) error {
				// The first path is open to all: the refusal on the second
				// must undo nothing, since all are created in one
				// multi-operation.
				m, err := zklock.NewMultiLock(c, []string{path + "-open", path})
				must(t, err)
				_, err = m.Acquire(ctx)
				return err
			},
			"Mutex under it": func(ctx context.Context) error {
				_, err := newMutex(t, c, path+"/deeper/lock").Acquire(ctx)
				return err
			},
		} {
			ctx := ctxT(t)
			began := time.Now()
			err := acquire(ctx)
			t.Logf("%s, %s: refused in %v: %v", name, what, time.Since(began), err)
			mustIs(t, err, zk.ErrNoAuth, "%s, %s", name, what)
			refusedBeforeItsContext(t, ctx, err, "%s, %s", name, what)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%s, %s: the error does not say where: %v", name, what, err)
			}
		}
	}
	if got := children(t, alice, path); !slices.Equal(got, before) {
		t.Fatalf("the refused acquires left nodes: %q, want %q", got, before)
	}
	if got := children(t, alice, path+"-sem"); len(got) != 0 {
		t.Fatalf("the refused semaphore acquires left nodes: %q", got)
	}
	if got := children(t, alice, path+"-open"); len(got) != 0 {
		t.Fatalf("the refused MultiLock acquires left nodes on the open path: %q", got)
	}
	must(t, held.Err(), "the holder's lease")
	if closed(held.Done()) || !time.Now().Before(held.ValidUntil()) {
		t.Fatal("the holder's lease ended")
	}
	// The refused clients still work where they may: reading the path.
	for name, c := range map[string]*zklock.Client{"bob": bob, "anonymous": anonymous} {
		parts, err := newMutex(t, c, path).Participants(ctxT(t))
		must(t, err, "%s reads the path", name)
		if len(parts) != 1 || parts[0].Node != path+"/"+before[0] {
			t.Fatalf("%s sees %v, want alice's node alone", name, parts)
		}
	}
	release(t, held)
}

// A lock path whose ACL lets others create but not read or delete (a
// mistake docs/security.md warns of): the refused acquire fails at once with
// zk.ErrNoAuth, but the node it created cannot be deleted by its Client
// (ZooKeeper asks for DELETE on the parent) and stays, ephemeral, until
// that Client closes: then the server deletes it.
func TestACLCreateWithoutDelete(t *testing.T) {
	t.Parallel()
	alice := connect(t, zklock.WithAuth("digest", []byte("alice:secret")))
	path := lockPath(t)
	for _, p := range parentsOf(path)[:len(parentsOf(path))-1] {
		_, err := alice.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		if !errors.Is(err, zk.ErrNodeExists) {
			must(t, err, "create %s", p)
		}
	}
	_, err := alice.Conn().Create(path, nil, 0,
		append(zk.AuthACL(zk.PermAll), zk.ACL{Perms: zk.PermCreate, Scheme: "world", ID: "anyone"}))
	must(t, err)

	bob := connect(t)
	ctx := ctxT(t)
	_, err = newMutex(t, bob, path).Acquire(ctx)
	mustIs(t, err, zk.ErrNoAuth)
	refusedBeforeItsContext(t, ctx, err)
	if got := children(t, alice, path); len(got) != 1 {
		t.Fatalf("children %q: want the refused Client's node, which it may not delete", got)
	}
	must(t, bob.Close())
	// The close request's reply comes once the server deleted the
	// session's nodes, unless go-zookeeper stopped waiting for it.
	eventually(t, func() bool { return len(children(t, alice, path)) == 0 }, "the node goes with its session")
}

// refusedBeforeItsContext checks that a refused call returned of its own
// accord: with its context still live and no deadline in its error. A
// refusal retried until the context ends (a permanent error classed as
// one to retry) fails it, whatever the machine's speed; how soon the
// refusal came is only logged.
func refusedBeforeItsContext(t *testing.T, ctx context.Context, err error, what ...any) {
	t.Helper()
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("%sreturned only as its context ended, retrying the refusal: %v", msg(what), err)
	}
}
