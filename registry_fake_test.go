package zklock_test

// The semaphore's registry (registry.go) on the fake: the counterexamples
// that model/registry.pml finds for its broken variants, as schedules,
// each of which a waiter gets through only if the rule it breaks holds.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeRegistryUnchainedHolderChainsNobody: a semaphore of 2, A and B
// hold (neither registered: nobody was behind them), C waits first and D
// waits for C's hold, watching C's node and C's entry r(C). A goes: C
// holds, but B, ahead of it, has no entry, so C registers unchained, u(C).
// D, told C holds, reads the queue, finds B unregistered ahead, and waits
// for B or C to go, although the registry lists one entry ahead of it.
//
//   - Had C registered as r(C) (registry-reg-all-unclean-as-clean), D would
//     be chained by it, count one entry ahead of it, and hold beside B and
//     C: three leases of a semaphore of 2.
//   - Had D's read chained it because its predecessor C has an entry
//     (registry-reg-all-chain-by-pred), its next wake, C's node revoked,
//     would decide from the registry, and hold the same way.
//
// So D watches B (a read of the queue decided) after C's registration and
// again after the revocation, and holds only once B goes.
func TestFakeRegistryUnchainedHolderChainsNobody(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/ru", 2, 2, 2, 2)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	lb, err := s[1].Acquire(ctxT(t))
	must(t, err)
	if got := f.Children("/ru/_holders"); len(got) != 0 {
		t.Fatalf("registry %v: a holder with nobody behind it registered", got)
	}
	watched := hookWatches(f)
	had := f.Children("/ru")
	rc := async(s[2].Acquire, ctxT(t))
	nodeC := fakeNewNode(t, f, "/ru", had)
	had = f.Children("/ru")
	rd := async(s[3].Acquire, ctxT(t))
	fakeNewNode(t, f, "/ru", had)
	awaitWatch(t, watched, cs[3], nodeC) // D awaits C's hold

	release(t, la) // [B C D]: C holds, unchained
	lc := await(t, rc)
	if got := f.Children("/ru/_holders"); len(got) != 1 || got[0][0] != 'u' {
		t.Fatalf("registry %v once C holds behind B, which has no entry; want C's unchained entry alone", got)
	}
	// D decided on the queue: it waits for B and C, watching both (in
	// that order) before the revocation below, which it would otherwise
	// not hear: a watch set after a write reads what it wrote.
	awaitWatch(t, watched, cs[3], lb.Node())
	awaitWatch(t, watched, cs[3], nodeC)
	pending(t, rd)

	must(t, zklock.Revoke(ctxT(t), cs[1], lc.Node())) // D wakes, and must read the queue again
	awaitWatch(t, watched, cs[3], lb.Node())
	pending(t, rd)

	release(t, lb) // [C D]: D holds
	ld := await(t, rd)
	release(t, lc)
	release(t, ld)
	fakeQueued(t, f, "/ru", 0)
}

// TestFakeRegistryChainedDrain: a semaphore of 2 drained by waiters that
// queued behind two holders. After the first round of holders every waiter
// is chained: it decides from the registry and never reads the queue
// after its first look, and at most two hold at once.
func TestFakeRegistryChainedDrain(t *testing.T) {
	f := zkfake.New()
	const n = 8
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 2
	}
	cs, s := fakeSems(t, f, "/rd", sizes...)
	held := []*zklock.Lease{}
	for _, sem := range s[:2] {
		l, err := sem.Acquire(ctxT(t))
		must(t, err)
		held = append(held, l)
	}
	watched := make(chan watch, 1024)
	var counting atomic.Bool
	var reads atomic.Int32
	report := reportWatches(watched)
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if counting.Load() && op.Name == "ChildrenStat" && op.Paths[0] == "/rd" {
			reads.Add(1)
		}
		return report(op, err)
	}})
	var rs []<-chan result
	for i := 2; i < n; i++ {
		had := f.Children("/rd")
		rs = append(rs, async(s[i].Acquire, ctxT(t)))
		node := fakeNewNode(t, f, "/rd", had)
		// Its first look is made once it watches the node ahead of it.
		awaitWatch(t, watched, cs[i], aheadOf(f, "/rd", node))
	}
	counting.Store(true)
	for i, r := range rs {
		gone := held[0].Token() // read while held (a chained grant's is read when first asked)
		release(t, held[0])     // the oldest holder goes
		l := await(t, r)
		held = append(held[1:], l)
		if got := len(queuedOn(f.Children("/rd"))); got != n-i-1 {
			t.Fatalf("%d nodes queued after %d handoffs, want %d", got, i+1, n-i-1)
		}
		// The lease that took the slot of the one that went has a larger
		// token (docs/design.md, "Tokens").
		if tok := l.Token(); tok <= gone {
			t.Fatalf("handoff %d: token %d after the released lease's %d", i+1, tok, gone)
		}
	}
	for _, l := range held {
		release(t, l)
	}
	fakeQueued(t, f, "/rd", 0)
	// The first waiter reads the queue once, as it holds behind B, which
	// has no entry (it registers unchained); the second twice, as the first
	// holds (B still unregistered ahead) and as B goes (then chained: every
	// node ahead has an entry). Every later one is chained by the entry of
	// the one ahead of it, and reads only the registry.
	if got := reads.Load(); got > 3 {
		t.Fatalf("the waiters read the queue %d times after their first looks; want at most 3", got)
	}
}

// aheadOf is the child of path on f just ahead of node.
func aheadOf(f *zkfake.Server, path, node string) string {
	prev := ""
	for _, k := range sortedQueue(queuedOn(f.Children(path))) {
		if path+"/"+k == node {
			return path + "/" + prev
		}
		prev = k
	}
	return ""
}

// sortedQueue orders zklock node names by their sequence suffix.
func sortedQueue(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return out
}

// TestFakeRegistryIsNoParticipant: with the registry beside a semaphore's
// nodes (a holder that waited registered), Participants lists the nodes
// alone, and FindLocks finds the path once and does not read the
// registry.
func TestFakeRegistryIsNoParticipant(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/fl/sem", 1, 1, 1)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/fl/sem", 2)
	release(t, la)
	lb := await(t, rb) // it waited: it registers
	rc := async(s[2].Acquire, ctxT(t))
	fakeQueued(t, f, "/fl/sem", 2)
	if len(f.Children("/fl/sem/_holders")) != 1 {
		t.Fatalf("registry %v, want B's entry", f.Children("/fl/sem/_holders"))
	}
	ps, err := s[2].Participants(ctxT(t))
	must(t, err)
	if len(ps) != 2 || ps[0].Node != lb.Node() || !ps[0].Holder || ps[1].Holder {
		t.Fatalf("participants %+v, want B holding and C waiting", ps)
	}
	var registryReads atomic.Int32
	conn := connOf(t, f, cs[0])
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == conn && strings.HasPrefix(op.Paths[0], "/fl/sem/_holders") {
			registryReads.Add(1)
		}
		return nil
	}})
	found, complete, err := zklock.FindLocks(ctxT(t), cs[0], "/fl", zklock.FindLimit{})
	must(t, err)
	if len(found) != 1 || found[0].Path != "/fl/sem" || len(found[0].Participants) != 2 || !complete {
		t.Fatalf("FindLocks found %+v (complete %v), want /fl/sem with its two participants", found, complete)
	}
	if n := registryReads.Load(); n != 0 {
		t.Fatalf("FindLocks read the registry %d times", n)
	}
	release(t, lb)
	release(t, await(t, rc))
	fakeQueued(t, f, "/fl/sem", 0)
}

// TestFakeRegistryFirstLookChains: a first look that lists nothing ahead
// chains its participant, which, holding with a node behind it, registers
// chained: its entry is r, which the waiter behind it would be chained by.
func TestFakeRegistryFirstLookChains(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/fc", 1, 1)
	connA := connOf(t, f, cs[0])
	behind := make(chan struct{})
	var once atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == connA && strings.HasPrefix(op.Name, "ChildrenStat") && op.Paths[0] == "/fc" && once.CompareAndSwap(false, true) {
			<-behind // A's first look waits for B's node
		}
		return nil
	}})
	ra := async(s[0].Acquire, ctxT(t))
	fakeQueued(t, f, "/fc", 1)
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/fc", 2)
	close(behind)
	la := await(t, ra)
	if got := f.Children("/fc/_holders"); len(got) != 1 || got[0][0] != 'r' {
		t.Fatalf("registry %v; want A's chained entry (nothing was ahead of it, B behind)", got)
	}
	release(t, la)
	release(t, await(t, rb))
	fakeQueued(t, f, "/fc", 0)
}

// TestFakeRegistryMarkerMadeAgain: a participant whose first look lists a
// larger size ahead makes its marker before it decides; a try lost with
// the connection (unapplied) is made again on the next read, so the
// smaller size does take effect for chained waiters (semantics.md,
// "Resizing a semaphore"). The marker goes with its node.
func TestFakeRegistryMarkerMadeAgain(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/mk", 3, 2)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	connB := connOf(t, f, cs[1])
	var tries atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == connB && op.Name == "CreateEphemeralIf" && strings.HasPrefix(op.Paths[1], "/mk/_holders/z_") && tries.Add(1) == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	lb, err := s[1].Acquire(ctxT(t)) // within both sizes: it holds
	must(t, err)
	if got := f.Children("/mk/_holders"); len(got) != 1 || got[0][0] != 'z' || tries.Load() < 2 {
		t.Fatalf("registry %v after %d tries; want B's marker, made again after the first failed", got, tries.Load())
	}
	release(t, lb)
	if got := f.Children("/mk/_holders"); len(got) != 0 {
		t.Fatalf("registry %v once B released; want its marker gone with its node", got)
	}
	release(t, la)
	fakeQueued(t, f, "/mk", 0)
}

// TestFakeRegistryRegisterAfterARevocation: a holder's registration finds
// its node written since its create (a revocation): the multi, refused
// for the version, is made again on the version read, with the data read,
// so the entry is made and what the revoker wrote stays.
func TestFakeRegistryRegisterAfterARevocation(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/rr", 1, 1)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/rr", 2)
	connB := connOf(t, f, cs[1])
	var revoked atomic.Bool
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == connB && op.Name == "Register" && revoked.CompareAndSwap(false, true) {
			must(t, zklock.Revoke(ctxT(t), cs[0], op.Paths[0]))
		}
		return nil
	}})
	release(t, la)
	lb := await(t, rb)
	if !revoked.Load() {
		t.Fatal("B never registered")
	}
	if got := f.Children("/rr/_holders"); len(got) != 1 {
		t.Fatalf("registry %v; want B's entry, made on the version the revocation left", got)
	}
	data, _, err := connB.Get(lb.Node())
	must(t, err)
	if string(data) != "__REVOKE__" {
		t.Fatalf("B's node says %q after its registration; want the revocation kept", data)
	}
	release(t, lb)
	fakeQueued(t, f, "/rr", 0)
}

// TestFakeRegistryIgnoresStrays: a child of the registry that is no entry
// or marker of any zklock (written by hand, or by a later version) counts
// for nothing: the chained waiter behind a registered holder takes its
// turn.
func TestFakeRegistryIgnoresStrays(t *testing.T) {
	f := zkfake.New()
	_, s := fakeSems(t, f, "/st", 1, 1, 1)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	must(t, f.Create("/st/_holders", nil))
	must(t, f.Create("/st/_holders/stray", nil))
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/st", 2)
	rc := async(s[2].Acquire, ctxT(t))
	fakeQueued(t, f, "/st", 3)
	release(t, la)
	lb := await(t, rb) // it registers; C, behind it, is chained
	pending(t, rc)
	release(t, lb)
	lc := await(t, rc)
	release(t, lc)
	must(t, f.Delete("/st/_holders/stray"))
	fakeQueued(t, f, "/st", 0)
}

// entryWatches lists the watches the live sessions of f keep on registry
// entries (r_...) under path.
func entryWatches(f *zkfake.Server, path string) []string {
	var out []string
	for _, p := range f.Watched() {
		if strings.HasPrefix(p, path+"/_holders/r_") {
			out = append(out, p)
		}
	}
	return out
}

// TestFakeRegistryEntryWatchMovesOnceHeard: a waiter whose predecessor
// changes fires its watch on the old predecessor's entry before it arms
// the new one, and moves on only once the watch heard the fire. After a
// reconnect whose setWatches comes late (go-zookeeper sends it from a
// goroutine of its own), the first fire goes through unheard: the watch
// was not on the server yet, and the late setWatches sets it again on the
// missing entry. A waiter that moved on then would leave it for the
// session's life: nobody else may make that entry.
func TestFakeRegistryEntryWatchMovesOnceHeard(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/rw", 1, 1, 1, 1)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/rw", 2)
	ctxC, cancelC := context.WithCancel(ctxT(t))
	defer cancelC()
	rc := async(s[2].Acquire, ctxC)
	fakeQueued(t, f, "/rw", 3)
	rd := async(s[3].Acquire, ctxT(t))
	fakeQueued(t, f, "/rw", 4)
	eventually(t, func() bool { return len(entryWatches(f, "/rw")) == 2 }, "C and D watch the entries of B and C: %v", entryWatches(f, "/rw"))
	connD := connOf(t, f, cs[3])
	var fires atomic.Int32
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if op.Conn == connD && op.Name == "Fire" && err == nil && fires.Add(1) == 1 {
			connD.SetWatches() // the late setWatches, right after the first fire
		}
		return err
	}})
	connD.Disconnect()
	cancelC() // [A B D]: D's predecessor is B now
	mustIs(t, returned(t, rc).err, context.Canceled, "C's acquire")
	fakeQueued(t, f, "/rw", 3)
	connD.LateWatches()
	connD.Reconnect()
	eventually(t, func() bool { return fires.Load() >= 2 }, "D did not fire C's entry again once its first fire went unheard")
	release(t, la)
	lb := await(t, rb)
	pending(t, rd)
	release(t, lb)
	release(t, await(t, rd))
	fakeQueued(t, f, "/rw", 0)
	if w := entryWatches(f, "/rw"); len(w) != 0 {
		t.Fatalf("entry watches left: %v", w)
	}
}

// TestFakeRegistryTokensOnceAsked: once a lease of a semaphore has been
// asked for its token, its waiters granted from the registry read theirs
// as they are granted (participant.surveyRegistry), so a lease released
// before anyone asks still has its token (where it would have 0 had it
// waited to be asked: Lease.Token), above that of the lease whose slot it
// took. A failed read of that token is made again.
func TestFakeRegistryTokensOnceAsked(t *testing.T) {
	f := zkfake.New()
	const path, waiters = "/rt", 6
	s, err := zklock.NewSemaphore(fakeClient(t, f), path, 2)
	must(t, err)
	held := make([]*zklock.Lease, 2)
	for i := range held {
		held[i], err = s.Acquire(ctxT(t))
		must(t, err)
	}
	held[0].Token() // the lock's tokens are asked for
	// Every other read of the path's stat (a chained grant's token) fails,
	// unapplied: the decision is made again, never granted without it.
	var gets atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Get" && op.Paths[0] == path && gets.Add(1)%2 == 1 {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	var rs []<-chan result
	for i := 0; i < waiters; i++ {
		had := f.Children(path)
		rs = append(rs, async(s.Acquire, ctxT(t)))
		fakeNewNode(t, f, path, had)
	}
	// A lease's token must be above the token of the one whose release
	// let it hold (after[l]), and is read only once the lease has ended.
	after := map[*zklock.Lease]int64{}
	check := func(l *zklock.Lease) int64 {
		tok := l.Token()
		if tok <= after[l] {
			t.Fatalf("a lease released before it was asked has the token %d; want one above %d", tok, after[l])
		}
		return tok
	}
	results := mergeResults(rs)
	for range rs {
		gone := held[0]
		release(t, gone)
		tok := check(gone)
		var l *zklock.Lease
		select {
		case r := <-results:
			must(t, r.err)
			l = r.lease
		case <-ctxT(t).Done():
			t.Fatal("no waiter holds after a release")
		}
		after[l] = tok
		held = append(held[1:], l)
	}
	for _, l := range held {
		release(t, l)
		check(l)
	}
	fakeQueued(t, f, path, 0)
	if gets.Load() == 0 {
		t.Fatal("no grant read its token from the path's stat: none was granted from the registry")
	}
}

// mergeResults is one channel of the results of rs, each read once.
func mergeResults(rs []<-chan result) <-chan result {
	out := make(chan result, len(rs))
	for _, r := range rs {
		go func(r <-chan result) {
			if res, ok := <-r; ok {
				out <- res
			}
		}(r)
	}
	return out
}

// TestFakeRegistryReadFailsDecidesNothing: a chained waiter whose read of
// the registry fails decides nothing on it (an unread registry lists no
// holder ahead) and reads it again: with a semaphore of 1, C, chained
// behind B's entry and watching the registry, wakes as the registry
// changes, its read fails, and it still waits for B.
func TestFakeRegistryReadFailsDecidesNothing(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/rf", 1, 1, 1)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	rb := async(s[1].Acquire, ctxT(t))
	fakeQueued(t, f, "/rf", 2)
	rc := async(s[2].Acquire, ctxT(t))
	fakeQueued(t, f, "/rf", 3)
	connC := connOf(t, f, cs[2])
	var fail atomic.Bool
	var reads atomic.Int32
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn != connC || op.Name != "ChildrenW" || op.Paths[0] != "/rf/_holders" {
			return nil
		}
		reads.Add(1)
		if fail.CompareAndSwap(true, false) {
			return zk.ErrConnectionClosed
		}
		return nil
	}})
	release(t, la)
	lb := await(t, rb) // it registers; C, behind it, is chained
	eventually(t, func() bool { return reads.Load() >= 1 }, "C, chained, reads the registry and waits on it")
	asleep(t, 1)
	base := reads.Load()
	fail.Store(true)
	must(t, f.Create("/rf/_holders/stray", nil)) // C wakes, and its read fails
	eventually(t, func() bool { return reads.Load() >= base+2 }, "C reads the registry again")
	asleep(t, 1)
	pending(t, rc)
	release(t, lb)
	lc := await(t, rc)
	release(t, lc)
	must(t, f.Delete("/rf/_holders/stray"))
	fakeQueued(t, f, "/rf", 0)
}

// TestFakeRegistryMarkerCostsOneRequest: where the registry exists, a
// marker is one create; the registry is made (and the create sent again)
// only when the create finds it missing.
func TestFakeRegistryMarkerCostsOneRequest(t *testing.T) {
	f := zkfake.New()
	cs, s := fakeSems(t, f, "/m1", 3, 2)
	la, err := s[0].Acquire(ctxT(t))
	must(t, err)
	must(t, f.Create("/m1/_holders", nil))
	connB := connOf(t, f, cs[1])
	var ops []string
	var mu sync.Mutex
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Conn == connB && strings.HasPrefix(op.Paths[len(op.Paths)-1], "/m1/_holders") {
			mu.Lock()
			ops = append(ops, op.Name+" "+op.Paths[len(op.Paths)-1])
			mu.Unlock()
		}
		return nil
	}})
	lb, err := s[1].Acquire(ctxT(t)) // within both sizes: it holds, with its marker
	must(t, err)
	mu.Lock()
	got := slices.Clone(ops)
	mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "CreateEphemeralIf /m1/_holders/z_") {
		t.Fatalf("B's marker cost %v; want one create", got)
	}
	release(t, lb)
	release(t, la)
	must(t, f.Delete("/m1/_holders"))
	fakeQueued(t, f, "/m1", 0)
}
