package zklock_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

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

// The server's answer to a path with a character beyond U+FFFF, which
// go-zookeeper sends as it is: BADARGUMENTS (PrepRequestProcessor.
// validatePath, PathUtils); to one with BMP characters zklock accepts: the
// node.
func TestServerRefusesPathBeyondBMP(t *testing.T) {
	t.Parallel()
	c := connect(t)
	dir := lockPath(t)
	mkpath(t, c, dir)
	acl := zk.WorldACL(zk.PermAll)
	_, err := c.Conn().Create(dir+"/a\U0001F512b", nil, 0, acl)
	mustIs(t, err, zk.ErrBadArguments, "create a node named with U+1F512")
	for _, name := range []string{"caf\u00e9", "\u65e5\u672c", "a\uf900b", "a\uffefb"} {
		must(t, zklock.ValidatePath(dir+"/"+name))
		_, err = c.Conn().Create(dir+"/"+name, nil, 0, acl)
		must(t, err, "create %q", name)
	}
}
