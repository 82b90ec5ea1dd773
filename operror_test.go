package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zklock"
)

// Every exported call that fails returns an *OpError naming what failed
// and where, with one prefix, its cause reachable with errors.Is. These
// fail before any ZooKeeper call, so no server is needed.
func TestOpError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		op, path string
		err      error
	}{
		{"connect", "", func() error { _, err := zklock.Connect(ctx, nil); return err }()},
		{"new mutex", "/a", func() error { _, err := zklock.NewMutex(nil, "/a"); return err }()},
		{"new rwmutex", "a", func() error { _, err := zklock.NewRWMutex(nil, "a"); return err }()},
		{"new semaphore", "/s", func() error { _, err := zklock.NewSemaphore(nil, "/s", 0); return err }()},
		{"new multilock", "/a,/b", func() error { _, err := zklock.NewMultiLock(nil, []string{"/a", "/b"}); return err }()},
		{"new election", "/e", func() error { _, err := zklock.NewElection(nil, "/e"); return err }()},
		{"new lock", "/l", func() error { _, err := zklock.NewLock(nil, "/l", nil); return err }()},
		{"validate path", "/x/", zklock.ValidatePath("/x/")},
		{"revoke", "", zklock.Revoke(ctx, nil, "/x/n")},
		{"do", "", zklock.Do(ctx, nil, nil)},
		{"participants", "/p", func() error { _, err := zklock.Participants(ctx, nil, "/p"); return err }()},
	}
	for _, tc := range cases {
		var oe *zklock.OpError
		if !errors.As(tc.err, &oe) {
			t.Errorf("%s: error %v (%T) is not an *OpError", tc.op, tc.err, tc.err)
			continue
		}
		if oe.Op != tc.op || oe.Path != tc.path {
			t.Errorf("%s: Op %q Path %q, want %q %q", tc.op, oe.Op, oe.Path, tc.op, tc.path)
		}
		if !errors.Is(tc.err, zklock.ErrInvalidArgument) {
			t.Errorf("%s: %v does not wrap ErrInvalidArgument", tc.op, tc.err)
		}
		if n := strings.Count(tc.err.Error(), "zklock"); n != 1 {
			t.Errorf("%s: %q says zklock %d times, want once", tc.op, tc.err, n)
		}
		want := "zklock: " + tc.op
		if tc.path != "" {
			want += " " + tc.path
		}
		if !strings.HasPrefix(tc.err.Error(), want+": ") {
			t.Errorf("%s: %q does not start with %q", tc.op, tc.err, want+": ")
		}
	}
}

// OpError's text and unwrapping, as the docs give them.
func TestOpErrorText(t *testing.T) {
	t.Parallel()
	err := error(&zklock.OpError{Op: "try acquire", Path: "/locks/a", Err: zklock.ErrLocked})
	if got, want := err.Error(), "zklock: try acquire /locks/a: locked"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, zklock.ErrLocked) {
		t.Fatal("errors.Is does not reach the cause")
	}
	err = &zklock.OpError{Op: "close", Err: zklock.ErrClientClosed}
	if got, want := err.Error(), "zklock: close: client closed"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
