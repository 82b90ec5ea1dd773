package session_test

import (
	"testing"

	"github.com/zkrecipes/zklock/internal/zkfake"
)

// Look.End drops the look: it is no longer active, and its path's record
// goes with the last look on it; a second End drops nothing more.
func TestLookEndDropsTheLook(t *testing.T) {
	s := openFake(t, zkfake.New())
	l := s.StartLook("/p")
	if !l.Active() {
		t.Fatal("a look just started is not active")
	}
	l.End()
	if l.Active() {
		t.Fatal("a look still active after End")
	}
	if n := s.LookedPaths(); n != 0 {
		t.Fatalf("a look ended, and %d paths still recorded", n)
	}
	other := s.StartLook("/p")
	l.End()
	if refs, _ := s.LooksOn("/p"); refs != 1 {
		t.Fatalf("a second End of one look dropped another's record: %d in flight, want 1", refs)
	}
	other.End()
	if n := s.LookedPaths(); n != 0 {
		t.Fatalf("every look ended, and %d paths still recorded", n)
	}
}
