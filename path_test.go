package zklock_test

import (
	"testing"

	"github.com/zkrecipes/zklock"
)

// ZooKeeper checks a path's characters as Java chars (PathUtils.
// validatePath): a character beyond U+FFFF arrives as two surrogates,
// which it refuses with BADARGUMENTS; so must ValidatePath, before any
// call. TestServerRefusesPathBeyondBMP shows the server's answer.
func TestValidatePathRefusesCharactersBeyondBMP(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/a\U0001F512b", "/locks/\U00010000", "/\U0010FFFF"} {
		mustIs(t, zklock.ValidatePath(p), zklock.ErrInvalidArgument, "ValidatePath(%q)", p)
	}
	for _, p := range []string{"/caf\u00e9", "/\u65e5\u672c", "/a\uf900b", "/a\uffefb"} {
		must(t, zklock.ValidatePath(p), "ValidatePath(%q)", p)
	}
}
