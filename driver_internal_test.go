package zklock

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func curatorNode(uuid, lockName string, seq int) string {
	return fmt.Sprintf("_c_%s-%s%010d", uuid, lockName, seq)
}

func uuidN(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }

// curatorFixForSorting is Curator's StandardLockInternalsDriver.fixForSorting:
// the text after the last occurrence of the lock name.
func curatorFixForSorting(s, lockName string) string {
	if i := strings.LastIndex(s, lockName); i >= 0 {
		return s[i+len(lockName):]
	}
	return s
}

func equal(t *testing.T, got, want any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s\ngot:  %#v\nwant: %#v", fmt.Sprint(msg...), got, want)
	}
}

func TestParseChild(t *testing.T) {
	u := "0f8fad5b-d9cb-469f-a165-70867728950e"
	hex := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name  string
		kind  Kind
		seq   int32
		owner string
		ok    bool
		err   bool
	}{
		{name: curatorNode(u, "lock-", 7), kind: KindMutex, seq: 7, owner: u, ok: true},
		{name: curatorNode(u, "__READ__", 12), kind: KindRead, seq: 12, owner: u, ok: true},
		{name: curatorNode(u, "__WRIT__", 2147483647), kind: KindWrite, seq: 2147483647, owner: u, ok: true},
		{name: curatorNode(u, "lease-", 0), kind: KindLease, seq: 0, owner: u, ok: true},
		// After 2^31 creates under one parent, Java's %010d writes the
		// wrapped counter with a sign: ten characters down to -999999999,
		// eleven below.
		{name: "_c_" + u + "-lock--000000001", kind: KindMutex, seq: -1, owner: u, ok: true},
		{name: "_c_" + u + "-lock--2147483648", kind: KindMutex, seq: -2147483648, owner: u, ok: true},
		{name: "_c_" + u + "-lock--1000000000", kind: KindMutex, seq: -1000000000, owner: u, ok: true},
		{name: "_c_" + u + "-lock-1500000000", kind: KindMutex, seq: 1500000000, owner: u, ok: true},
		{name: "_c_" + u + "-lock--0999999999", ok: true, err: true}, // never written (11 characters, a leading zero): refused
		{name: hex + "__lock__0000000003", kind: KindMutex, seq: 3, owner: hex, ok: true},
		{name: hex + "__rlock__0000000004", kind: KindRead, seq: 4, owner: hex, ok: true},
		{name: hex + "__lock__-2147483648", kind: KindMutex, seq: -2147483648, owner: hex, ok: true},
		// go-zookeeper's zk.Lock: _c_ and 32 hex characters.
		{name: "_c_" + hex + "-lock-0000000005", kind: KindMutex, seq: 5, owner: hex, ok: true},
		{name: "_c_" + hex + "-__READ__0000000005", ok: true, err: true}, // zk.Lock has no read side
		{name: "leases", ok: false},
		{name: "locks", ok: false},
		{name: "x", ok: false},
		{name: "lock-0000000001", ok: true, err: true},                                    // unprotected: not a format we know
		{name: "_c_" + u + "-other-0000000001", ok: true, err: true},                      // unknown lock name
		{name: "0123__lock__0000000003", ok: true, err: true},                             // short kazoo id
		{name: "_c_" + u + "-lock-00000000x1", ok: false},                                 // not a sequence
		{name: "_c_" + u + "-lock-00000000001", ok: true, err: true},                      // eleven digits: not ZooKeeper's
		{name: "0123456789ABCDEF0123456789ABCDEF__lock__0000000003", ok: true, err: true}, // kazoo writes lower case
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, ok, err := parseChild(tc.name)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if tc.err {
				if !errors.Is(err, ErrUnknownNode) {
					t.Fatalf("err = %v, want ErrUnknownNode", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			equal(t, []any{ch.Kind, ch.seq, ch.Owner}, []any{tc.kind, tc.seq, tc.owner})
		})
	}
}

// For every node Curator writes, our order is Curator's order (as long as
// the counter has not wrapped: see TestSortChildrenAcrossWrap).
func TestSortChildrenMatchesCurator(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, lockNames := range [][]string{{"lock-"}, {"__READ__", "__WRIT__"}} {
		for round := 0; round < 50; round++ {
			// A live queue spans far less than 2^31 creates.
			base := rng.Intn(1 << 30)
			var names []string
			for i := 0; i < 20; i++ {
				ln := lockNames[rng.Intn(len(lockNames))]
				names = append(names, curatorNode(uuidN(rng.Intn(1<<30)), ln, base+rng.Intn(1<<20)))
			}
			want := append([]string(nil), names...)
			sort.SliceStable(want, func(i, j int) bool {
				ki, kj := want[i], want[j]
				for _, ln := range lockNames {
					ki, kj = curatorFixForSorting(ki, ln), curatorFixForSorting(kj, ln)
				}
				return ki < kj
			})
			kids, err := sortChildren(names, nil)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, childNames(kids), want)
		}
	}
}

func childNames(kids []Child) []string {
	out := make([]string, len(kids))
	for i, k := range kids {
		out[i] = k.Name
	}
	return out
}

// The parent's counter wraps from 2147483647 to -2147483648: the nodes made
// after the wrap come after the ones made before, in creation order.
func TestSortChildrenAcrossWrap(t *testing.T) {
	created := []int{2147483646, 2147483647, -2147483648, -2147483647}
	var names []string
	for i, seq := range created {
		names = append(names, fmt.Sprintf("_c_%s-lock-%010d", uuidN(i), seq))
	}
	shuffled := []string{names[3], names[1], names[2], names[0]}
	kids, err := sortChildren(shuffled, nil)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, childNames(kids), names, "creation order across the wrap")
	if d := (exclusiveDriver{KindMutex}).GetsTheLock(kids, 2, 2); d.Holds {
		t.Fatal("the first node after the wrap holds while two older nodes are queued")
	}

	for _, tc := range []struct {
		a, b int32
		want bool
	}{
		{1, 2, true}, {2, 1, false}, {2147483647, -2147483648, true}, {-2147483648, 2147483647, false},
		{-1, 0, true}, {0, -1, false}, {5, 5, false},
	} {
		if got := seqBefore(tc.a, tc.b); got != tc.want {
			t.Errorf("seqBefore(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSortChildrenMixed(t *testing.T) {
	kazoo := "0123456789abcdef0123456789abcdef__lock__0000000002"
	names := []string{curatorNode(uuidN(1), "lock-", 3), "leases", kazoo, curatorNode(uuidN(2), "lock-", 1)}
	kids, err := sortChildren(names, nil)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, childNames(kids), []string{names[3], kazoo, names[0]}, "plain nodes dropped, sequence order")

	if _, err = sortChildren(append(names, "foo-0000000009"), nil); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("err = %v, want ErrUnknownNode", err)
	}

	leases := []string{curatorNode(uuidN(1), "lease-", 1), "plain"}
	for _, foreign := range []string{"leases", "locks", "0123456789abcdef0123456789abcdef"} {
		if _, err = sortChildren(append(leases, foreign), foreignSemaphore); !errors.Is(err, ErrUnknownNode) {
			t.Fatalf("%s: err = %v, want ErrUnknownNode", foreign, err)
		}
	}
	if _, err = sortChildren(append(leases, "0123456789abcdef0123456789abcdeX"), foreignSemaphore); err != nil {
		t.Fatal(err)
	}
}

// queue builds sorted children from a compact description: each letter is a
// participant, "r"/"w"/"m"/"s" its kind; repeated owners form groups.
func queue(spec ...string) []Child {
	var kids []Child
	for i, s := range spec {
		owner, kind := s[:len(s)-1], s[len(s)-1]
		k := Child{Name: fmt.Sprintf("%s-%d", s, i), Owner: owner}
		switch kind {
		case 'r':
			k.Kind = KindRead
		case 'w':
			k.Kind = KindWrite
		case 'm':
			k.Kind = KindMutex
		case 's':
			k.Kind = KindLease
		}
		kids = append(kids, k)
	}
	return kids
}

func TestExclusiveDriver(t *testing.T) {
	d := exclusiveDriver{KindMutex}
	kids := queue("Am", "Bm", "Cr", "Dm")
	equal(t, d.GetsTheLock(kids, 0, 0), Decision{Holds: true})
	equal(t, d.GetsTheLock(kids, 1, 1), Decision{Watch: []int{0}})
	equal(t, d.GetsTheLock(kids, 3, 3), Decision{Watch: []int{2}}, "a writer waits for readers ahead too")
}

func TestReadDriver(t *testing.T) {
	d := readDriver{}
	for _, tc := range []struct {
		spec  []string
		ours  int
		holds bool
		watch int
	}{
		{[]string{"Ar"}, 0, true, 0},
		{[]string{"Ar", "Br", "Cr"}, 2, true, 0},
		{[]string{"Aw", "Br"}, 1, false, 0},
		{[]string{"Ar", "Bw", "Cr"}, 2, false, 1},             // a queued writer blocks later readers
		{[]string{"Ar", "Br", "Cw"}, 1, true, 0},              // a later writer never blocks a reader
		{[]string{"Aw", "Br", "Cw", "Dr", "Er"}, 4, false, 2}, // the nearest writer ahead, not the first
		{[]string{"Am", "Br"}, 1, false, 0},                   // a foreign exclusive node counts as a writer
		{[]string{"Ar", "Bm", "Cr"}, 2, false, 1},
	} {
		t.Run(strings.Join(tc.spec, ","), func(t *testing.T) {
			got := d.GetsTheLock(queue(tc.spec...), tc.ours, tc.ours)
			want := Decision{Holds: true}
			if !tc.holds {
				want = Decision{Watch: []int{tc.watch}}
			}
			equal(t, got, want)
		})
	}
}

// semaphoreDriver puts questions to the semaphore's policy as the engine
// does, for these tests: legacy is the size recorded in the path's data (0:
// none), marked the marks read for the decision (nil: none read yet, and
// a decision that needs them asks for them). As a Driver, it is the rule
// alone, as Participants asks it.
type semaphoreDriver struct {
	legacy int
	marked map[int]bool
}

func (d semaphoreDriver) question(kids []Child, first, last int) question {
	q := question{kids: kids, first: first, last: last, pathRead: true, marks: d.marked, marksRead: d.marked != nil}
	if d.legacy > 0 {
		q.path = []byte(strconv.Itoa(d.legacy))
	}
	return q
}

func (d semaphoreDriver) decide(kids []Child, first, last int) decision {
	return newSemaphorePolicy(0).decide(d.question(kids, first, last))
}

func (semaphoreDriver) Kind() Kind { return KindLease }

func (d semaphoreDriver) GetsTheLock(kids []Child, first, last int) Decision {
	q := d.question(kids, first, last)
	q.rule = true
	return newSemaphorePolicy(0).decide(q).Decision
}

// One size everywhere (queue's owners carry none in their ids, so they
// count with the legacy size, as one recorded size did before sizes were
// carried in names).
func TestSemaphoreDriver(t *testing.T) {
	d := semaphoreDriver{legacy: 2}
	kids := queue("As", "Bs", "Cs", "Ds")
	equal(t, d.decide(kids, 0, 0), decision{Decision: Decision{Holds: true}, announce: true})
	equal(t, d.decide(kids, 1, 1).Holds, true)
	// C is the first waiter: it watches every holder, so any release wakes it.
	equal(t, d.decide(kids, 2, 2), decision{Decision: Decision{Watch: []int{0, 1}}})
	// D waits for C to hold (or go), not for a holder.
	equal(t, d.decide(kids, 3, 3), decision{Decision: Decision{Watch: []int{2}}, awaitHold: true})
	// The public view hides the hand-over protocol.
	equal(t, d.GetsTheLock(kids, 3, 3), Decision{Watch: []int{2}})
	equal(t, policy(newSemaphorePolicy(2)).decide(d.question(kids, 3, 3)).awaitHold, true, "the engine sees it")

	// [A B C D], B releases: C holds at once, D is now the first waiter.
	kids = queue("As", "Cs", "Ds")
	equal(t, d.decide(kids, 1, 1).Holds, true)
	equal(t, d.decide(kids, 2, 2), decision{Decision: Decision{Watch: []int{0, 1}}})
}

func TestSemaphoreDriverGroups(t *testing.T) {
	d := semaphoreDriver{legacy: 3}
	// Three participants each asking for 2 of 3 leases.
	kids := queue("As", "As", "Bs", "Bs", "Cs", "Cs")
	equal(t, d.GetsTheLock(kids, 0, 1).Holds, true)
	equal(t, d.GetsTheLock(kids, 2, 3), Decision{Watch: []int{0, 1}}, "B must not hold part of its request")
	equal(t, d.decide(kids, 4, 5), decision{Decision: Decision{Watch: []int{3}}, awaitHold: true})
	held, _ := holders(kids, func(Child) policy { return adapt(d) }, nil, false)
	equal(t, held, []bool{true, true, false, false, false, false})
}

// A waiter's plan: the full paths of the nodes its driver names, and the
// semaphore's hand-over protocol.
func TestPlanWatches(t *testing.T) {
	l := lockConfig{path: "/p", pol: adapt(readDriver{})}.build()
	p := &waiter{l: l}
	kids := queue("Aw", "Br", "Cw", "Dr")
	w := p.plan(view{kids: kids, d: l.pol.decide(question{kids: kids, first: 3, last: 3})})
	equal(t, w.paths, []string{"/p/" + kids[2].Name}, "the last writer ahead")
	equal(t, w.awaitHold, false)

	l.pol = adapt(exclusiveDriver{KindMutex})
	kids = queue("Am", "Bm", "Cm")
	equal(t, p.plan(view{kids: kids, d: l.pol.decide(question{kids: kids, first: 2, last: 2})}).paths, []string{"/p/" + kids[1].Name})

	l.pol = newSemaphorePolicy(2)
	kids = queue("As", "Bs", "Cs")
	w = p.plan(view{kids: kids, d: l.pol.decide(semaphoreDriver{legacy: 2}.question(kids, 2, 2))})
	equal(t, w.paths, []string{"/p/" + kids[0].Name, "/p/" + kids[1].Name}, "the first waiter watches the holders")
}

// A driver bug fails the acquire with ErrInvalidArgument, never a panic or
// a hang.
func TestCheckRefusesBadDecisions(t *testing.T) {
	p := &waiter{l: lockConfig{pol: adapt(exclusiveDriver{KindMutex})}.build()}
	for _, d := range []Decision{{}, {Watch: []int{2}}, {Watch: []int{-1}}, {Watch: []int{5}}} {
		if err := p.check(decision{Decision: d}, 2); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: err = %v, want ErrInvalidArgument", d, err)
		}
	}
	for _, d := range []Decision{{Holds: true}, {Watch: []int{0, 1}}} {
		if err := p.check(decision{Decision: d}, 2); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
}

func TestValidatePath(t *testing.T) {
	for _, bad := range []string{"", "lock", "a/b", "/", "/a/", "/a//b", "/zookeeper", "/zookeeper/x",
		"/a/./b", "/a/..", "/a\x00b", "/a\x01"} {
		if err := validatePath(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: err = %v, want ErrInvalidArgument", bad, err)
		}
	}
	for _, good := range []string{"/a", "/a/b", "/zookeeperx", "/a.b/c-d_e", "/ünïcode"} {
		if err := validatePath(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	equal(t, parents("/a/b/c"), []string{"/a", "/a/b", "/a/b/c"})
}

func TestKindLockNames(t *testing.T) {
	for k, want := range map[Kind]string{KindMutex: "lock-", KindRead: "__READ__", KindWrite: "__WRIT__",
		KindLease: "lease-", KindUnknown: "", Kind(99): ""} {
		if got := k.lockName(); got != want {
			t.Errorf("%v.lockName() = %q, want %q", k, got, want)
		}
	}
}

// A downgraded reader sits at its writer's sequence (Curator 5.5's
// format): it sorts first and holds, and everyone behind the writer is
// behind it too.
func TestDowngradedReaderSortsFirst(t *testing.T) {
	w := curatorNode(uuidN(1), "__WRIT__", 5)
	r := curatorNode(uuidN(2), "__READ__", 5) // the downgrade's plain ephemeral node
	later := curatorNode(uuidN(3), "__WRIT__", 6)
	for _, names := range [][]string{{w, r, later}, {later, r, w}, {r, later, w}} {
		kids, err := sortChildren(names, nil)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, childNames(kids), []string{r, w, later})
		equal(t, readDriver{}.GetsTheLock(kids, 0, 0), Decision{Holds: true}, "the downgraded reader holds")
		equal(t, exclusiveDriver{KindWrite}.GetsTheLock(kids, 2, 2), Decision{Watch: []int{1}}, "a later writer waits")
	}
}
