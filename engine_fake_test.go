package zklock_test

// Unit tests of the engine on internal/zkfake: the real Client, Session
// and recipes, an in-memory ZooKeeper, no network. They test decisions,
// not ZooKeeper (conformance_test.go holds the fake to a real server, and
// the other tests of this package run on one). Each waits on the fake's
// state or a lease's channels, never on time.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// fakeClient opens a Client on the in-memory ZooKeeper f: the real Session
// and engine, no network.
func fakeClient(t testing.TB, f *zkfake.Server, opts ...zklock.Option) *zklock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	c, err := zklock.Connect(ctx, []string{"zkfake"}, append([]zklock.Option{zklock.WithFakeForTest(f)}, opts...)...)
	must(t, err, "connect to the fake")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fakeMutexes connects two Clients to f, each with a Mutex on path.
func fakeMutexes(t testing.TB, f *zkfake.Server, path string) (ca, cb *zklock.Client, ma, mb *zklock.Mutex) {
	t.Helper()
	ca, cb = fakeClient(t, f), fakeClient(t, f)
	ma, err := zklock.NewMutex(ca, path)
	must(t, err)
	mb, err = zklock.NewMutex(cb, path)
	must(t, err)
	return ca, cb, ma, mb
}

// connOf returns the fake connection c's session is on.
func connOf(t testing.TB, f *zkfake.Server, c *zklock.Client) *zkfake.Conn {
	t.Helper()
	id := c.SessionID()
	for _, fc := range f.Conns() {
		if fc.SessionID() == id && id != 0 {
			return fc
		}
	}
	t.Fatalf("no fake connection has session %#x", id)
	return nil
}

// fakeQueued waits until path has n participants' children on the fake:
// its children but a semaphore's registry (`_holders`, registry.go), a
// container the server reaps once empty; with n 0, the registry too must
// be empty (no entry or marker left behind).
func fakeQueued(t testing.TB, f *zkfake.Server, path string, n int) {
	t.Helper()
	eventually(t, func() bool {
		return len(queuedOn(f.Children(path))) == n && (n > 0 || len(f.Children(path+"/_holders")) == 0)
	},
		"want %d children of %s, have %v (registry %v)", n, path, f.Children(path), f.Children(path+"/_holders"))
}

// queuedOn is kids but a semaphore's registry (`_holders`).
func queuedOn(kids []string) []string {
	out := kids[:0:0]
	for _, k := range kids {
		if k != "_holders" {
			out = append(out, k)
		}
	}
	return out
}

// doneWithin waits for a lease to end, and returns its error.
func doneWithin(t testing.TB, l *zklock.Lease) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(long):
		t.Fatalf("lease %s did not end", l.Node())
		return nil
	}
}

// mustLive fails unless l is held.
func mustLive(t testing.TB, l *zklock.Lease) {
	t.Helper()
	if err := l.Err(); err != nil {
		t.Fatalf("lease %s: %v, want it held", l.Node(), err)
	}
}

func TestFakeMutexHandsOverInOrder(t *testing.T) {
	f := zkfake.New()
	ca, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	ma, err := zklock.NewMutex(ca, "/m/lock")
	must(t, err)
	mb, err := zklock.NewMutex(cb, "/m/lock")
	must(t, err)
	mc, err := zklock.NewMutex(cc, "/m/lock")
	must(t, err)
	la, err := ma.Acquire(ctxT(t))
	must(t, err, "a")
	rb := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/m/lock", 2)
	rc := async(mc.Acquire, ctxT(t))
	fakeQueued(t, f, "/m/lock", 3)
	pending(t, rb)
	pending(t, rc)

	parts, err := ma.Participants(ctxT(t))
	must(t, err)
	if held, _ := holders(parts); fmt.Sprint(held) != "[true false false]" {
		t.Fatalf("participants %v", parts)
	}

	release(t, la)
	lb := await(t, rb)
	pending(t, rc)
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after %d: must rise", lb.Token(), la.Token())
	}
	release(t, lb)
	lc := await(t, rc)
	if lc.Token() <= lb.Token() {
		t.Fatalf("token %d after %d: must rise", lc.Token(), lb.Token())
	}
	mustIs(t, lb.Release(ctxT(t)), zklock.ErrReleased, "second release")
	release(t, lc)
	fakeQueued(t, f, "/m/lock", 0)
}

func TestFakeTryAcquire(t *testing.T) {
	f := zkfake.New()
	_, _, ma, mb := fakeMutexes(t, f, "/t/lock")
	la, err := ma.TryAcquire(ctxT(t))
	must(t, err, "try on a free lock")
	_, err = mb.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "try on a held lock")
	fakeQueued(t, f, "/t/lock", 1) // the loser's node is gone
	release(t, la)
	lb, err := mb.TryAcquire(ctxT(t))
	must(t, err, "try after release")
	release(t, lb)
}

func TestFakeRWMutex(t *testing.T) {
	f := zkfake.New()
	ca, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	rwa, err := zklock.NewRWMutex(ca, "/rw/lock")
	must(t, err)
	rwb, err := zklock.NewRWMutex(cb, "/rw/lock")
	must(t, err)
	rwc, err := zklock.NewRWMutex(cc, "/rw/lock")
	must(t, err)

	r1, err := rwa.ReadLock().Acquire(ctxT(t))
	must(t, err, "read 1")
	r2, err := rwb.ReadLock().Acquire(ctxT(t))
	must(t, err, "read 2 shares")
	_, err = rwc.WriteLock().TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "try write under readers")
	w := async(rwc.WriteLock().Acquire, ctxT(t))
	fakeQueued(t, f, "/rw/lock", 3)
	// A reader behind a waiting writer waits too.
	r3 := async(rwa.ReadLock().Acquire, ctxT(t))
	fakeQueued(t, f, "/rw/lock", 4)
	parts, err := rwa.Participants(ctxT(t))
	must(t, err)
	if held, read := holders(parts); fmt.Sprint(held, read) != "[true true false false] [true true false true]" {
		t.Fatalf("participants %+v", parts)
	}
	release(t, r1)
	pending(t, w)
	release(t, r2)
	lw := await(t, w)
	pending(t, r3)
	if lw.Token() <= r2.Token() {
		t.Fatalf("write token %d after read %d", lw.Token(), r2.Token())
	}
	// Downgrade: the writer becomes a reader, and the reader behind it
	// shares.
	rd, err := rwc.Downgrade(ctxT(t), lw)
	must(t, err, "downgrade")
	mustIs(t, lw.Err(), zklock.ErrReleased, "the write lease after a downgrade")
	l3 := await(t, r3)
	mustLive(t, rd)
	// A writer waits for both.
	w2 := async(rwb.WriteLock().Acquire, ctxT(t))
	fakeQueued(t, f, "/rw/lock", 3)
	release(t, rd)
	pending(t, w2)
	release(t, l3)
	release(t, await(t, w2))
}

func TestFakeSemaphoreLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []zklock.LockOption
		n    bool // AcquireN of more than one
	}{
		{"zklock", nil, true},
		{"curator", []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutCurator)}, true},
		{"curator-sharedcount", []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("/sem-count")}, true},
		{"kazoo", []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutKazoo)}, false},
	} {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			f := zkfake.New()
			ca, cb := fakeClient(t, f), fakeClient(t, f)
			sa, err := zklock.NewSemaphore(ca, "/sem", 2, tc.opts...)
			must(t, err)
			sb, err := zklock.NewSemaphore(cb, "/sem", 2, tc.opts...)
			must(t, err)
			l1, err := sa.Acquire(ctxT(t))
			must(t, err, "lease 1")
			l2, err := sb.TryAcquire(ctxT(t))
			must(t, err, "lease 2")
			_, err = sa.TryAcquire(ctxT(t))
			mustIs(t, err, zklock.ErrLocked, "a third lease of two")
			w := async(sb.Acquire, ctxT(t))
			parts, err := sa.Participants(ctxT(t))
			must(t, err)
			if len(parts) < 2 {
				t.Fatalf("participants %+v", parts)
			}
			release(t, l1)
			l3 := await(t, w)
			if l3.Token() <= l1.Token() {
				t.Fatalf("token %d after %d", l3.Token(), l1.Token())
			}
			release(t, l2)
			release(t, l3)
			if !tc.n {
				_, err := sa.AcquireN(ctxT(t), 2)
				mustIs(t, err, zklock.ErrInvalidArgument, "kazoo AcquireN(2)")
				return
			}
			ls, err := sa.AcquireN(ctxT(t), 2)
			must(t, err, "AcquireN(2)")
			if len(ls) != 2 {
				t.Fatalf("AcquireN(2) gave %d leases", len(ls))
			}
			_, err = sb.TryAcquire(ctxT(t))
			mustIs(t, err, zklock.ErrLocked, "a lease while AcquireN holds all")
			wn := make(chan error, 1)
			go func() {
				ls, err := sb.AcquireN(ctxT(t), 2)
				if err == nil {
					for _, l := range ls {
						err = errors.Join(err, l.Release(ctxT(t)))
					}
				}
				wn <- err
			}()
			for _, l := range ls {
				release(t, l)
			}
			select {
			case err := <-wn:
				must(t, err, "the waiting AcquireN(2)")
			case <-time.After(long):
				t.Fatal("the waiting AcquireN(2) did not return")
			}
			if tc.name != "curator-sharedcount" { // a count may grow: n over it waits
				_, err = sa.AcquireN(ctxT(t), 3)
				mustIs(t, err, zklock.ErrInvalidArgument, "AcquireN over the size")
			}
		})
	}
}

func TestFakeSemaphoreSharedCountGrows(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	opts := []zklock.LockOption{zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount("/count")}
	sa, err := zklock.NewSemaphore(ca, "/sc", 1, opts...)
	must(t, err)
	sb, err := zklock.NewSemaphore(cb, "/sc", 1, opts...)
	must(t, err)
	l1, err := sa.Acquire(ctxT(t))
	must(t, err)
	w := async(sb.Acquire, ctxT(t))
	eventually(t, func() bool { return f.Exists("/count") })
	pending(t, w)
	// A larger count lets the waiter through (Curator's SharedCount: a
	// 4-byte big-endian int).
	fc := connOf(t, f, ca)
	must(t, fc.Set("/count", []byte{0, 0, 0, 2}), "grow the count")
	l2 := await(t, w)
	mustLive(t, l1)
	release(t, l1)
	release(t, l2)
}

func TestFakeMultiLock(t *testing.T) {
	f := zkfake.New()
	ca, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
	ab, err := zklock.NewMultiLock(ca, []string{"/ml/a", "/ml/b"})
	must(t, err)
	ba, err := zklock.NewMultiLock(cb, []string{"/ml/b", "/ml/a"})
	must(t, err)
	cOnly, err := zklock.NewMultiLock(cc, []string{"/ml/c"})
	must(t, err)
	l1, err := ab.Acquire(ctxT(t))
	must(t, err, "a+b")
	_, err = ba.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked, "b+a while a+b is held")
	lc, err := cOnly.TryAcquire(ctxT(t))
	must(t, err, "c is free")
	w := async(ba.Acquire, ctxT(t))
	fakeQueued(t, f, "/ml/a", 2)
	fakeQueued(t, f, "/ml/b", 2)
	release(t, l1)
	l2 := await(t, w)
	if l2.Token() <= l1.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l1.Token())
	}
	release(t, l2)
	release(t, lc)
	fakeQueued(t, f, "/ml/a", 0)
}

func TestFakeElection(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	ea, err := zklock.NewElection(ca, "/el")
	must(t, err)
	eb, err := zklock.NewElection(cb, "/el")
	must(t, err)
	_, err = ea.Leader(ctxT(t))
	mustIs(t, err, zklock.ErrNoLeader, "nobody campaigns")
	octx, stop := context.WithCancel(ctxT(t))
	defer stop()
	obs := eb.Observe(octx)
	next := func() zklock.Participant {
		t.Helper()
		select {
		case p := <-obs:
			return p
		case <-time.After(long):
			t.Fatal("no observation")
			return zklock.Participant{}
		}
	}
	if p := next(); p.Node != "" {
		t.Fatalf("first observation %+v, want no leader", p)
	}
	la, err := ea.Campaign(ctxT(t))
	must(t, err, "a campaigns")
	if p := next(); p.Node != la.Node() {
		t.Fatalf("observed %+v, want %s", p, la.Node())
	}
	wb := async(eb.Campaign, ctxT(t))
	fakeQueued(t, f, "/el", 2)
	p, err := eb.Leader(ctxT(t))
	must(t, err)
	if p.Node != la.Node() || !p.Holder {
		t.Fatalf("leader %+v, want %s", p, la.Node())
	}
	parts, err := ea.Participants(ctxT(t))
	must(t, err)
	if len(parts) != 2 {
		t.Fatalf("participants %+v", parts)
	}
	release(t, la)
	lb := await(t, wb)
	if p := next(); p.Node != lb.Node() {
		// The gap between the leaders may be seen first.
		if p.Node != "" {
			t.Fatalf("observed %+v, want %s", p, lb.Node())
		}
		if p := next(); p.Node != lb.Node() {
			t.Fatalf("observed %+v, want %s", p, lb.Node())
		}
	}
	release(t, lb)
}

func TestFakeRevoke(t *testing.T) {
	f := zkfake.New()
	ca, cb := fakeClient(t, f), fakeClient(t, f)
	m, err := zklock.NewMutex(ca, "/rv/lock")
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	rv := l.Revoked()
	if closed(rv) {
		t.Fatal("revoked before anyone asked")
	}
	must(t, zklock.Revoke(ctxT(t), cb, l.Node()), "revoke")
	select {
	case <-rv:
	case <-time.After(long):
		t.Fatal("the holder was not told")
	}
	mustLive(t, l) // revocation is cooperative
	release(t, l)
	err = zklock.Revoke(ctxT(t), cb, l.Node())
	if err == nil {
		t.Fatal("revoking a gone node succeeded")
	}
}

func TestFakeDo(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/do/lock")
	must(t, err)
	ran := false
	must(t, zklock.Do(ctxT(t), m, func(ctx context.Context) error {
		ran = true
		if len(f.Children("/do/lock")) != 1 {
			return errors.New("not held during fn")
		}
		return nil
	}))
	if !ran {
		t.Fatal("fn did not run")
	}
	fakeQueued(t, f, "/do/lock", 0)
	boom := errors.New("boom")
	mustIs(t, zklock.Do(ctxT(t), m, func(context.Context) error { return boom }), boom, "fn's error")
	// A lease lost while fn runs cancels fn's context, and Do says so.
	err = zklock.Do(ctxT(t), m, func(ctx context.Context) error {
		kids := f.Children("/do/lock")
		if len(kids) != 1 {
			return fmt.Errorf("children %v", kids)
		}
		must(t, f.Delete("/do/lock/"+kids[0]))
		<-ctx.Done()
		return ctx.Err()
	})
	mustIs(t, err, zklock.ErrNodeDeleted, "Do of a lease deleted from outside")
}

func TestFakeParticipantsOfAPath(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/pp/lock", zklock.WithNodeData([]byte("me")))
	must(t, err)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	parts, err := zklock.Participants(ctxT(t), c, "/pp/lock")
	must(t, err)
	if len(parts) != 1 || !parts[0].Holder || string(parts[0].Data) != "me" || parts[0].Node != l.Node() {
		t.Fatalf("participants %+v", parts)
	}
	release(t, l)
	// A path that does not exist has no participants.
	parts, err = zklock.Participants(ctxT(t), c, "/pp/none")
	if err != nil || len(parts) != 0 {
		t.Fatalf("participants of a missing path: %v %v", parts, err)
	}
	_, err = zklock.Participants(ctxT(t), c, "no/slash")
	mustIs(t, err, zklock.ErrInvalidArgument, "participants of a bad path")
}

// TestFakeTrace checks what the trace hears of an acquire, a wait, a
// release and a loss.
func TestFakeTrace(t *testing.T) {
	f := zkfake.New()
	var mu sync.Mutex
	var log []string
	add := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	tr := &zklock.Trace{
		Queued:   func(a zklock.AcquireInfo) { add("queued") },
		Acquired: func(a zklock.AcquireInfo) { add("acquired") },
		Failed:   func(a zklock.AcquireInfo) { add("failed") },
		Released: func(l zklock.LeaseInfo) { add("released") },
		Lost:     func(l zklock.LeaseInfo) { add("lost") },
	}
	ca, cb := fakeClient(t, f, zklock.WithTrace(tr)), fakeClient(t, f)
	ma, err := zklock.NewMutex(ca, "/tr/lock")
	must(t, err)
	mb, err := zklock.NewMutex(cb, "/tr/lock")
	must(t, err)
	lb, err := mb.Acquire(ctxT(t))
	must(t, err)
	w := async(ma.Acquire, ctxT(t))
	fakeQueued(t, f, "/tr/lock", 2)
	release(t, lb)
	la := await(t, w)
	release(t, la)
	_, err = mb.Acquire(ctxT(t))
	must(t, err)
	_, err = ma.TryAcquire(ctxT(t))
	mustIs(t, err, zklock.ErrLocked)
	mu.Lock()
	got := strings.Join(log, ",")
	mu.Unlock()
	if got != "queued,acquired,released,failed" {
		t.Fatalf("trace %s", got)
	}
}
