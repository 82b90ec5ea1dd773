package zklock

import (
	"regexp"
	"testing"
)

// Protected ids are canonical version-4 UUIDs, as Curator writes them, and
// never repeat.
func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ { // more than the reader's batch, many times
		id, err := newID()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("id %d: %q (repeated: %v), want a fresh canonical version-4 UUID", i, id, seen[id])
		}
		seen[id] = true
	}
}
