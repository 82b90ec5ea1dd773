package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// grantWatches returns the paths of grants (handoff.go) some session of f
// watches.
func grantWatches(f *zkfake.Server) []string {
	var out []string
	for _, p := range f.Watched() {
		if strings.Contains(p, "/_g_") {
			out = append(out, p)
		}
	}
	return out
}

// TestFakeHandoffTokens: a lease handed off by a grant holds with no read
// of the queue, and reads its token when first asked (the fake's
// notifications carry no zxid, as ZooKeeper 3.8's): above its
// predecessor's, and the same on every call. Each waiter is a Client of
// its own: one that has had such a grant takes the read path for a lock
// whose tokens are asked for (TestFakeNoHandoffForTokensWithoutZxid).
func TestFakeHandoffTokens(t *testing.T) {
	f := zkfake.New()
	const path = "/ht/lock"
	newMutex := func() *zklock.Mutex {
		m, err := zklock.NewMutex(fakeClient(t, f), path)
		must(t, err)
		return m
	}
	prev, err := newMutex().Acquire(ctxT(t))
	must(t, err)
	for i := 0; i < 5; i++ {
		ch := async(newMutex().Acquire, ctxT(t))
		fakeQueued(t, f, path, 2)
		eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
		release(t, prev)
		l := await(t, ch)
		tok := l.Token()
		if tok <= prev.Token() {
			t.Fatalf("handoff %d: token %d, not above its predecessor's %d", i, tok, prev.Token())
		}
		if again := l.Token(); again != tok {
			t.Fatalf("handoff %d: token %d, then %d", i, tok, again)
		}
		prev = l
	}
	release(t, prev)
	if w := grantWatches(f); len(w) != 0 {
		t.Fatalf("grant watches left: %v", w)
	}
}

// TestFakeNoHandoffForTokensWithoutZxid: once a Client has had a grant
// without its zxid (the fake's, as ZooKeeper 3.8's), its locks whose
// tokens are asked for take no part in the handoff in a short queue
// (TestFakeHandoffForTokensInADeepQueue: a deep one): a waiter sets no
// grant watch and, woken, reads the queue, which decides it and gives its
// token in one round trip (a grant would be followed by a read of the
// token all the same); its lease releases with a plain delete. Tokens
// still increase, and the other Client's participants still hand off.
func TestFakeNoHandoffForTokensWithoutZxid(t *testing.T) {
	f := zkfake.New()
	const path = "/hz/lock"
	ca, cb, ma, mb := fakeMutexes(t, f, path)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	la.Token() // ma's tokens are asked for
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, path, 2)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the first waiter watches the grant")
	asleep(t, 1)
	heard(t, ca, path)
	release(t, la)
	lb := await(t, ch) // granted without a zxid: cb knows now
	prev := lb.Token() // mb's tokens are asked for
	release(t, lb)

	la, err = ma.Acquire(ctxT(t))
	must(t, err)
	if la.Token() <= prev {
		t.Fatalf("token %d, not above its predecessor's %d", la.Token(), prev)
	}
	log := logOps(f, connOf(t, f, cb), nil)
	ch = async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, path, 2)
	asleep(t, 1)
	heard(t, ca, path)
	for _, op := range log.since(0) {
		if strings.HasPrefix(op, "ExistsW ") {
			t.Fatalf("the waiter watches a grant (%s); want the read path", op)
		}
	}
	at := log.len()
	release(t, la)
	lb = await(t, ch)
	if woken := log.since(at); len(woken) != 1 || woken[0] != "ChildrenStat "+path {
		t.Fatalf("woken, the waiter made %v; want one read of the queue", woken)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d, not above its predecessor's %d", lb.Token(), la.Token())
	}

	// ca has had no grant: its waiter watches the grant, which lb's
	// release (a plain delete) never fires, and reads.
	ch = async(ma.Acquire, ctxT(t))
	fakeQueued(t, f, path, 2)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the other Client's waiter watches the grant")
	asleep(t, 1)
	heard(t, cb, path)
	at = log.len()
	release(t, lb)
	// (The keeper may set a watch on lb's node meanwhile: only the
	// release's own request is looked for.)
	if sent := log.since(at); !slices.Contains(sent, "Delete "+lb.Node()) || slices.ContainsFunc(sent, func(op string) bool {
		return strings.HasPrefix(op, "HandOff ")
	}) {
		t.Fatalf("the release sent %v; want a plain delete", sent)
	}
	la = await(t, ch)
	if la.Token() <= lb.Token() {
		t.Fatalf("token %d, not above its predecessor's %d", la.Token(), lb.Token())
	}
	release(t, la)
	eventually(t, func() bool { return len(grantWatches(f)) == 0 }, "no grant watch left")
}

// TestFakeHandoffTokenOfALostLease: a lease handed off whose node is gone
// before its token was read has the token 0 (a read then could name a
// state after its node's deletion: a token as high as the next holder's).
func TestFakeHandoffTokenOfALostLease(t *testing.T) {
	f := zkfake.New()
	_, _, ma, mb := fakeMutexes(t, f, "/hl/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/hl/lock", 2)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
	release(t, la)
	lb := await(t, ch)
	must(t, f.Delete(lb.Node()))
	select {
	case <-lb.Done():
	case <-time.After(long):
		t.Fatal("the lease whose node was deleted did not end")
	}
	if tok := lb.Token(); tok != 0 {
		t.Fatalf("a lease lost before its token was read has token %d; want 0", tok)
	}
}

// TestFakeHandoffDeletedWaiterNeverHolds: a waiter whose node someone else
// deleted may still be told of its predecessor's grant, beside the waiter
// behind it, which now has the same predecessor. Only the live one holds:
// the deleted one's own node's watch fired first, and the grant checks it
// (participant.quiet). The deletion and the release come together, so that
// both notifications wait in the deleted waiter's channels.
func TestFakeHandoffDeletedWaiterNeverHolds(t *testing.T) {
	for round := 0; round < 30; round++ {
		f := zkfake.New()
		path := "/hd/lock"
		ca, cb, cc := fakeClient(t, f), fakeClient(t, f), fakeClient(t, f)
		var ms []*zklock.Mutex
		for _, c := range []*zklock.Client{ca, cb, cc} {
			m, err := zklock.NewMutex(c, path)
			must(t, err)
			ms = append(ms, m)
		}
		lx, err := ms[0].Acquire(ctxT(t))
		must(t, err)
		var holders, most, gone atomic.Int32
		take := func(m *zklock.Mutex) func(context.Context) (*zklock.Lease, error) {
			return func(ctx context.Context) (*zklock.Lease, error) {
				l, err := m.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				if !f.Exists(l.Node()) {
					gone.Add(1) // granted on a node that was gone: it is no one's place
				}
				n := holders.Add(1)
				for {
					if old := most.Load(); n <= old || most.CompareAndSwap(old, n) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
				holders.Add(-1)
				return l, nil
			}
		}
		chS := async(take(ms[1]), ctxT(t))
		fakeQueued(t, f, path, 2)
		chT := async(take(ms[2]), ctxT(t))
		fakeQueued(t, f, path, 3)
		kids := f.Children(path)
		slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
		s := path + "/" + kids[1]
		eventually(t, func() bool { return len(grantWatches(f)) == 2 }, "both waiters watch their grants")
		// S's node, then X's release at once: S may find both its own
		// node's deletion and X's grant waiting.
		must(t, f.Delete(s))
		release(t, lx)
		lt := await(t, chT)
		release(t, lt)
		ls := await(t, chS) // S queued again, behind T
		release(t, ls)
		if n := most.Load(); n > 1 {
			t.Fatalf("round %d: %d holders at once", round, n)
		}
		if n := gone.Load(); n > 0 {
			t.Fatalf("round %d: %d lease(s) granted on a deleted node", round, n)
		}
	}
}

// TestFakeHandoffLeavesNoWatch: whatever way a handoff waiter stops
// waiting, its grant watch does not stay on the server: granted (the
// grant fired it), its predecessor deleted with no grant (it fires the
// watch itself, on its next read), or giving up (it fires it as it
// deletes its node), and the predecessor then handing off to nobody.
func TestFakeHandoffLeavesNoWatch(t *testing.T) {
	f := zkfake.New()
	_, _, ma, mb := fakeMutexes(t, f, "/hw/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	queue := func() <-chan result {
		ch := async(mb.Acquire, ctxT(t))
		eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
		return ch
	}
	noWatch := func(what string) {
		t.Helper()
		eventually(t, func() bool { return len(grantWatches(f)) == 0 }, "no grant watch left after %s", what)
	}

	// Granted.
	ch := queue()
	release(t, la)
	lb := await(t, ch)
	noWatch("a grant")

	// Its predecessor deleted by someone else: lb holds, a waiter of ma
	// queues behind it and is told of lb's deletion, with no grant.
	ch = async(ma.Acquire, ctxT(t))
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
	must(t, f.Delete(lb.Node()))
	l2 := await(t, ch)
	noWatch("a predecessor deleted with no grant")

	// Giving up.
	ctx, cancel := context.WithCancel(context.Background())
	gave := async(mb.Acquire, ctx)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
	cancel()
	if r := <-gave; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled acquire returned %v", r.err)
	}
	noWatch("giving up")
	release(t, l2)
	noWatch("a release with nobody waiting")
}

// TestFakeHandoffTokenReadOnceAsked: once a lease of a lock has been asked
// for its token, that lock's next handed-over lease reads its token before
// it is granted (the fake's notifications carry no zxid, as 3.8's), one
// read of the lock path, so that Token then sends nothing.
func TestFakeHandoffTokenReadOnceAsked(t *testing.T) {
	f := zkfake.New()
	ca, cb, ma, mb := fakeMutexes(t, f, "/ho/lock")
	first, err := mb.Acquire(ctxT(t))
	must(t, err)
	if first.Token() <= 0 {
		t.Fatalf("a lease held at once has token %d", first.Token())
	}
	release(t, first)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	log := logOps(f, connOf(t, f, cb), nil)
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/ho/lock", 2)
	asleep(t, 1)
	heard(t, ca, "/ho/lock")
	at := log.len()
	release(t, la)
	lb := await(t, ch)
	woken := log.since(at)
	if want := []string{"Get /ho/lock"}; fmt.Sprint(woken) != fmt.Sprint(want) {
		t.Fatalf("woken, the waiter made %v; want %v", woken, want)
	}
	at = log.len()
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d, not above its predecessor's %d", lb.Token(), la.Token())
	}
	if sent := log.since(at); len(sent) != 0 {
		t.Fatalf("Token sent %v; its token was read before the grant", sent)
	}
	release(t, lb)
}

// heard makes a read on c's session and returns once it is answered: by
// then c has heard every notification the server sent it before (a
// session's notifications come before its later replies), among them a
// waiter's create behind its lease, without which it releases with a plain
// delete (nobody queued behind it, as far as it knows) and its successor
// takes the slow path.
func heard(t testing.TB, c *zklock.Client, path string) {
	t.Helper()
	m, err := zklock.NewMutex(c, path)
	must(t, err)
	_, err = m.Participants(ctxT(t))
	must(t, err)
}

// asleep waits until n acquires sleep in their wait (participant.sleep):
// a handoff waiter goes to sleep only once its three watches are answered
// (participant.arm), so every request it makes before its grant has been
// made. No test of this file is parallel, so the acquires are this test's.
func asleep(t testing.TB, n int) {
	t.Helper()
	count := func() int { return strings.Count(goroutines(), "zklock.(*participant).sleep(") }
	eventually(t, func() bool { return count() == n }, "want %d acquires asleep, have %d", n, count())
}

// TestFakeHandoffForTokensInADeepQueue: a lock whose tokens are asked for,
// on a Client whose grants come without their zxid, still takes part in
// the handoff where its read of the queue listed deepQueue nodes or more
// (handoff.go, participant.handsOff): its waiter watches its predecessor's
// grant and, granted, reads the path's stat for its token, not the
// queue. The token is above its predecessor's.
func TestFakeHandoffForTokensInADeepQueue(t *testing.T) {
	f := zkfake.New()
	const path = "/hd/lock"
	ca, cb, ma, mb := fakeMutexes(t, f, path)
	// cb learns that grants come without their zxid; mb's tokens are
	// asked for.
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, path, 2)
	asleep(t, 1)
	heard(t, ca, path)
	release(t, la)
	lb := await(t, ch)
	lb.Token()

	// Fillers of a third Client queue behind lb, then mb's waiter behind
	// them: its first look lists deepQueue nodes, no more.
	cf := fakeClient(t, f)
	mf, err := zklock.NewMutex(cf, path)
	must(t, err)
	const fillers = zklock.DeepQueue - 2
	var fill []<-chan result
	for i := 0; i < fillers; i++ {
		fill = append(fill, async(mf.Acquire, ctxT(t)))
		fakeQueued(t, f, path, i+2)
	}
	log := logOps(f, connOf(t, f, cb), nil)
	ch = async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, path, fillers+2)
	asleep(t, fillers+1)
	if !slices.ContainsFunc(log.since(0), func(op string) bool { return strings.HasPrefix(op, "ExistsW "+path+"/_g_") }) {
		t.Fatalf("the waiter of a deep queue made %v; want a watch on its predecessor's grant", log.since(0))
	}
	release(t, lb)
	var last *zklock.Lease
	for i, fc := range fill {
		last = await(t, fc)
		if i < fillers-1 {
			release(t, last)
		}
	}
	heard(t, cf, path)
	at := log.len()
	release(t, last)
	lw := await(t, ch)
	woken := log.since(at)
	if slices.Contains(woken, "ChildrenStat "+path) || !slices.Contains(woken, "Get "+path) {
		t.Fatalf("granted, the waiter made %v; want the path's stat read, and no read of the queue", woken)
	}
	if lw.Token() <= last.Token() {
		t.Fatalf("token %d, not above its predecessor's %d", lw.Token(), last.Token())
	}
	release(t, lw)
}

// TestFakeHandoffTokenReadFails: a handed-over lease whose lock's tokens
// are asked for reads its token before its grant; if that read fails, the
// lease reads it when asked, as if its lock's tokens had never been: a
// token all the same, never none.
func TestFakeHandoffTokenReadFails(t *testing.T) {
	f := zkfake.New()
	ca, cb, ma, mb := fakeMutexes(t, f, "/hf/lock")
	first, err := mb.Acquire(ctxT(t))
	must(t, err)
	first.Token() // the lock's tokens are asked for
	release(t, first)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, cb)
	var failed atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && op.Name == "Get" && op.Paths[0] == "/hf/lock" && failed.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, "/hf/lock", 2)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
	heard(t, ca, "/hf/lock")
	release(t, la)
	lb := await(t, ch)
	if failed.Load() == 0 {
		t.Fatal("the waiter did not read its token before the grant")
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after a failed token read; want above its predecessor's %d", lb.Token(), la.Token())
	}
	release(t, lb)
}

// TestFakeHandoffRewaitKeepsItsWatches: a waiter woken by a change of its
// predecessor's data (a revocation request) that waits on it again sets
// only its watch on the predecessor again: its grant watch and its own
// node's, set in this connection and not fired, still stand; then it
// holds on the predecessor's grant.
func TestFakeHandoffRewaitKeepsItsWatches(t *testing.T) {
	f := zkfake.New()
	ca, cb, ma, mb := fakeMutexes(t, f, "/hr/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	log := logOps(f, connOf(t, f, cb), nil)
	ch := async(mb.Acquire, ctxT(t))
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter watches the grant")
	eventually(t, func() bool { return strings.Count(strings.Join(log.since(0), "\n"), "GetW ") == 2 }, "the waiter watches its predecessor and its own node")
	// Its create, its first look and its three watches; no fire, with
	// nothing armed before.
	if first := log.since(0); len(first) != 5 || strings.Contains(fmt.Sprint(first), "Fire") {
		t.Fatalf("queueing, the waiter made %v; want its create, its look and three watches", first)
	}
	at := log.len()
	must(t, zklock.Revoke(ctxT(t), ca, la.Node()))
	want := []string{"ChildrenStat /hr/lock", "GetW " + la.Node()}
	eventually(t, func() bool { return log.len() >= at+len(want) }, "the waiter reads and watches again")
	time.Sleep(50 * time.Millisecond) // room for any request it should not make
	if got := log.since(at); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("woken by a data change, the waiter made %v; want %v", got, want)
	}
	release(t, handOver(t, ca, "/hr/lock", la, ch, log, 1))
}

// TestFakeHandoffOwnWatchFails: a waiter whose watch on its own node could
// not be set (a connection error) does not sleep without it: it reads and
// sets it again, so that a grant finds it (the grant checks it).
func TestFakeHandoffOwnWatchFails(t *testing.T) {
	f := zkfake.New()
	_, cb, ma, mb := fakeMutexes(t, f, "/hw2/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, cb)
	var ownWatches, failed atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != conn || op.Name != "GetW" || op.Paths[0] == la.Node() {
			return nil
		}
		ownWatches.Add(1)
		if failed.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	ch := async(mb.Acquire, ctxT(t))
	eventually(t, func() bool { return ownWatches.Load() >= 2 }, "the waiter sets its own node's watch again")
	release(t, la)
	release(t, await(t, ch))
}

// TestFakeHandoffGrantWatchFails: a waiter whose watch on its
// predecessor's grant could not be set (a connection error) reads and
// sets it again, and so still holds on the grant, with no read after the
// release.
func TestFakeHandoffGrantWatchFails(t *testing.T) {
	f := zkfake.New()
	ca, cb, ma, mb := fakeMutexes(t, f, "/hg/lock")
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	var failed atomic.Int32
	log := logOps(f, connOf(t, f, cb), func(op zkfake.Op) error {
		if op.Name == "ExistsW" && failed.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	})
	ch := async(mb.Acquire, ctxT(t))
	eventually(t, func() bool { return failed.Load() >= 2 && len(grantWatches(f)) == 1 }, "the waiter sets its grant watch again")
	release(t, handOver(t, ca, "/hg/lock", la, ch, log, 1))
}

// TestFakeUncontendedReleaseIsAPlainDelete: a lease held at once, with
// nobody queued behind it since, is released with a plain delete: no
// grant, which nobody can be waiting for.
func TestFakeUncontendedReleaseIsAPlainDelete(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	m, err := zklock.NewMutex(c, "/hu/lock")
	must(t, err)
	log := logOps(f, connOf(t, f, c), nil)
	for i := 0; i < 3; i++ {
		l, err := m.Acquire(ctxT(t))
		must(t, err)
		at := log.len()
		release(t, l)
		if got, want := log.since(at), []string{"Delete " + l.Node()}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: the release made %v; want %v", i, got, want)
		}
	}
}

// TestFakeHandoffHolderSawItsSuccessor: a lease held at once whose first
// look already listed a waiter behind it (the waiter queued between its
// create and its look) fires its grant as it releases, although nobody
// queued since that look: the waiter holds with no read.
func TestFakeHandoffHolderSawItsSuccessor(t *testing.T) {
	f := zkfake.New()
	ca, cb, ma, mb := fakeMutexes(t, f, "/hs/lock")
	conna, connb := connOf(t, f, ca), connOf(t, f, cb)
	waiterCreated := make(chan struct{})
	var once sync.Once
	var log opLog
	f.SetHooks(zkfake.Hooks{
		Before: func(op zkfake.Op) error {
			switch {
			case op.Conn == conna && op.Name == "ChildrenStatW":
				<-waiterCreated // the holder's look waits for the waiter's create
			case op.Conn == connb && len(op.Paths) > 0 && op.Name != "Check":
				log.add(op)
			}
			return nil
		},
		After: func(op zkfake.Op, err error) error {
			if op.Conn == connb && op.Name == "CreateEach" && err == nil {
				once.Do(func() { close(waiterCreated) })
			}
			return err
		},
	})
	cha := async(ma.Acquire, ctxT(t))
	fakeQueued(t, f, "/hs/lock", 1)
	chb := async(mb.Acquire, ctxT(t))
	la := await(t, cha)
	asleep(t, 1)
	at := log.len()
	release(t, la)
	lb := await(t, chb)
	if got := log.since(at); len(got) != 0 {
		t.Fatalf("handed over, the waiter made %v; want nothing", got)
	}
	release(t, lb)
}

// logOps logs the operations (but Checks) of conn's session on f, and
// runs extra, if set, on each before it goes.
func logOps(f *zkfake.Server, conn *zkfake.Conn, extra func(zkfake.Op) error) *opLog {
	var log opLog
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != conn || len(op.Paths) == 0 || op.Name == "Check" {
			return nil
		}
		log.add(op)
		if extra != nil {
			return extra(op)
		}
		return nil
	}})
	return &log
}

// handOver releases la, held through ca on path, once sleepers acquires
// (the waiter among them) sleep with their watches set and ca has heard
// of the waiter behind it, and returns the waiter's lease (from ch),
// failing if the waiter made any request after the release: it held on
// the grant.
func handOver(t *testing.T, ca *zklock.Client, path string, la *zklock.Lease, ch <-chan result, log *opLog, sleepers int) *zklock.Lease {
	t.Helper()
	asleep(t, sleepers)
	heard(t, ca, path)
	at := log.len()
	release(t, la)
	lb := await(t, ch)
	if got := log.since(at); len(got) != 0 {
		t.Fatalf("handed over, the waiter made %v; want nothing", got)
	}
	return lb
}

// TestFakeHandoffFireFails: a waiter whose predecessor went with no grant
// fires its grant watch before it arms another; if that fire fails (twice
// here: on its read, and again before arming), it reads again rather than
// forget the watch, so that none is left on its predecessor's grant.
func TestFakeHandoffFireFails(t *testing.T) {
	f := zkfake.New()
	path := "/hx/lock"
	ca, cb, ma, mb := fakeMutexes(t, f, path)
	mx, err := zklock.NewMutex(fakeClient(t, f), path)
	must(t, err)
	lh, err := ma.Acquire(ctxT(t))
	must(t, err)
	_ = async(mx.Acquire, ctxT(t)) // X, between the holder and the waiter
	fakeQueued(t, f, path, 2)
	var fires atomic.Int32
	log := logOps(f, connOf(t, f, cb), func(op zkfake.Op) error {
		if op.Name == "Fire" && fires.Add(1) <= 2 {
			return zk.ErrConnectionClosed
		}
		return nil
	})
	ch := async(mb.Acquire, ctxT(t))
	fakeQueued(t, f, path, 3)
	eventually(t, func() bool { return len(grantWatches(f)) == 2 }, "X and the waiter watch their grants")
	kids := f.Children(path)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	x := path + "/" + kids[1]
	gx := path + "/" + "_g_" + x[len(x)-10:] + "_"
	must(t, f.Delete(x)) // X goes with no grant: the waiter now waits on the holder
	eventually(t, func() bool { return fires.Load() >= 3 }, "the waiter fires X's grant watch at last")
	eventually(t, func() bool { return !slices.Contains(grantWatches(f), gx) }, "no watch left on X's grant")
	release(t, handOver(t, ca, path, lh, ch, log, 2)) // X queued again, behind the waiter
}

// TestFakeHandoffGiveUpAfterLostCreateReply: a waiter whose create's
// reply was lost (applied, its connection dropped) finds its node by its
// protected id, waits on the holder's grant and gives up. Its node goes
// only after its grant watch heard the fire, as any give-up's: the cleanup
// by id of what else the create may have left spares it. Deleted first, as
// it once was, it left the watch for the session's life
// (TestGiveUpAfterLostCreateReplyLeavesNoWatch in tests/ is the same on a
// real ZooKeeper).
func TestFakeHandoffGiveUpAfterLostCreateReply(t *testing.T) {
	f := zkfake.New()
	path := "/hc/lock"
	_, cb, ma, mb := fakeMutexes(t, f, path)
	la, err := ma.Acquire(ctxT(t))
	must(t, err)
	conn := connOf(t, f, cb)
	var cut atomic.Bool
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == conn && op.Name == "CreateEach" && err == nil && cut.CompareAndSwap(false, true) {
			conn.Disconnect() // the reply is lost with its connection
			conn.Reconnect()
			return zk.ErrConnectionClosed
		}
		return err
	}})
	ctx, cancel := context.WithCancel(ctxT(t))
	gave := async(mb.Acquire, ctx)
	eventually(t, func() bool { return len(grantWatches(f)) == 1 }, "the waiter found its node and watches the grant")
	if !cut.Load() {
		t.Fatal("the waiter's create was never cut off")
	}
	cancel()
	mustIs(t, (<-gave).err, context.Canceled)
	fakeQueued(t, f, path, 1)
	if w := grantWatches(f); len(w) != 0 {
		t.Fatalf("the waiter's node is gone and its grant watch stays: %v", w)
	}
	release(t, la)
}

// TestFakeHandoffGiveUpBeforeTheWatchesAreSetAgain: a handoff waiter that
// gives up while disconnected, whose fires of its grant go out on the new
// connection before go-zookeeper's setWatches (a late one, as the fake
// plays it), deletes its node only once its grant watch has heard a fire:
// a node deleted before it would leave the watch, set again by the late
// setWatches on the missing grant, for the session's life, with nobody
// allowed to fire it (internal/session/janitor.go, janitor.fire). The late
// setWatches comes after the third fire of the grant (the give-up's own,
// the janitor's at once, its goroutine's first), whatever sent them. The
// janitor's retries meanwhile are no failure: logged at Debug.
func TestFakeHandoffGiveUpBeforeTheWatchesAreSetAgain(t *testing.T) {
	g := newGiveUp(t, "/hl/lock")
	fires := g.setWatchesAfter(3)
	g.connB.Disconnect()
	g.cancel()
	g.connB.LateWatches()
	g.connB.Reconnect()
	g.ended(t, context.Canceled, fires)
	g.heardIt(t)
	if got := g.h.levelsOf(cleanupRetries); len(got) == 0 || slices.ContainsFunc(got, func(l string) bool { return l != "DEBUG" }) {
		t.Fatalf("the janitor's retries for a fire not heard were logged at %v, want Debug (at least one)", got)
	}
}

// TestFakeHandoffGiveUpInASwappedSession: the same, when the reconnect
// brings another session (a server that swaps sessions): go-zookeeper sets
// the watches again in the new session, late, and the waiter, whose wait
// the swap ends, still fires its grant, from the new session (the fire
// checks its node, which the old session still owns), before its node is
// deleted.
func TestFakeHandoffGiveUpInASwappedSession(t *testing.T) {
	g := newGiveUp(t, "/hs/lock")
	fires := g.setWatchesAfter(2)
	g.connB.Disconnect()
	g.connB.LateWatches()
	g.connB.ReconnectSwapped()
	g.ended(t, zklock.ErrSessionReplaced, fires)
	g.heardIt(t)
}

// TestFakeHandoffGiveUpWithTheWatchesLost: a give-up whose watches the
// reconnect lost for good (a setWatches the server refused, which
// go-zookeeper only logs) never hears its fire; its node is deleted all the
// same after a few fires, with a Warn, rather than kept, which would hold up
// every waiter behind it for the session's life.
func TestFakeHandoffGiveUpWithTheWatchesLost(t *testing.T) {
	g := newGiveUp(t, "/hn/lock")
	g.connB.Disconnect()
	g.cancel()
	g.connB.LoseWatches()
	g.connB.Reconnect()
	g.ended(t, context.Canceled, nil)
	if got := g.h.levelsOf(neverHeard); fmt.Sprint(got) != "[WARN]" {
		t.Fatalf("the node deleted unheard was logged %v, want once at Warn", got)
	}
}

// TestFakeHandoffGiveUpUnheardFiresBounded: with the watches lost for
// good, a give-up's node goes after maxUnheard (8) of the janitor's fires
// went through unheard, on the fire after them: not sooner (the setWatches
// may be on its way, and a node deleted before it sets the watch again
// leaves the watch for the session's life) and not later (every waiter
// behind the node waits for it). The fires, 10 in all: the give-up's own
// (queued while the connection was down), the janitor's at once (the
// first unheard), 7 more unheard from its goroutine, each retried at
// Debug, and the one after which it deletes the node, with a Warn.
func TestFakeHandoffGiveUpUnheardFiresBounded(t *testing.T) {
	g := newGiveUp(t, "/hu/lock")
	var fires atomic.Int32
	g.f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == g.connB && op.Name == "Fire" && err == nil && slices.Contains(op.Paths, g.grant) {
			fires.Add(1)
		}
		return err
	}})
	g.connB.Disconnect()
	g.cancel()
	g.connB.LoseWatches()
	g.connB.Reconnect()
	if r := <-g.gave; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the waiter's acquire returned %v, want %v", r.err, context.Canceled)
	}
	fakeQueued(t, g.f, g.path, 1)
	if got := g.h.levelsOf(neverHeard); fmt.Sprint(got) != "[WARN]" {
		t.Fatalf("the node deleted unheard was logged %v, want once at Warn", got)
	}
	if got := g.h.levelsOf(cleanupRetries); len(got) != 7 || slices.ContainsFunc(got, func(l string) bool { return l != "DEBUG" }) {
		t.Fatalf("the janitor's retries were logged %v, want 7 at Debug", got)
	}
	if n := fires.Load(); n != 10 {
		t.Fatalf("the grant was fired %d times, want 10", n)
	}
}

// TestFakeHandoffGiveUpFireFails: a give-up whose fires of its grant fail
// (a dropped connection) keeps its node, and fires again, until one goes
// through: a node deleted with its grant watch still set would leave the
// watch for the session's life. Those retries are logged at Warn.
func TestFakeHandoffGiveUpFireFails(t *testing.T) {
	g := newGiveUp(t, "/hf/lock")
	var failed atomic.Int32
	g.f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		// The give-up's own, the janitor's at once, and its goroutine's first.
		if op.Conn == g.connB && op.Name == "Fire" && failed.Add(1) <= 3 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	g.cancel()
	g.ended(t, context.Canceled, &failed)
	g.heardIt(t)
	if got := g.h.levelsOf(cleanupRetries); !slices.Contains(got, "WARN") {
		t.Fatalf("the janitor's retry after a failed fire was logged at %v, want Warn", got)
	}
}

// TestFakeHandoffGiveUpFireRefused: a give-up whose fire the server
// refuses for good (here no right to create the grant) deletes its node all
// the same, as any other: waiting would keep the lock from everyone
// behind it, for a watch that cannot be fired anyway.
func TestFakeHandoffGiveUpFireRefused(t *testing.T) {
	g := newGiveUp(t, "/hr/lock")
	g.f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == g.connB && op.Name == "Fire" {
			return zk.ErrNoAuth
		}
		return nil
	}})
	g.cancel()
	if r := <-g.gave; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled acquire returned %v", r.err)
	}
	fakeQueued(t, g.f, g.path, 1)
}

// TestFakeHandoffDeletedWaiterLogsItsWatch: a waiter whose node someone
// else deletes queues again, and says once, at Info, that its watch on the
// predecessor's grant stays (it may no longer fire it).
func TestFakeHandoffDeletedWaiterLogsItsWatch(t *testing.T) {
	g := newGiveUp(t, "/hd2/lock")
	for _, k := range g.f.Children(g.path) {
		if n := g.path + "/" + k; n != g.la.Node() {
			must(t, g.f.Delete(n))
		}
	}
	msg := "zklock: a waiting node was deleted by someone else; its watch on the predecessor's grant stays until that grant or the session's end"
	eventually(t, func() bool { return len(g.h.levelsOf(msg)) > 0 }, "the waiter logs the watch it leaves")
	fakeQueued(t, g.f, g.path, 2) // queued again
	if got := g.h.levelsOf(msg); fmt.Sprint(got) != "[INFO]" {
		t.Fatalf("logged %v, want once at Info", got)
	}
	g.cancel()
	<-g.gave
}

// neverHeard is the janitor's Warn for a node deleted though its grant
// watch never heard a fire: the give-up tests where the watch does hear
// one must not log it (the janitor follows the waiter's own watch).
const neverHeard = "zklock: the grant watch of an abandoned wait never heard its fire; its node is deleted, and the watch may stay until the session ends"

// cleanupRetries is the janitor's record of a job it will try again.
const cleanupRetries = "zklock: cleanup will retry"

// giveUp is the give-up tests' queue: la holds path, and a handoff waiter
// of another Client (connB, logging to h, retrying at once: the janitor's
// tries are counted, not timed) waits on it, watching its grant, until
// cancel ends its acquire (gave).
type giveUp struct {
	f      *zkfake.Server
	h      records
	path   string
	la     *zklock.Lease
	gave   <-chan result
	cancel context.CancelFunc
	connB  *zkfake.Conn
	grant  string
}

func newGiveUp(t *testing.T, path string) *giveUp {
	t.Helper()
	g := &giveUp{f: zkfake.New(), path: path}
	ca := fakeClient(t, g.f)
	cb := fakeClient(t, g.f, zklock.WithLogger(slog.New(&g.h)),
		zklock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	ma, err := zklock.NewMutex(ca, path)
	must(t, err)
	mb, err := zklock.NewMutex(cb, path)
	must(t, err)
	g.la, err = ma.Acquire(ctxT(t))
	must(t, err)
	var ctx context.Context
	ctx, g.cancel = context.WithCancel(ctxT(t))
	g.gave = async(mb.Acquire, ctx)
	eventually(t, func() bool { return len(grantWatches(g.f)) == 1 }, "the waiter watches the grant")
	g.grant, g.connB = grantWatches(g.f)[0], connOf(t, g.f, cb)
	t.Cleanup(func() { release(t, g.la) })
	return g
}

// setWatchesAfter has the late setWatches come right after the n-th fire
// of the grant (a Fire or a HandOff naming it); the count is returned.
func (g *giveUp) setWatchesAfter(n int32) *atomic.Int32 {
	var fires atomic.Int32
	g.f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == g.connB && (op.Name == "Fire" || op.Name == "HandOff") && slices.Contains(op.Paths, g.grant) && fires.Add(1) == n {
			g.connB.SetWatches()
		}
		return err
	}})
	return &fires
}

// heardIt checks that the node went once its grant watch heard a fire,
// not after the janitor gave up hearing one.
func (g *giveUp) heardIt(t *testing.T) {
	t.Helper()
	if got := g.h.levelsOf(neverHeard); len(got) != 0 {
		t.Fatalf("the node was deleted unheard (%v): the janitor did not follow the waiter's watch", got)
	}
}

// ended checks that the waiter's acquire ended with want, and that once its
// node is gone (and any late setWatches has come) no grant watch is left;
// fires, if any, counts the grant's fires, for the message.
func (g *giveUp) ended(t *testing.T, want error, fires *atomic.Int32) {
	t.Helper()
	if r := <-g.gave; !errors.Is(r.err, want) {
		t.Fatalf("the waiter's acquire returned %v, want %v", r.err, want)
	}
	fakeQueued(t, g.f, g.path, 1)
	g.connB.SetWatches() // if the fires it waited for never came
	if w := grantWatches(g.f); len(w) != 0 {
		n := int32(-1)
		if fires != nil {
			n = fires.Load()
		}
		t.Fatalf("the waiter's node is gone and its grant watch stays: %v (fires: %d)", w, n)
	}
}
