package zklock_test

// After a create whose fate is unknown: the engine finds what it made, in
// the session that made it, and makes nothing twice; what it did not make
// it makes again.

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// recoverRecipes acquires, on the fake, each recipe whose claim recovers
// after a lost create: nodes on /rc/a (and /rc/b for the MultiLock), n on
// /rc/a for AcquireN.
//
// recoverPaths makes their paths first, so that the first create is the
// one that makes the nodes (not one refused for a missing parent).
var recoverRecipes = []struct {
	name    string
	n       int // nodes on /rc/a
	acquire func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error)
	waits   bool // behind another client's holder on /rc/a (else it holds beside it)
}{
	{"mutex", 1, func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error) {
		m, err := zklock.NewMutex(c, "/rc/a")
		if err != nil {
			return nil, err
		}
		l, err := m.Acquire(ctx)
		return []*zklock.Lease{l}, err
	}, true},
	{"multilock", 1, func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error) {
		m, err := zklock.NewMultiLock(c, []string{"/rc/a", "/rc/b"})
		if err != nil {
			return nil, err
		}
		l, err := m.Acquire(ctx)
		return []*zklock.Lease{l}, err
	}, true},
	{"semaphore-n", 2, func(ctx context.Context, c *zklock.Client) ([]*zklock.Lease, error) {
		s, err := zklock.NewSemaphore(c, "/rc/a", 3)
		if err != nil {
			return nil, err
		}
		return s.AcquireN(ctx, 2)
	}, false},
}

// holdA takes, for another Client, what tc needs on /rc/a: the mutex, or
// one lease of the semaphore of 3.
func holdA(t testing.TB, c *zklock.Client, semaphore bool) *zklock.Lease {
	t.Helper()
	if semaphore {
		s, err := zklock.NewSemaphore(c, "/rc/a", 3)
		must(t, err)
		l, err := s.Acquire(ctxT(t))
		must(t, err)
		return l
	}
	m, err := zklock.NewMutex(c, "/rc/a")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	return l
}

func recoverPaths(t testing.TB, f *zkfake.Server) {
	t.Helper()
	for _, p := range []string{"/rc", "/rc/a", "/rc/b"} {
		must(t, f.Create(p, nil))
	}
}

// TestFakeCreateReplyLostIsFoundNotMadeAgain: a create that applied but
// whose reply was lost is found by its protected id, in its session, and
// kept: exactly one create goes out, the leases are on the nodes it made,
// and nobody else's node on the path is taken for ours (another Client
// holds there meanwhile).
func TestFakeCreateReplyLostIsFoundNotMadeAgain(t *testing.T) {
	for _, tc := range recoverRecipes {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			c, other := fakeClient(t, f), fakeClient(t, f)
			recoverPaths(t, f)
			lo := holdA(t, other, !tc.waits)
			conn := connOf(t, f, c)
			var creates atomic.Int32
			waiting := make(chan struct{})
			var once sync.Once
			f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
				switch {
				case op.Conn != conn:
				case op.Name == "CreateEach" && creates.Add(1) == 1 && err == nil:
					return zk.ErrConnectionClosed // applied; the reply is lost
				case op.Name == "GetW" && op.Paths[0] == lo.Node():
					once.Do(func() { close(waiting) })
				}
				return err
			}})
			type got struct {
				leases []*zklock.Lease
				err    error
			}
			res := make(chan got, 1)
			go func() {
				leases, err := tc.acquire(ctxT(t), c)
				res <- got{leases, err}
			}()
			var r got
			if tc.waits {
				select {
				case <-waiting:
				case <-time.After(long):
					t.Fatal("the acquire never waited behind the holder")
				}
			} else {
				r = <-res
			}
			if !f.Exists(lo.Node()) {
				t.Fatalf("the other Client's node %s was deleted by the recovery", lo.Node())
			}
			release(t, lo)
			if tc.waits {
				r = <-res
			}
			must(t, r.err)
			leases := r.leases
			if n := creates.Load(); n != 1 {
				t.Fatalf("%d creates, want 1: the one whose reply was lost made the nodes", n)
			}
			ownLeasesThenRelease(t, f, c, leases, tc.n)
		})
	}
}

// TestFakeCreateLostUnappliedIsMadeAgain: a create that failed with a
// connection loss before it applied made nothing; the engine finds nothing
// of ours and creates again, in the same session, or in the new one if the
// session ended meanwhile. Taking "nothing found" for "made" would hand out
// a lease on no node.
func TestFakeCreateLostUnappliedIsMadeAgain(t *testing.T) {
	for _, expire := range []bool{false, true} {
		expire := expire
		for _, tc := range recoverRecipes {
			tc := tc
			name := tc.name
			if expire {
				name += "-session-expired"
			}
			t.Run(name, func(t *testing.T) {
				f := zkfake.New()
				c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
				recoverPaths(t, f)
				first := c.SessionID()
				var creates atomic.Int32
				f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
					if op.Name == "CreateEach" && strings.HasPrefix(op.Paths[0], "/rc/") && creates.Add(1) == 1 {
						if expire {
							f.Expire(op.Session)
						}
						return zk.ErrConnectionClosed // not applied
					}
					return nil
				}})
				leases, err := tc.acquire(ctxT(t), c)
				must(t, err)
				if n := creates.Load(); n != 2 {
					t.Fatalf("%d creates, want 2: the lost one, then one that made the nodes", n)
				}
				if expire && c.SessionID() == first {
					t.Fatalf("still in session %#x, which expired", first)
				}
				ownLeasesThenRelease(t, f, c, leases, tc.n)
			})
		}
	}
}

// TestFakeAbandonAfterAnUnknownCreateLeavesNothing: an acquire gives up
// (its ctx ends) while the fate of its create is unknown: the create
// applied, its reply was lost, and the read that would have found the
// nodes failed too. Nobody knows the nodes' names, so they are deleted by
// their protected id; none is left in the queue.
func TestFakeAbandonAfterAnUnknownCreateLeavesNothing(t *testing.T) {
	for _, tc := range recoverRecipes {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			c := fakeClient(t, f)
			recoverPaths(t, f)
			conn := connOf(t, f, c)
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			var creates, finds atomic.Int32
			f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
				switch {
				case op.Conn != conn:
				case op.Name == "CreateEach" && creates.Add(1) == 1 && err == nil:
					return zk.ErrConnectionClosed // applied; the reply is lost
				case op.Name == "Children" && op.Paths[0] == "/rc/a" && finds.Add(1) == 1:
					cancel() // the caller gives up while the create's fate is unknown
					return zk.ErrConnectionClosed
				}
				return err
			}})
			_, err := tc.acquire(ctx, c)
			mustIs(t, err, context.Canceled)
			if creates.Load() != 1 || finds.Load() == 0 {
				t.Fatalf("%d creates, %d reads to find them; want 1 and some", creates.Load(), finds.Load())
			}
			fakeQueued(t, f, "/rc/a", 0)
			fakeQueued(t, f, "/rc/b", 0)
		})
	}
}

// TestFakeStrayOfARetriedCreateIsDeleted: a create applied and its reply
// was lost, the read that would have found the node failed, and the
// create was sent again: two nodes carry our protected id, one of them a
// stray nobody holds. The first look finds it and deletes it: after the
// release nothing is left, and nobody queues behind a node no one will
// ever release.
func TestFakeStrayOfARetriedCreateIsDeleted(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	recoverPaths(t, f)
	conn := connOf(t, f, c)
	var creates, finds atomic.Int32
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		switch {
		case op.Conn != conn:
		case op.Name == "CreateEach" && creates.Add(1) == 1 && err == nil:
			return zk.ErrConnectionClosed // applied; the reply is lost
		case op.Name == "Children" && op.Paths[0] == "/rc/a" && finds.Add(1) == 1:
			return zk.ErrConnectionClosed // and so is the read that would find it
		}
		return err
	}})
	m, err := zklock.NewMutex(c, "/rc/a")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	if creates.Load() != 2 {
		t.Fatalf("%d creates, want 2", creates.Load())
	}
	fakeQueued(t, f, "/rc/a", 1) // the stray is gone
	release(t, l)
	fakeQueued(t, f, "/rc/a", 0)
}

// TestFakeDowngradeCreateLostUnapplied: the create of a downgrade's read
// node fails with a connection loss before it applied. The engine looks
// for the node by its name, finds none, and creates it again: the
// downgrade succeeds, rather than take the missing node for made (and
// then fail as if its session had ended).
func TestFakeDowngradeCreateLostUnapplied(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f, zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	rw, err := zklock.NewRWMutex(c, "/dg/lock")
	must(t, err)
	w, err := rw.WriteLock().Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, c)
	var creates atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "CreateEphemeralIf" && creates.Add(1) == 1 {
			return zk.ErrConnectionClosed // not applied
		}
		return nil
	}})
	r, err := rw.Downgrade(ctxT(t), w)
	must(t, err, "downgrade after a lost create")
	if creates.Load() != 2 {
		t.Fatalf("%d creates, want 2", creates.Load())
	}
	mustLive(t, r)
	if !f.Exists(r.Node()) {
		t.Fatalf("the read lease's node %s does not exist", r.Node())
	}
	release(t, r)
	fakeQueued(t, f, "/dg/lock", 0)
}

// ownLeasesThenRelease checks that leases are n live leases on /rc/a's n
// nodes, each of c's session, releases them, and checks that the queue is
// empty then.
func ownLeasesThenRelease(t *testing.T, f *zkfake.Server, c *zklock.Client, leases []*zklock.Lease, n int) {
	t.Helper()
	if kids := f.Children("/rc/a"); len(kids) != n {
		t.Fatalf("children of /rc/a: %v, want %d", kids, n)
	}
	for _, l := range leases {
		mustLive(t, l)
		if !f.Exists(l.Node()) || f.Owner(l.Node()) != c.SessionID() {
			t.Fatalf("lease on %s: exists %v, owner %#x, session %#x", l.Node(), f.Exists(l.Node()), f.Owner(l.Node()), c.SessionID())
		}
	}
	for _, l := range leases {
		release(t, l)
	}
	fakeQueued(t, f, "/rc/a", 0)
}
