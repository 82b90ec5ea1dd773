package zklock_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock"
)

// pathACL is an ACL that names the path it was made for: everyone may do
// everything (so the test can clean up), and a digest id derived from the
// path may read.
func pathACL(path string) []zk.ACL {
	sum := sha256.Sum256([]byte(path))
	return append(zk.WorldACL(zk.PermAll), zk.ACL{Perms: zk.PermRead, Scheme: "digest", ID: "p" + hex.EncodeToString(sum[:8]) + ":x"})
}

// aclPath is the path a node's ACL was asked for: a sequential node's
// without ZooKeeper's sequence.
func aclPath(node string) string {
	i := len(node) - 10
	if i < 0 || strings.Trim(node[i:], "0123456789") != "" {
		return node
	}
	for _, name := range []string{"lock-", "lease-", "__READ__", "__WRIT__", "__lock__"} {
		if strings.HasSuffix(node[:i], name) {
			return node[:i]
		}
	}
	return node
}

// Every node the Client creates gets the ACL provider's ACL for its path:
// lock nodes (asked for by the path before the sequence) and every parent,
// under each lock and each semaphore layout, the SharedCount node
// included. The test walks the nodes under its own root and reads each
// one's ACL back.
func TestACLProvider(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	asked := map[string]bool{}
	c := connect(t, zklock.WithACLProvider(func(path string) []zk.ACL {
		mu.Lock()
		asked[path] = true
		mu.Unlock()
		return pathACL(path)
	}))
	raw := connect(t)
	base := lockPath(t)
	root := strings.TrimSuffix(base, "/lock")

	m, err := zklock.NewMutex(c, base+"/mutex/a/b")
	must(t, err)
	rw, err := zklock.NewRWMutex(c, base+"/rw")
	must(t, err)
	sems := map[string][]zklock.LockOption{
		"zklock":  nil,
		"curator": {zklock.WithSemaphoreLayout(zklock.LayoutCurator), zklock.WithSharedCount(base + "/count/c")},
		"kazoo":   {zklock.WithSemaphoreLayout(zklock.LayoutKazoo)},
	}
	var (
		held    []*zklock.Lease
		waiters []<-chan result
	)
	l, err := m.Acquire(ctxT(t))
	must(t, err)
	held = append(held, l)
	l, err = rw.ReadLock().Acquire(ctxT(t))
	must(t, err)
	held = append(held, l)
	for name, opts := range sems {
		s, err := zklock.NewSemaphore(c, base+"/sem-"+name, 1, opts...)
		must(t, err)
		l, err := s.Acquire(ctxT(t))
		must(t, err, name)
		if name == "zklock" {
			// A waiter granted after it waited registers (registry.go):
			// its entry, and the _holders container made for it, get
			// checked too.
			waiting := async(s.Acquire, ctxT(t))
			queued(t, raw, base+"/sem-zklock", 2)
			release(t, l)
			l = await(t, waiting)
		}
		held = append(held, l)
		if name != "zklock" {
			// A second acquire holds the inner lock while it waits: its
			// lock node gets checked too.
			waiting := async(s.Acquire, ctxT(t))
			inner := base + "/sem-" + name + "/locks"
			if name == "kazoo" {
				inner = base + "/sem-" + name + "-__lock__"
			}
			queued(t, raw, inner, 1)
			waiters = append(waiters, waiting)
		}
	}
	// The writer queued behind the reader: a waiting node too.
	waiters = append(waiters, async(rw.WriteLock().Acquire, ctxT(t)))
	queued(t, raw, base+"/rw", 2)

	checked := 0
	var walk func(p string)
	walk = func(p string) {
		kids, _, err := raw.Conn().Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		must(t, err)
		acl, _, err := raw.Conn().GetACL(p)
		must(t, err, "get ACL of %s", p)
		want := pathACL(aclPath(p))
		if !slices.Equal(acl, want) {
			t.Errorf("%s: ACL %v, want the provider's for %s, %v", p, acl, aclPath(p), want)
		}
		checked++
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	walk(root)
	// root, lock, mutex, a, b, its node; rw and 2 nodes; zklock sem, node,
	// _holders and the node's entry; count, c; curator sem, locks, its
	// node, leases, 2 nodes; kazoo sem, 1 lease, sem-kazoo-__lock__, its
	// node.
	if checked != 25 {
		t.Fatalf("checked %d nodes, want 25", checked)
	}
	mu.Lock()
	n := len(asked)
	mu.Unlock()
	if n == 0 {
		t.Fatal("the provider was never asked")
	}
	for _, l := range held {
		release(t, l)
	}
	for _, w := range waiters {
		release(t, await(t, w))
	}
}
