package main

import (
	"strings"
	"testing"
)

// TestCheckInstall: the install story's rule, line by line: this
// repository's modules are got @main (or the release steps' @vX.Y.Z), and
// the placeholder version appears nowhere.
func TestCheckInstall(t *testing.T) {
	placeholder := "v0.0.0-" + strings.Repeat("0", 3) + "10101000000-000000000000"
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"go get github.com/zkrecipes/zklock@main", true},
		{"go get github.com/zkrecipes/zklock/zktest@main                   # for tests", true},
		{"go install github.com/zkrecipes/zklock/cmd/zklock@main", true},
		{"`go get github.com/zkrecipes/zklock/zktest@main`, alone", true},
		{"//	go install github.com/zkrecipes/zklock/cmd/zklock@main", true},
		{"A user's `go get github.com/zkrecipes/zklock/zktest@vX.Y.Z` then resolves", true},
		{"go get github.com/zkrecipes/zklock@main github.com/zkrecipes/zklock/zktest@main", true},
		{"import \"github.com/zkrecipes/zklock/zktest\"", true}, // not an install
		{"go run honnef.co/go/tools/cmd/staticcheck@v0.8.2", true},
		{"github.com/zkrecipes/zklock v0.0.0-20261129081228-1725e963cfea", true},

		{"go install github.com/zkrecipes/zklock/cmd/zklock@latest", false},
		{"go get github.com/zkrecipes/zklock/zktest", false},
		{"go get github.com/zkrecipes/zklock/zktest@v0.3.0", false},
		{"go get github.com/zkrecipes/zklock@main github.com/zkrecipes/zklock/zktest", false},
		{"	github.com/zkrecipes/zklock " + placeholder, false},
		{"requires the library at a placeholder version (`" + placeholder + "`)", false},
	} {
		msg := checkInstall(tc.line)
		if (msg == "") != tc.ok {
			t.Errorf("checkInstall(%q) = %q; want ok %v", tc.line, msg, tc.ok)
		}
	}
}
