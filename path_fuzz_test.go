package zklock

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
)

// zkAcceptsPath is ZooKeeper's own rule for a path (PathUtils.validatePath,
// which the server applies to every path a request names), on the path as
// the server reads it: the bytes decoded as UTF-8, a malformed sequence
// becoming U+FFFD (jute's BinaryInputArchive.readString is new String(b,
// UTF_8)), and checked char by char, a Java char being a UTF-16 code unit.
func zkAcceptsPath(p string) bool {
	chars := utf16.Encode([]rune(p)) // []rune(p) turns malformed UTF-8 into U+FFFD, as Java does
	if len(chars) == 0 || chars[0] != '/' {
		return false
	}
	if len(chars) == 1 {
		return true
	}
	if chars[len(chars)-1] == '/' {
		return false
	}
	last := uint16('/')
	for i := 1; i < len(chars); last, i = chars[i], i+1 {
		c := chars[i]
		end := i+1 == len(chars) || chars[i+1] == '/'
		switch {
		case c == 0:
			return false
		case c == '/' && last == '/':
			return false
		case c == '.' && last == '.':
			if chars[i-2] == '/' && end {
				return false
			}
		case c == '.':
			if chars[i-1] == '/' && end {
				return false
			}
		case c > 0 && c <= 0x1f, c >= 0x7f && c <= 0x9f, c >= 0xd800 && c <= 0xf8ff, c >= 0xfff0:
			return false
		}
	}
	return true
}

// FuzzValidatePath checks validatePath against ZooKeeper's rule: it never
// panics; it accepts a path exactly when ZooKeeper would, less the root and
// the server's own /zookeeper subtree (which a lock path must not be); so
// every path it accepts, and each of the parents a constructor creates, is
// one the server takes. What it refuses wraps ErrInvalidArgument.
func FuzzValidatePath(f *testing.F) {
	for _, p := range []string{
		"/lock", "/a/b/c", "/", "", "a", "/a/", "//a", "/a//b", "/.", "/..", "/a/./b", "/a/../b",
		"/.a", "/a.", "/..a", "/a..", "/...", "/zookeeper", "/zookeeper/quota", "/zookeeperx",
		"/a\x00b", "/a\x1fb", "/a\x7fb", "/a\u0085b", "/a\u00a0b", "/a\ud7ffb", "/a\uf8ffb", "/a\uf900b",
		"/a\uffefb", "/a\ufff0b", "/a\ufffdb", "/a\xffb", "/a\xed\xa0\x80b", "/a\xc0\xafb",
		"/caf\u00e9", "/\u65e5\u672c", "/a\U0001F512b", "/a\U00010000", "/locks/\U0010FFFF",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := validatePath(p)
		reserved := p == "/" || p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/")
		want := zkAcceptsPath(p) && !reserved
		if (err == nil) != want {
			t.Fatalf("validatePath(%q) = %v; ZooKeeper accepts it: %v, reserved: %v", p, err, zkAcceptsPath(p), reserved)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("validatePath(%q) = %v, not an ErrInvalidArgument", p, err)
			}
			if err2 := ValidatePath(p); !errors.Is(err2, ErrInvalidArgument) {
				t.Fatalf("ValidatePath(%q) = %v, not an ErrInvalidArgument", p, err2)
			}
			return
		}
		if err2 := ValidatePath(p); err2 != nil {
			t.Fatalf("ValidatePath(%q) = %v, validatePath accepts it", p, err2)
		}
		for _, dir := range parents(p) {
			if !zkAcceptsPath(dir) || dir == "/" {
				t.Fatalf("parents(%q) includes %q, which ZooKeeper refuses", p, dir)
			}
		}
		if ps := parents(p); ps[len(ps)-1] != p {
			t.Fatalf("parents(%q) = %q, not ending with the path", p, ps)
		}
	})
}
