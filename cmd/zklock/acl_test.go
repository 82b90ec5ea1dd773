//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock"
)

// TestRefusedByACL: a lock path whose ACL does not let zklock create
// nodes is refused (125, on the refusal, not after retries), saying so, and the command does not
// run; with the credentials the ACL names, the same path works.
func TestRefusedByACL(t *testing.T) {
	path := lockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	owner, err := zklock.Connect(ctx, strings.Split(servers, ","), zklock.WithAuth("digest", []byte("ops:secret")))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			if _, err := owner.Conn().Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
	}
	acl := append(zk.DigestACL(zk.PermAll, "ops", "secret"), zk.WorldACL(zk.PermRead)...)
	if _, err := owner.Conn().Create(path, nil, 0, acl); err != nil {
		t.Fatal(err)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	// No -timeout: a command that retried the refusal would wait for
	// ever, and expectCode fails one that has not exited within long; so
	// exiting 125 at all is exiting on the refusal.
	_, stderr := expectCode(t, exitFailed, env(), "lock", path, "--", "touch", ran)
	if !strings.Contains(stderr, "refused by the path's ACL") || !strings.Contains(stderr, "not authenticated") {
		t.Errorf("stderr does not say the ACL refused the client:\n%s", stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if kids, _, err := owner.Conn().Children(path); err != nil || len(kids) != 0 {
		t.Errorf("children of %s: %q, %v: want none", path, kids, err)
	}

	expectCode(t, 0, env(), "lock", "-auth", "digest:ops:secret", path, "--", "touch", ran)
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("with the credentials the command did not run: %v", err)
	}
}
