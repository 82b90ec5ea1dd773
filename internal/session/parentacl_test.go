package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestParentACL: a Fire or a Register that makes its node's missing parent
// gives the parent the ACL the provider names for the parent's own path,
// and the node its own: the contract of WithACLProvider, for every node
// the Client creates.
func TestParentACL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := testSession(t, ctx, nil)
	var b [6]byte
	_, _ = rand.Read(b[:])
	root := "/zklock-test/parent-acl-" + hex.EncodeToString(b[:])
	zc := c.Conn()
	world := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/zklock-test", root} {
		if err := zc.CreatePersistent(p, nil, world); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Conn().DeleteAll([]string{root + "/fire", root + "/reg", root}) })
	// Everyone may do everything; a digest id named after the path may read.
	provider := func(path string) []zk.ACL {
		return append(zk.WorldACL(zk.PermAll), zk.ACL{Perms: zk.PermRead, Scheme: "digest", ID: "p" + path + ":x"})
	}
	guard := root + "/guard"
	if err := zc.CreateEphemeral(guard, nil, world); err != nil {
		t.Fatal(err)
	}
	if err := zc.Fire(guard, root+"/fire/g", provider); err != nil {
		t.Fatalf("fire: %v", err)
	}
	if err := zc.Register(guard, root+"/reg/e", nil, -1, provider); err != nil {
		t.Fatalf("register: %v", err)
	}
	raw := c.Raw()
	for _, p := range []string{root + "/fire", root + "/reg", root + "/reg/e"} {
		acl, _, err := raw.GetACL(p)
		if err != nil {
			t.Fatalf("get ACL of %s: %v", p, err)
		}
		if want := provider(p); !slices.Equal(acl, want) {
			t.Errorf("%s: ACL %v, want the provider's for its path, %v", p, acl, want)
		}
	}
	if err := zc.DeleteAll([]string{root + "/reg/e", guard}); err != nil {
		t.Fatal(err)
	}
}
