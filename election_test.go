package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/zkrecipes/zklock"
)

func newElection(t testing.TB, c *zklock.Client, path, id string) *zklock.Election {
	t.Helper()
	e, err := zklock.NewElection(c, path, zklock.WithNodeData([]byte(id)))
	must(t, err, "new election")
	return e
}

// next waits for the observer's next report.
func next(t testing.TB, obs <-chan zklock.Participant) zklock.Participant {
	t.Helper()
	select {
	case p, ok := <-obs:
		if !ok {
			t.Fatal("the observer's channel closed")
		}
		return p
	case <-time.After(long):
		t.Fatal("no report from the observer")
		return zklock.Participant{}
	}
}

// Candidates lead one at a time, in the order they campaigned; Leader and
// the tokens follow the handovers, and a resigned election has no leader.
func TestElectionHandoverInQueueOrder(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	const n = 4
	var (
		elections [n]*zklock.Election
		campaigns [n]<-chan result
	)
	for i := range elections {
		elections[i] = newElection(t, connect(t), path, fmt.Sprintf("candidate-%d", i))
		campaigns[i] = async(elections[i].Campaign, ctxT(t))
		queued(t, c, path, i+1) // campaign in this order
	}
	var prev *zklock.Lease
	for i := range elections {
		lease := await(t, campaigns[i])
		for j := i + 1; j < n; j++ {
			pending(t, campaigns[j]) // nobody behind leads while i does
		}
		if prev != nil && !closed(prev.Done()) {
			t.Fatalf("candidate %d leads while candidate %d's lease is live", i, i-1)
		}
		if prev != nil && lease.Token() <= prev.Token() {
			t.Fatalf("tokens must increase from leader to leader: %d after %d", lease.Token(), prev.Token())
		}
		// Every candidate, whatever its own place, sees the same leader.
		for j, e := range elections {
			l, err := e.Leader(ctxT(t))
			must(t, err, "Leader, asked by candidate %d", j)
			if l.Node != lease.Node() || string(l.Data) != fmt.Sprintf("candidate-%d", i) || !l.Holder || l.Kind != zklock.KindLatch {
				t.Fatalf("Leader = %+v, want candidate-%d at %s", l, i, lease.Node())
			}
		}
		parts, err := elections[0].Participants(ctxT(t))
		must(t, err)
		if len(parts) != n-i || parts[0].Node != lease.Node() || !parts[0].Holder {
			t.Fatalf("participants %+v: want %d, led by %s", parts, n-i, lease.Node())
		}
		release(t, lease)
		prev = lease
	}
	_, err := elections[0].Leader(ctxT(t))
	mustIs(t, err, zklock.ErrNoLeader, "Leader once everyone resigned")
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// Curator's LeaderLatch writes `_c_<uuid>-latch-<seq>` holding the
// participant's id; so does Election, so that they elect together.
func TestElectionNodeFormat(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	lease, err := newElection(t, c, path, "replica-7").Campaign(ctxT(t))
	must(t, err)
	defer release(t, lease)
	re := regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-[0-9]{10}$`)
	if name := lease.Node()[len(path)+1:]; !re.MatchString(name) {
		t.Fatalf("node %q is not in LeaderLatch's format", name)
	}
	data, _, err := c.Conn().Get(lease.Node())
	must(t, err)
	if string(data) != "replica-7" {
		t.Fatalf("node data %q, want the identity", data)
	}
	// The default identity is the Client's: never empty.
	e, err := zklock.NewElection(c, lockPath(t))
	must(t, err)
	l2, err := e.Campaign(ctxT(t))
	must(t, err)
	defer release(t, l2)
	if data, _, err := c.Conn().Get(l2.Node()); err != nil || len(data) == 0 {
		t.Fatalf("default identity: data %q, err %v", data, err)
	}
}

// Observe reports the leader, each change of leader and "no leader", in
// order, never the same leader twice in a row; candidates queueing behind
// the leader change nothing. It closes when its ctx ends.
func TestElectionObserve(t *testing.T) {
	t.Parallel()
	path := lockPath(t) // does not exist yet
	c := connect(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	obs := newElection(t, connect(t), path, "observer").Observe(ctx)
	if p := next(t, obs); p.Node != "" {
		t.Fatalf("first report %+v: want no leader (the path does not exist)", p)
	}

	a := newElection(t, connect(t), path, "a")
	la, err := a.Campaign(ctxT(t))
	must(t, err)
	if p := next(t, obs); p.Node != la.Node() || string(p.Data) != "a" {
		t.Fatalf("report %+v: want a at %s", p, la.Node())
	}
	b := async(newElection(t, connect(t), path, "b").Campaign, ctxT(t))
	cc := async(newElection(t, connect(t), path, "c").Campaign, ctxT(t))
	queued(t, c, path, 3)

	release(t, la)
	lb := await(t, b)
	if p := next(t, obs); p.Node != lb.Node() || string(p.Data) != "b" {
		t.Fatalf("report %+v: want b at %s, the next in line (a candidate queueing is no change)", p, lb.Node())
	}
	release(t, lb)
	lc := await(t, cc)
	if p := next(t, obs); p.Node != lc.Node() || string(p.Data) != "c" {
		t.Fatalf("report %+v: want c at %s", p, lc.Node())
	}
	release(t, lc)
	if p := next(t, obs); p.Node != "" {
		t.Fatalf("report %+v: want no leader after the last resigned", p)
	}
	// Campaigning again on the now empty path (the server may have
	// deleted it, a container) is seen too.
	ld, err := a.Campaign(ctxT(t))
	must(t, err)
	if p := next(t, obs); p.Node != ld.Node() {
		t.Fatalf("report %+v: want a again at %s", p, ld.Node())
	}
	release(t, ld)
	if p := next(t, obs); p.Node != "" {
		t.Fatalf("report %+v: want no leader", p)
	}

	cancel()
	select {
	case p, ok := <-obs:
		if ok {
			t.Fatalf("report %+v after ctx ended: want the channel closed", p)
		}
	case <-time.After(long):
		t.Fatal("the observer's channel did not close after ctx ended")
	}
}

// An observer's channel closes when its Client is closed.
func TestElectionObserveEndsWithClient(t *testing.T) {
	t.Parallel()
	o := connect(t)
	obs := newElection(t, o, lockPath(t), "observer").Observe(ctxT(t))
	next(t, obs)
	must(t, o.Close())
	select {
	case p, ok := <-obs:
		if ok {
			t.Fatalf("report %+v after Close: want the channel closed", p)
		}
	case <-time.After(long):
		t.Fatal("the observer's channel did not close with its Client")
	}
}

// A leader cut off from ZooKeeper hears that it may have lost leadership
// before anyone else leads; the observer sees the handover, and the new
// leader's token is higher.
func TestElectionLeaderPartitioned(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	a, fa := faulty(t, time.Second)
	la, err := newElection(t, a, path, "a").Campaign(ctxT(t))
	must(t, err)
	obs := newElection(t, connect(t), path, "observer").Observe(ctxT(t))
	if p := next(t, obs); p.Node != la.Node() {
		t.Fatalf("report %+v: want a", p)
	}
	b := async(newElection(t, connect(t), path, "b").Campaign, ctxT(t))
	queued(t, connect(t), path, 2)

	fa.Partition()
	lb := await(t, b)
	if !closed(la.Done()) {
		t.Fatal("b leads while the cut-off leader has not heard that it may have lost")
	}
	mustIs(t, la.Err(), zklock.ErrLeaseExpired)
	if !la.ValidUntil().Before(time.Now()) {
		t.Fatalf("the deposed leader's ValidUntil %v is not past", la.ValidUntil())
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("tokens must increase: %d after %d", lb.Token(), la.Token())
	}
	if p := next(t, obs); p.Node != lb.Node() {
		t.Fatalf("report %+v: want b at %s", p, lb.Node())
	}
	fa.Heal()
	release(t, lb)
}

// Resigning while cut off from ZooKeeper never wedges: Release returns when
// its ctx ends, leadership has ended, and the node is deleted once the
// connection is back; the next candidate then leads.
func TestElectionResignDuringDisconnect(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a, fa := faulty(t, 20*time.Second)
	la, err := newElection(t, a, path, "a").Campaign(ctxT(t))
	must(t, err)
	b := async(newElection(t, connect(t), path, "b").Campaign, ctxT(t))
	queued(t, c, path, 2)

	fa.Partition()
	ctx, cancel := context.WithTimeout(ctxT(t), 500*time.Millisecond)
	defer cancel()
	if err := la.Release(ctx); err != nil {
		t.Fatalf("resign while cut off: %v (the Client deletes the node later)", err)
	}
	if !closed(la.Done()) {
		t.Fatal("leadership must end at resign, before the node is gone")
	}
	mustIs(t, la.Err(), zklock.ErrReleased)
	pending(t, b) // the node is still there: b cannot lead yet
	fa.Heal()
	lb := await(t, b)
	if kids := children(t, c, path); len(kids) != 1 || path+"/"+kids[0] != lb.Node() {
		t.Fatalf("children %v: want only b's node, the resigned one deleted", kids)
	}
	release(t, lb)
	if kids := children(t, c, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
}

// A leader whose node someone deletes (an operator, a Curator client's
// cleanup) hears of it: its lease ends, whichever of the Client's leases it
// is.
func TestElectionLeaderNodeDeleted(t *testing.T) {
	t.Parallel()
	a := connect(t, zklock.WithSessionTimeout(3*time.Second))
	var leases []*zklock.Lease
	for i := 0; i < 5; i++ {
		l, err := newMutex(t, a, lockPath(t)).Acquire(ctxT(t))
		must(t, err)
		leases = append(leases, l)
	}
	path := lockPath(t)
	leader, err := newElection(t, a, path, "a").Campaign(ctxT(t))
	must(t, err)
	must(t, connect(t).Conn().Delete(leader.Node(), -1), "delete the leader's node")
	select {
	case <-leader.Done():
	case <-time.After(long):
		t.Fatal("the leader did not hear that its node was deleted")
	}
	mustIs(t, leader.Err(), zklock.ErrLeaseExpired)
	for _, l := range leases {
		must(t, l.Err(), "the Client's other leases are untouched")
		release(t, l)
	}
	_, err = newElection(t, a, path, "a").Leader(ctxT(t))
	mustIs(t, err, zklock.ErrNoLeader)
}

// A candidate that gives up leaves nothing behind, and the line moves on.
func TestElectionCancelledCampaign(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	la, err := newElection(t, c, path, "a").Campaign(ctxT(t))
	must(t, err)
	ctx, cancel := context.WithCancel(ctxT(t))
	b := async(newElection(t, connect(t), path, "b").Campaign, ctx)
	queued(t, c, path, 2)
	cancel()
	if r := returned(t, b); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled campaign: %v, want context.Canceled", r.err)
	}
	queued(t, c, path, 1)
	release(t, la)
}

// zklock.Participants reads any lock path by its nodes' kinds.
func TestParticipantsOfAnyPath(t *testing.T) {
	t.Parallel()
	c := connect(t)

	rwPath := lockPath(t)
	rw := newRW(t, c, rwPath)
	r1, err := rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	w := async(rw.WriteLock().Acquire, ctxT(t))
	queued(t, c, rwPath, 2)
	r2 := async(rw.ReadLock().Acquire, ctxT(t))
	queued(t, c, rwPath, 3)
	parts, err := zklock.Participants(ctxT(t), c, rwPath)
	must(t, err)
	kinds := []zklock.Kind{zklock.KindRead, zklock.KindWrite, zklock.KindRead}
	held := []bool{true, false, false}
	for i, p := range parts {
		if p.Kind != kinds[i] || p.Holder != held[i] || p.Created.IsZero() || time.Since(p.Created) > time.Hour {
			t.Fatalf("participant %d: %+v, want %v holding=%v with its creation time", i, p, kinds[i], held[i])
		}
	}
	if len(parts) != 3 {
		t.Fatalf("%d participants, want 3", len(parts))
	}

	semPath := lockPath(t)
	s := newSem(t, c, semPath, 2)
	leases := acquireN(t, s.Acquire, 2)
	third := async(s.Acquire, ctxT(t))
	queued(t, c, semPath, 3)
	parts, err = zklock.Participants(ctxT(t), c, semPath)
	must(t, err)
	if got, _ := holders(parts); fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("semaphore of 2 with 3 participants: holders %v", got)
	}
	for _, l := range leases {
		release(t, l)
	}
	release(t, await(t, third))

	parts, err = zklock.Participants(ctxT(t), c, lockPath(t))
	if err != nil || len(parts) != 0 {
		t.Fatalf("a path that does not exist: %v, %v; want none", parts, err)
	}
	release(t, r1)
	release(t, await(t, w))
	release(t, await(t, r2))
}

// Observers do not herd: while someone leads, an observer reads nothing
// when candidates come and go (it watches only the leader's node), and a
// change of leader costs it two reads (the children, the new leader's
// node). A write to the leader's node wakes it, but the same leader is not
// reported again.
func TestElectionObserverDoesNotHerd(t *testing.T) {
	t.Parallel()
	path := lockPath(t)
	c := connect(t)
	a := newElection(t, connect(t), path, "a")
	la, err := a.Campaign(ctxT(t))
	must(t, err)

	var rc reqCounter
	obs := newElection(t, connect(t, zklock.WithDialer(rc.dial)), path, "observer").Observe(ctxT(t))
	if p := next(t, obs); p.Node != la.Node() {
		t.Fatalf("report %+v: want a", p)
	}
	// The leader's node is written to (as a revocation would): the
	// observer reads again, and finds the same leader: no report.
	before := rc.snapshot()
	_, err = c.Conn().Set(la.Node(), []byte("a, revised"), -1)
	must(t, err)
	eventually(t, func() bool { return rc.snapshot().minus(before).total() == 2 },
		"the observer reads the children and the leader again after the write")

	// Candidates come and go behind the leader.
	mark := rc.snapshot()
	var joined []<-chan result
	ctx, cancel := context.WithCancel(ctxT(t))
	for i := 0; i < 5; i++ {
		joined = append(joined, async(newElection(t, connect(t), path, fmt.Sprint("c", i)).Campaign, ctx))
		queued(t, c, path, i+2)
	}
	cancel()
	for _, j := range joined {
		returned(t, j)
	}
	b := async(newElection(t, connect(t), path, "b").Campaign, ctxT(t))
	queued(t, c, path, 2)

	release(t, la)
	lb := await(t, b)
	if p := next(t, obs); p.Node != lb.Node() {
		t.Fatalf("report %+v: want b at %s (never a again)", p, lb.Node())
	}
	if got := rc.snapshot().minus(mark); got.total() != 2 {
		t.Fatalf("the observer made %d requests (%s) while 6 candidates came and went and the leader "+
			"changed once: want 2, the reads of the change", got.total(), got.per(1))
	}
	release(t, lb)
}
