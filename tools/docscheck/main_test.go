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

// TestCheckMake: a make command a page gives, in inline code or in a code
// fence, names a target of the Makefile; prose that says "make" is not one.
func TestCheckMake(t *testing.T) {
	makeTargets = map[string]bool{"test": true, "zookeeper": true}
	t.Cleanup(func() { makeTargets = nil })
	for _, tc := range []struct {
		line    string
		inFence bool
		ok      bool
	}{
		{"run `make test` first", false, true},
		{"`make zookeeper PORT=2181` runs one", false, true},
		{"make zookeeper PORT=2181    # until ^C", true, true},
		{"make sure the server runs", false, true}, // prose
		{"make more than 2 held", false, true},     // prose
		{"ZKLOCK_TEST_SERVERS=127.0.0.1:2181 go test ./...", true, true},

		{"run `make zk` first", false, false},
		{"make zk PORT=2181", true, false},
		{"`make test` then `make tset`", false, false},
	} {
		msg := checkMake(tc.line, tc.inFence)
		if (msg == "") != tc.ok {
			t.Errorf("checkMake(%q, %v) = %q; want ok %v", tc.line, tc.inFence, msg, tc.ok)
		}
	}
}

// TestMakeTargetsOfThisRepository: the Makefile's targets are read, among
// them the ones the README tells a newcomer to run.
func TestMakeTargetsOfThisRepository(t *testing.T) {
	if err := loadMakeTargets("../.."); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { makeTargets = nil })
	for _, want := range []string{"demo", "test", "test-server", "zookeeper", "stop-docker", "pin-library"} {
		if !makeTargets[want] {
			t.Errorf("the Makefile's target %q was not read", want)
		}
	}
	if makeTargets["MODULE"] || makeTargets["ZK_ENV"] {
		t.Error("a variable was read as a target")
	}
}
