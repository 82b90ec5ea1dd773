package zktest

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
)

// Names is a name service of a test's own: host names that the test points
// at addresses, moves and removes, for clients that take a lookup function,
// such as zklock's Client:
//
//	names := zktest.NewNames()
//	names.Set("zk-0", "127.0.0.1")
//	c, err := zklock.Connect(ctx, []string{"zk-0:" + port}, zklock.WithHostResolver(names.Lookup))
//	// ...
//	names.Remove("zk-0") // as a Kubernetes pod that is not ready: no record
//
// It never asks the system's resolver: a name it was not given does not
// resolve. Names are compared as DNS compares them, without regard to case
// or a final dot. A Names is safe for concurrent use; make one with
// [NewNames].
type Names struct {
	mu    sync.Mutex
	addrs map[string][]string
	calls map[string]int
}

// NewNames returns an empty name service: no name resolves.
func NewNames() *Names {
	return &Names{addrs: make(map[string][]string), calls: make(map[string]int)}
}

// Set makes name resolve to addrs (IP addresses, as net.Resolver.LookupHost
// returns them), replacing what it resolved to before. Without addrs, name
// does not resolve, as after [Names.Remove].
func (n *Names) Set(name string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(addrs) == 0 {
		delete(n.addrs, canonical(name))
		return
	}
	n.addrs[canonical(name)] = slices.Clone(addrs)
}

// Remove makes name resolve no more, as the DNS record of a Kubernetes pod
// that is not ready is taken out of its headless service.
func (n *Names) Remove(name string) { n.Set(name) }

// Lookup resolves host as net.Resolver.LookupHost does: to the addresses
// [Names.Set] gave it, in that order, or else to a *net.DNSError with
// IsNotFound set ("no such host"). If ctx is done it fails with a
// *net.DNSError that wraps ctx's error.
// Give it to zklock.WithHostResolver, or to any client that takes a lookup.
func (n *Names) Lookup(ctx context.Context, host string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls[canonical(host)]++
	if err := ctx.Err(); err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: host, IsTimeout: true, UnwrapErr: err}
	}
	if addrs := n.addrs[canonical(host)]; len(addrs) > 0 {
		return slices.Clone(addrs), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Lookups returns how many times [Names.Lookup] was asked for name, whether
// it resolved or not: a test can see that a client looked a name up again,
// or tried one that does not resolve.
func (n *Names) Lookups(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[canonical(name)]
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }
