package zklock_test

// What the engine asks of a recipe's policy, seen from outside: how the
// lock path and its parents are made, and which reads a decision costs.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestFakeLayoutPathsAloneArePersistent: a kazoo-layout semaphore makes
// its path and its lock path persistent, as kazoo does, and nothing else:
// the parents it creates on the way are containers, as every recipe's
// are, which the server reaps once they are empty.
func TestFakeLayoutPathsAloneArePersistent(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	var mu sync.Mutex
	made := map[string]string{} // path: the op that created it
	f.SetHooks(zkfake.Hooks{After: func(op zkfake.Op, err error) error {
		if err == nil && (op.Name == "CreatePersistent" || op.Name == "CreateContainer") {
			mu.Lock()
			made[op.Paths[0]] = op.Name
			mu.Unlock()
		}
		return err
	}})
	defer f.SetHooks(zkfake.Hooks{})
	s, err := zklock.NewSemaphore(c, "/lp/a/sem", 1, zklock.WithSemaphoreLayout(zklock.LayoutKazoo))
	must(t, err)
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	release(t, l)
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{
		"/lp": "CreateContainer", "/lp/a": "CreateContainer",
		"/lp/a/sem": "CreatePersistent", "/lp/a/sem-__lock__": "CreatePersistent",
	}
	if fmt.Sprint(made) != fmt.Sprint(want) {
		t.Fatalf("paths made %v, want %v", made, want)
	}
}

// TestFakeParticipantsReadThePathOnlyWhenAsked: listing a zklock
// semaphore's participants reads the path's data only when a lease node
// carries no size in its name (the policy asks for the legacy record
// then), once; a queue of sized nodes, or a mutex's, costs no such read.
func TestFakeParticipantsReadThePathOnlyWhenAsked(t *testing.T) {
	f := zkfake.New()
	c := fakeClient(t, f)
	var mu sync.Mutex
	reads := map[string]int{}
	f.SetHooks(zkfake.Hooks{Before: func(op zkfake.Op) error {
		if op.Name == "Get" {
			mu.Lock()
			reads[op.Paths[0]]++
			mu.Unlock()
		}
		return nil
	}})
	defer f.SetHooks(zkfake.Hooks{})
	readsOf := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		n := reads[path]
		reads[path] = 0
		return n
	}
	s, err := zklock.NewSemaphore(c, "/pr", 3)
	must(t, err)
	l, err := s.Acquire(ctxT(t))
	must(t, err)
	m, err := zklock.NewMutex(c, "/pm")
	must(t, err)
	lm, err := m.Acquire(ctxT(t))
	must(t, err)
	readsOf("/pr")
	list := func(what string, sem bool, path string, want int) {
		t.Helper()
		var err error
		if sem {
			_, err = s.Participants(ctxT(t))
		} else {
			_, err = zklock.Participants(ctxT(t), c, path)
		}
		must(t, err, what)
		if n := readsOf(path); n != want {
			t.Fatalf("%s: %d reads of %s, want %d", what, n, path, want)
		}
	}
	list("the Semaphore, sized nodes", true, "/pr", 0)
	list("the path, sized nodes", false, "/pr", 0)
	list("a mutex's path", false, "/pm", 0)
	must(t, f.Create("/pr/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lease-0000000009", nil)) // a v4 id: no size
	list("the Semaphore, a legacy node", true, "/pr", 1)
	list("the path, a legacy node", false, "/pr", 1)
	release(t, l)
	release(t, lm)
}
