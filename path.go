package zklock

import (
	"strings"
)

// ValidatePath reports whether path can be a lock path: nil, or an error
// wrapping ErrInvalidArgument that says why not. Every constructor checks
// its path this way; ValidatePath lets a program check one before it
// connects (the zklock command does, for its PATH argument).
func ValidatePath(path string) error {
	if err := validatePath(path); err != nil {
		return opError("validate path", path, err)
	}
	return nil
}

// validatePath checks a lock path the way ZooKeeper would, and more: the
// path must be absolute, not the root, without a trailing slash, empty or
// relative elements, and not under /zookeeper (the server's own subtree).
func validatePath(p string) error { return checkPath("lock path", p) }

// checkPath is validatePath for a path that what names in errors.
func checkPath(what, p string) error {
	switch {
	case p == "":
		return invalidf("empty %s", what)
	case p[0] != '/':
		return invalidf("%s %q is relative", what, p)
	case p == "/":
		return invalidf("%s %q is the root", what, p)
	case strings.HasSuffix(p, "/"):
		return invalidf("%s %q has a trailing slash", what, p)
	case strings.Contains(p, "//"):
		return invalidf("%s %q has an empty element", what, p)
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return invalidf("%s %q is under /zookeeper, which the server reserves", what, p)
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == "." || el == ".." {
			return invalidf("%s %q has a relative element %q", what, p, el)
		}
	}
	// PathUtils.validatePath checks Java chars, UTF-16 code units: a
	// character beyond U+FFFF is two surrogates (U+D800 to U+DFFF) there,
	// which it rejects; malformed UTF-8 reads as U+FFFD on both sides.
	for _, r := range p {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return invalidf("%s %q has a character ZooKeeper rejects (%U)", what, p, r)
		}
	}
	return nil
}

// parents returns the ancestors of p, outermost first, ending with p itself.
func parents(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}
