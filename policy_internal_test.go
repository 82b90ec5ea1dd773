package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// askingPolicy decides as the policy it wraps, but asks on every question
// for the lock path's data and the mark of the participant's own first
// node, and records the questions it is put.
type askingPolicy struct {
	policy
	asked *[]question
}

func (a askingPolicy) decide(q question) decision {
	*a.asked = append(*a.asked, q)
	d := a.policy.decide(q)
	d.reads = reads{path: true, marks: []int{q.first}}
	return d
}

// TestPolicyReadsAreAnswered: a policy that asks for reads before it
// decides is asked again with their answers, each read made once per
// decision: the path's data first, and once per attempt (later decisions
// of the attempt are told it), then the marks, read after the children. A
// read asked for again once answered is not made again, so a policy that
// always asks cannot keep the engine reading: its third answer decides.
func TestPolicyReadsAreAnswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := zkfake.New()
	if err := f.Create("/pr", []byte("7")); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(f))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var asked []question
	l := lockConfig{c: c, path: "/pr", pol: askingPolicy{adapt(exclusiveDriver{KindMutex}), &asked}}.build()
	survey := func(p *participant) view {
		t.Helper()
		st, err := p.ready(ctx)
		if err != nil {
			t.Fatal(err)
		}
		asked = nil
		v, err := p.claim.survey(p, p.ws[0], st.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	enqueue := func() *participant {
		t.Helper()
		p := newQueueParticipant(c, l.path, []*Lock{l}, 1)
		if err := p.enqueue(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.abandon)
		return p
	}
	// check compares the questions asked with want: for each, whether the
	// path was read (and then its data), and the marks read (nil: none).
	type answered struct {
		path  bool
		marks map[int]bool
	}
	check := func(what string, want ...answered) {
		t.Helper()
		if len(asked) != len(want) {
			t.Fatalf("%s: %d questions, want %d: %+v", what, len(asked), len(want), asked)
		}
		for i, q := range asked {
			w := want[i]
			if q.pathRead != w.path || w.path && string(q.path) != "7" || q.marksRead != (w.marks != nil) {
				t.Fatalf("%s: question %d %+v, want the path read %v, the marks %v", what, i, q, w.path, w.marks)
			}
			for j, m := range w.marks {
				if got, read := q.marks[j]; !read || got != m {
					t.Fatalf("%s: question %d has the mark of %d %v (read %v), want %v", what, i, j, got, read, m)
				}
			}
		}
	}

	a := enqueue()
	if v := survey(a); !v.d.Holds {
		t.Fatalf("the first participant decides %+v, want it to hold", v.d)
	}
	check("the first participant", answered{}, answered{path: true}, answered{path: true, marks: map[int]bool{0: false}})

	b := enqueue()
	if v := survey(b); v.d.Holds {
		t.Fatal("the second participant holds beside the first")
	}
	check("the second participant's first look", answered{}, answered{path: true}, answered{path: true, marks: map[int]bool{1: false}})

	// Marked, and decided again in the same attempt: the path is not read
	// again, the mark is.
	if err := b.mark(b.ws[0]); err != nil {
		t.Fatal(err)
	}
	if v := survey(b); v.d.Holds || len(v.seen) != 1 {
		t.Fatalf("the second participant, marked: %+v, marks' versions %v; want it to wait, one version", v.d, v.seen)
	}
	check("the second participant's read", answered{path: true}, answered{path: true, marks: map[int]bool{1: true}})
}

// TestPolicyReadErrorsReachTheCaller: a read a policy asked for that fails
// fails the decision with its error: neither dropped (the policy would
// decide without it) nor read again for ever.
func TestPolicyReadErrorsReachTheCaller(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := zkfake.New()
	if err := f.Create("/pe", []byte("7")); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(f))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var asked []question
	l := lockConfig{c: c, path: "/pe", pol: askingPolicy{adapt(exclusiveDriver{KindMutex}), &asked}}.build()
	p := newQueueParticipant(c, l.path, []*Lock{l}, 1)
	if err := p.enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.abandon()
	for _, failing := range []string{"/pe", p.ws[0].nodes[0]} { // the path's data, then our mark
		f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
			if op.Name == "Get" && op.Paths[0] == failing {
				return zk.ErrNoAuth
			}
			return nil
		}})
		st, err := p.ready(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.claim.survey(p, p.ws[0], st.Epoch); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("a decision whose read of %s fails: %v, want zk.ErrNoAuth", failing, err)
		}
	}
	f.SetHooks(zkfake.Hooks{})
}
