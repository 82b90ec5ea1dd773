package zklock_test

// Leader election across languages: zklock's Election and Apache Curator's
// (5.4 and 5.7.1) LeaderLatch (the Java peer's latch mode, tools/peers/README.md)
// candidates on one path, each in a process and session of its own. Both
// write `_c_<uuid>-latch-<seq>` nodes holding the candidate's identity, and
// the lowest node leads. The peer prints `LEAD <id> latch <unix_nanos>` when
// its LeaderLatchListener says it leads and `RESIGN ...` right before it
// closes the latch; a Go candidate leads from Campaign returning to Release
// being called. Both are read on the same wall clock, so every logged
// interval lies inside the real leadership, and two of them overlap only if
// two candidates led at once.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

// latchNode is the name of a LeaderLatch node, Curator's and zklock's.
var latchNode = regexp.MustCompile(`^_c_` + uuidRE + `-latch-\d{10}$`)

// startLatch runs the Java peer java's `latch --path path --id id args...`
// against the test's ZooKeeper, wired as startPeer wires `hold` (stdout
// lines on p.lines, stdin for letGo). The process is killed when the test
// ends, unless it has exited by then.
func startLatch(t *testing.T, java peerLang, id, path string, args ...string) *peer {
	t.Helper()
	return runPeer(t, id, java.argv, append([]string{"latch",
		"--servers", strings.Join(zktest.Servers(t), ","), "--path", path, "--id", id}, args...))
}

// latchEvent is one line of a latch peer: NODE, LEAD, RESIGN, NOTLEAD,
// LEADER or DONE.
type latchEvent struct {
	kind, id string
	node     string // NODE: the round's znode
	leader   string // LEADER: what LeaderLatch.getLeader().getId() said; "-" for nobody
	at       int64  // LEAD, RESIGN, NOTLEAD, LEADER: unix nanos; DONE: the count
}

func parseLatchEvent(line string) (latchEvent, error) {
	f := strings.Fields(line)
	if len(f) >= 2 && f[0] == "ERR" {
		return latchEvent{kind: "ERR", id: f[1]}, fmt.Errorf("peer error: %s", line)
	}
	var (
		ev  = latchEvent{}
		err error
	)
	switch {
	case len(f) == 3 && f[0] == "NODE":
		ev = latchEvent{kind: f[0], id: f[1], node: f[2]}
	case len(f) == 4 && (f[0] == "LEAD" || f[0] == "RESIGN" || f[0] == "NOTLEAD") && f[2] == "latch":
		ev = latchEvent{kind: f[0], id: f[1]}
		ev.at, err = strconv.ParseInt(f[3], 10, 64)
	case len(f) == 4 && f[0] == "LEADER":
		ev = latchEvent{kind: f[0], id: f[1], leader: f[2]}
		ev.at, err = strconv.ParseInt(f[3], 10, 64)
	case len(f) == 3 && f[0] == "DONE":
		ev = latchEvent{kind: f[0], id: f[1]}
		ev.at, err = strconv.ParseInt(f[2], 10, 64)
	default:
		err = errors.New("malformed")
	}
	if err != nil {
		return latchEvent{}, fmt.Errorf("peer line %q: %w", line, err)
	}
	return ev, nil
}

// recvLatch returns the latch peer's next line, or an error if it printed
// ERR, exited or said nothing for too long.
func (p *peer) recvLatch(wait time.Duration) (latchEvent, error) {
	return recvParsed(p, wait, parseLatchEvent)
}

// nextLatch waits for the latch peer's next line and requires it to be of
// kind.
func (p *peer) nextLatch(t *testing.T, kind string) latchEvent {
	t.Helper()
	ev, err := p.recvLatch(long)
	require.NoError(t, err)
	require.Equal(t, kind, ev.kind, "peer %s: unexpected line %+v", p.id, ev)
	return ev
}

// askLeader has a --once-then-wait latch peer print what its
// LeaderLatch.getLeader() says, and returns it.
func (p *peer) askLeader(t *testing.T) string {
	t.Helper()
	_, err := p.stdin.WriteString("leader\n")
	require.NoError(t, err)
	return p.nextLatch(t, "LEADER").leader
}

// finishLatch waits for DONE and a clean exit.
func (p *peer) finishLatch(t *testing.T, count int) {
	t.Helper()
	done := p.nextLatch(t, "DONE")
	require.EqualValues(t, count, done.at)
	select {
	case <-p.exited:
		require.NoError(t, p.err, "peer %s exit; stderr:\n%s", p.id, p.stderr.String())
	case <-time.After(long):
		t.Fatalf("peer %s did not exit", p.id)
	}
}

// leadership is one candidate's time as leader, on the wall clock.
type leadership struct {
	who, lang string
	node      string // the candidate's znode
	from, to  int64
}

// seq returns the sequence number ZooKeeper gave the leadership's node.
func (l leadership) seq() int64 {
	n, err := strconv.ParseInt(l.node[len(l.node)-10:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

type leaderLog struct {
	mu  sync.Mutex
	all []leadership
}

func (l *leaderLog) add(x leadership) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, x)
}

// asHolds gives leaderships to the lock tests' overlap checker and
// counters: a leadership is an exclusive hold.
func asHolds(ls []leadership) []hold {
	hs := make([]hold, len(ls))
	for i, l := range ls {
		hs[i] = hold{who: l.who, lang: l.lang, recipe: "latch", from: l.from, to: l.to}
	}
	return hs
}

// outOfQueueOrder lists the leaderships, in the order they began, whose node
// is not after the previous leader's: the lowest node leads, so one
// candidate after another, leaders come in the order ZooKeeper numbered
// their nodes.
func outOfQueueOrder(ls []leadership) []string {
	ls = slices.Clone(ls)
	sort.Slice(ls, func(i, j int) bool { return ls[i].from < ls[j].from })
	var bad []string
	for i := 1; i < len(ls); i++ {
		if ls[i].seq() <= ls[i-1].seq() {
			bad = append(bad, fmt.Sprintf("%s (%s) led after %s (%s)", ls[i].who, base(ls[i].node), ls[i-1].who, base(ls[i-1].node)))
		}
	}
	return bad
}

// collectLatch reads a latch peer's lines until DONE and returns its
// leaderships; first is the node of its first round, already read. A
// NOTLEAD (Curator gave leadership up) is an error: nothing here breaks a
// connection.
func (p *peer) collectLatch(first string) ([]leadership, error) {
	var (
		ls   []leadership
		node = first
		lead *latchEvent
	)
	for {
		ev, err := p.recvLatch(long)
		if err != nil {
			return ls, err
		}
		switch {
		case ev.kind == "NODE" && node == "":
			node = ev.node
		case ev.kind == "LEAD" && node != "" && lead == nil:
			lead = &ev
		case ev.kind == "RESIGN" && lead != nil:
			ls = append(ls, leadership{who: p.id, lang: "java", node: node, from: lead.at, to: ev.at})
			node, lead = "", nil
		case ev.kind == "DONE" && node == "":
			if int(ev.at) != len(ls) {
				return ls, fmt.Errorf("peer %s: DONE %d after %d leaderships", p.id, ev.at, len(ls))
			}
			return ls, nil
		default:
			return ls, fmt.Errorf("peer %s: %s out of turn", p.id, ev.kind)
		}
	}
}

// TestInteropElectionMixed: two zklock candidates and two Curator
// LeaderLatch candidates campaign over and over on one path. There is never
// more than one leader, leaders come in the order of their nodes whatever
// library wrote them, and everyone leads as often as it asked to.
//
// The queue is set up so that leadership must pass between the languages:
// go-1 leads and holds on while go-2, then java-1 and java-2 queue behind
// it; then everyone runs free. go-2 leads next, then the Java candidates, then
// go-1 again (it queued again after them): at least two handovers between
// languages, whatever the timing after that.
func TestInteropElectionMixed(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			const (
				goCands, minGo     = 2, 15
				javaCands, rounds  = 2, 15
				goLead, javaLeadMs = time.Millisecond, "2" // a leader's work, not synchronisation
			)
			ctx := ctxT(t)
			path := lockPath(t)
			c := connect(t)
			tidy(t, c, path)

			var elections []*zklock.Election
			for i := 1; i <= goCands; i++ {
				e, err := zklock.NewElection(connect(t), path, zklock.WithNodeData(fmt.Appendf(nil, "go-%d", i)))
				require.NoError(t, err)
				elections = append(elections, e)
			}
			firsts := make([]<-chan timedResult, goCands)
			firsts[0] = acquireAt(ctx, elections[0].Campaign)
			lead0 := awaitAt(t, firsts[0])
			require.Regexp(t, latchNode, base(lead0.lease.Node()))
			done0 := make(chan timedResult, 1)
			done0 <- lead0
			firsts[0] = done0
			known := []string{base(lead0.lease.Node())}
			for i := 1; i < goCands; i++ {
				firsts[i] = acquireAt(ctx, elections[i].Campaign)
				known = append(known, newChild(t, c, path, known...))
			}
			var (
				peers     []*peer
				peerNodes []string
			)
			for i := 1; i <= javaCands; i++ {
				p := startLatch(t, java, fmt.Sprintf("java-%d", i), path, "--count", strconv.Itoa(rounds),
					"--lead-ms", javaLeadMs, "--acquire-timeout-ms", peerTimeoutMs)
				node := p.nextLatch(t, "NODE").node
				require.Regexp(t, latchNode, base(node), "Curator's LeaderLatch node")
				require.Equal(t, path+"/"+newChild(t, c, path, known...), node)
				known = append(known, base(node))
				peers, peerNodes = append(peers, p), append(peerNodes, node)
			}
			for _, p := range peers {
				p.silent(t) // nobody leads but go-1
			}

			var (
				log       leaderLog
				peersDone = make(chan struct{})
				errs      = make(chan error, goCands+javaCands)
				pwg, gwg  sync.WaitGroup
			)
			for i, p := range peers {
				pwg.Go(func() {
					ls, err := p.collectLatch(peerNodes[i])
					for _, l := range ls {
						log.add(l)
					}
					if err != nil {
						errs <- err
					}
				})
			}
			for i, e := range elections {
				id := fmt.Sprintf("go-%d", i+1)
				gwg.Go(func() {
					for n := 0; n < minGo || !closed(peersDone); n++ {
						var r timedResult
						if n == 0 {
							r = <-firsts[i]
						} else {
							r.lease, r.err = e.Campaign(ctx)
							r.at = time.Now().UnixNano()
						}
						if r.err != nil {
							errs <- fmt.Errorf("%s: campaign: %w", id, r.err)
							return
						}
						time.Sleep(goLead)
						l := leadership{who: id, lang: "go", node: r.lease.Node(), from: r.at, to: time.Now().UnixNano()}
						if err := r.lease.Err(); err != nil {
							errs <- fmt.Errorf("%s: lost leadership %s: %w", id, l.node, err)
							return
						}
						log.add(l)
						if err := r.lease.Release(ctx); err != nil {
							errs <- fmt.Errorf("%s: resign: %w", id, err)
							return
						}
					}
				})
			}
			pwg.Wait()
			close(peersDone)
			gwg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for _, p := range peers {
				select {
				case <-p.exited:
					require.NoError(t, p.err, "peer %s exit; stderr:\n%s", p.id, p.stderr.String())
				case <-time.After(long):
					t.Fatalf("peer %s did not exit", p.id)
				}
			}

			ls := log.all
			holds := asHolds(ls)
			n := map[string]int{}
			for _, l := range ls {
				n[l.who]++
				require.Regexp(t, latchNode, base(l.node))
			}
			t.Logf("%d leaderships: %v; %d handovers between languages", len(ls), n, handoffs(holds))
			requireNoOverlap(t, holds)
			require.Empty(t, outOfQueueOrder(ls), "leaders out of queue order")
			for i := 1; i <= javaCands; i++ {
				require.Equal(t, rounds, n[fmt.Sprintf("java-%d", i)])
			}
			for i := 1; i <= goCands; i++ {
				require.GreaterOrEqual(t, n[fmt.Sprintf("go-%d", i)], minGo)
			}
			require.GreaterOrEqual(t, handoffs(holds), 2, "the queue set up at the start hands over twice")
			queued(t, c, path, 0) // every candidate's node is gone, Curator's deleted in the background
		})
	}
}

// TestInteropElectionHandover hands leadership over between a Curator
// LeaderLatch and a zklock Election, both ways, in queue order, and checks
// that both libraries name the same leader.
func TestInteropElectionHandover(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			// Java leads first; Go campaigns once the Java node exists, and leads
			// once Java resigns.
			t.Run("JavaToGo", func(t *testing.T) {
				t.Parallel()
				ctx := ctxT(t)
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				p := startLatch(t, java, "java-1", path, "--once-then-wait")
				theirs := p.nextLatch(t, "NODE").node
				require.Regexp(t, latchNode, base(theirs))
				p.nextLatch(t, "LEAD")

				e, err := zklock.NewElection(c, path, zklock.WithNodeData([]byte("go-1")))
				require.NoError(t, err)
				leader, err := e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, theirs, leader.Node)
				require.Equal(t, "java-1", string(leader.Data), "Curator writes the participant id's bytes")
				require.True(t, leader.Holder)
				require.Equal(t, zklock.KindLatch, leader.Kind)

				ours := acquireAt(ctx, e.Campaign)
				node := newChild(t, c, path, base(theirs))
				require.Regexp(t, latchNode, node)
				parts, err := e.Participants(ctx)
				require.NoError(t, err)
				require.Len(t, parts, 2)
				require.Equal(t, theirs, parts[0].Node)
				require.True(t, parts[0].Holder)
				require.Equal(t, path+"/"+node, parts[1].Node)
				require.False(t, parts[1].Holder, "we queue behind the Curator leader")
				require.Equal(t, "go-1", string(parts[1].Data))
				leader, err = e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, theirs, leader.Node, "a candidate joining changes no leader")
				pendingAt(t, ours)

				p.letGo(t)
				resign := p.nextLatch(t, "RESIGN")
				got := awaitAt(t, ours)
				require.Greater(t, got.at, resign.at, "we led before the Curator leader resigned")
				require.Equal(t, path+"/"+node, got.lease.Node())
				p.finishLatch(t, 1)
				leader, err = e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, got.lease.Node(), leader.Node)
				require.Equal(t, "go-1", string(leader.Data))

				release(t, got.lease)
				_, err = e.Leader(ctx)
				require.ErrorIs(t, err, zklock.ErrNoLeader)
			})
			// Go leads first, with the default identity; a Curator LeaderLatch
			// queues behind it, names Go's identity as leader, and leads once Go
			// resigns.
			t.Run("GoToJava", func(t *testing.T) {
				t.Parallel()
				ctx := ctxT(t)
				path := lockPath(t)
				c := connect(t)
				tidy(t, c, path)
				e, err := zklock.NewElection(c, path)
				require.NoError(t, err)
				lease, err := e.Campaign(ctx)
				require.NoError(t, err)
				require.Regexp(t, latchNode, base(lease.Node()))
				ours, err := e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, lease.Node(), ours.Node)
				require.NotEmpty(t, ours.Data, "the default identity")

				p := startLatch(t, java, "java-1", path, "--once-then-wait", "--print-leader")
				theirs := p.nextLatch(t, "NODE").node
				require.Equal(t, path+"/"+newChild(t, c, path, base(lease.Node())), theirs)
				require.Regexp(t, latchNode, base(theirs))
				require.Equal(t, string(ours.Data), p.nextLatch(t, "LEADER").leader,
					"Curator's getLeader names our identity")
				require.Equal(t, string(ours.Data), p.askLeader(t), "and keeps naming it while we lead")
				p.silent(t)
				leader, err := e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, lease.Node(), leader.Node, "a Curator candidate joining changes no leader")

				resigned := releaseAt(t, lease)
				lead := p.nextLatch(t, "LEAD")
				require.Greater(t, lead.at, resigned, "the Curator candidate led before we resigned")
				require.Equal(t, "java-1", p.nextLatch(t, "LEADER").leader)
				leader, err = e.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, theirs, leader.Node)
				require.Equal(t, "java-1", string(leader.Data))

				p.letGo(t)
				p.nextLatch(t, "RESIGN")
				p.finishLatch(t, 1)
				require.Eventually(t, func() bool {
					_, err := e.Leader(ctx)
					return errors.Is(err, zklock.ErrNoLeader)
				}, long, 5*time.Millisecond, "Curator deletes its node in the background once it resigned")
			})
		})
	}
}

// TestInteropElectionObserve: an Observe on a zklock Election reports a
// Curator leader, the change to a Go leader, and the change to nobody, in
// that order, and nothing for a candidate that merely queues; its channel
// closes when its context ends.
func TestInteropElectionObserve(t *testing.T) {
	t.Parallel()
	for _, java := range javaPeers {
		t.Run(java.lib, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			path := lockPath(t)
			c := connect(t)
			tidy(t, c, path)
			e, err := zklock.NewElection(connect(t), path, zklock.WithNodeData([]byte("go-1")))
			require.NoError(t, err)
			octx, cancel := context.WithCancel(ctx)
			defer cancel()
			reports := e.Observe(octx)
			next := func(what string) zklock.Participant {
				t.Helper()
				select {
				case p, ok := <-reports:
					require.True(t, ok, "Observe closed its channel early, waiting for %s", what)
					return p
				case <-time.After(long):
					t.Fatalf("Observe reported nothing for %v, waiting for %s", long, what)
					return zklock.Participant{}
				}
			}
			none := func(what string) {
				t.Helper()
				select {
				case p := <-reports:
					t.Fatalf("Observe reported %+v %s", p, what)
				default:
				}
			}
			require.Empty(t, next("nobody").Node, "nobody leads at first")

			p := startLatch(t, java, "java-1", path, "--once-then-wait")
			theirs := p.nextLatch(t, "NODE").node
			p.nextLatch(t, "LEAD")
			got := next("the Curator leader")
			require.Equal(t, theirs, got.Node)
			require.Equal(t, "java-1", string(got.Data))
			require.True(t, got.Holder)

			ours := acquireAt(ctx, e.Campaign)
			node := newChild(t, c, path, base(theirs))
			pendingAt(t, ours)
			none("for a candidate that queued behind the leader")

			p.letGo(t)
			p.nextLatch(t, "RESIGN")
			lead := awaitAt(t, ours)
			require.Equal(t, path+"/"+node, lead.lease.Node())
			got = next("the Go leader")
			require.Equal(t, lead.lease.Node(), got.Node, "the next report after the Curator leader is its successor")
			require.Equal(t, "go-1", string(got.Data))
			p.finishLatch(t, 1)

			release(t, lead.lease)
			require.Equal(t, zklock.Participant{}, next("nobody, once we resigned"))

			cancel()
			select {
			case p, ok := <-reports:
				require.False(t, ok, "a report %+v after the context ended", p)
			case <-time.After(long):
				t.Fatal("Observe did not close its channel after its context ended")
			}
		})
	}
}
