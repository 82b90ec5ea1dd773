package main

import (
	"strings"
	"testing"

	"github.com/zkrecipes/zklock/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// The program's scenario passes against a real server (the shared test
// server, or ZKLOCK_TEST_SERVERS): it only breaks its own client's session.
func TestSessionExpiry(t *testing.T) {
	var out strings.Builder
	err := run(t.Context(), zktest.Servers(t), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
}
