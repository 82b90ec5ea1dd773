package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Movable puts servers behind names that a test can move, as ZooKeeper's
// servers move where it runs: in Kubernetes a StatefulSet's rolling update
// replaces its pods one by one, each on a new address, and a pod that is not
// ready has no DNS record. A client that resolved the names once is left
// with addresses that no longer answer; a client that resolves them at
// every connection attempt, as zklock's does, follows.
//
// Server i is reached through a [Forwarder] at a loopback address, under
// the name "zk-i.zktest.invalid" (i from 0, as a StatefulSet numbers its
// pods), which only [Movable.Lookup] resolves. Clients connect to
// [Movable.Servers] with that lookup:
//
//	m := zktest.MovableServers(t, e.Servers())
//	c, err := zklock.Connect(ctx, m.Servers(), zklock.WithHostResolver(m.Lookup))
//	// ... hold leases, then:
//	err = m.MoveAll(ctx, nil) // every server to a new address, one by one
//
// The names end in .invalid, which no DNS server resolves, so a client
// given the names without the lookup fails to connect rather than reach
// another machine. The servers themselves keep running where they are;
// restart them as a rolling update would with [Movable.MoveAll]'s away
// function. The servers must be reachable from this machine, and the
// [Forwarder]'s limits apply (Linux). A Movable is safe for concurrent
// use, but moving one server from several goroutines at once leaves it
// wherever the last move put it.
type Movable struct {
	names   *Names
	servers []*movingServer

	mu sync.Mutex // serialises the changes of one server's address and name
}

type movingServer struct {
	name string // host name, without the port
	port string
	fwd  *Forwarder
	ip   string // where the name points when it resolves
}

// NewMovable puts each of servers ("host:port" each, as [Container.Servers],
// [Ensemble.Servers] and [Servers] return them) behind a [Forwarder] at a
// loopback address and a name that resolves to it. It fails if an element
// is not "host:port" or a Forwarder cannot start, closing what it started.
// Close the Movable when done.
func NewMovable(servers []string) (*Movable, error) {
	if len(servers) == 0 {
		return nil, errors.New("zktest: movable servers: no servers")
	}
	m := &Movable{names: NewNames()}
	for i, target := range servers {
		f, err := NewForwarder(target)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		host, port, _ := net.SplitHostPort(f.Addr())
		s := &movingServer{name: fmt.Sprintf("zk-%d.zktest.invalid", i), port: port, fwd: f, ip: host}
		m.names.Set(s.name, host)
		m.servers = append(m.servers, s)
	}
	return m, nil
}

// MovableServers puts servers behind names for the test, as [NewMovable]
// does, and closes the Movable when the test and its subtests end. It stops
// the test if they cannot be put there.
func MovableServers(tb testing.TB, servers []string) *Movable {
	tb.Helper()
	m, err := NewMovable(servers)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Close() })
	return m
}

// Servers returns the servers' names with their ports, "zk-i.zktest.invalid:port",
// in the order of the servers given to [NewMovable]: the connect string for
// zklock.Connect, with [Movable.Lookup]. The names and ports never change.
func (m *Movable) Servers() []string {
	out := make([]string, len(m.servers))
	for i, s := range m.servers {
		out[i] = net.JoinHostPort(s.name, s.port)
	}
	return out
}

// Lookup resolves the servers' names, as net.Resolver.LookupHost does, to
// where each server answers now, or not at all while it is unresolvable:
// give it to zklock.WithHostResolver. It is [Names.Lookup] of
// [Movable.Names].
func (m *Movable) Lookup(ctx context.Context, host string) ([]string, error) {
	return m.names.Lookup(ctx, host)
}

// Names returns the name service behind [Movable.Lookup]: to count a
// name's lookups ([Names.Lookups]), or to add names of the test's own.
func (m *Movable) Names() *Names { return m.names }

// Addr returns where server i answers now, "ip:port", or "" while it is
// unreachable or i is out of range.
func (m *Movable) Addr(i int) string {
	s, err := m.server("addr", i)
	if err != nil {
		return ""
	}
	return s.fwd.Addr()
}

func (m *Movable) server(op string, i int) (*movingServer, error) {
	if i < 0 || i >= len(m.servers) {
		return nil, fmt.Errorf("zktest: %s server %d: no such server (0..%d)", op, i, len(m.servers)-1)
	}
	return m.servers[i], nil
}

// Move moves server i to a loopback address no server used before, on the
// same port: it answers there, its name resolves there (if it did not, it
// does now), and then its old address stops answering, every connection
// through it reset, as a restarted pod's old address does. Its clients
// reconnect, to it at its new address or to another server, and keep their
// sessions if they are back within their timeout. It returns the new
// address, "ip:port".
func (m *Movable) Move(i int) (string, error) {
	s, err := m.server("move", i)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ln, err := s.fwd.listen()
	if err != nil {
		return "", err
	}
	// The name first: a client whose connection the move resets finds
	// the new address at its next attempt.
	s.ip = s.fwd.ipOf(ln)
	m.names.Set(s.name, s.ip)
	s.fwd.swap(ln)
	return ln.Addr().String(), nil
}

// Unresolvable makes server i's name resolve no more, as a pod's that is
// not ready: clients skip it at their next connection attempts.
// Connections made before stay, and the server still answers at its
// address. [Movable.Resolvable] and [Movable.Move] undo it.
func (m *Movable) Unresolvable(i int) error {
	s, err := m.server("unresolvable", i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names.Remove(s.name)
	return nil
}

// Resolvable makes server i's name resolve again, to its address (where it
// answers, or last answered if it is unreachable).
func (m *Movable) Resolvable(i int) error {
	s, err := m.server("resolvable", i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names.Set(s.name, s.ip)
	return nil
}

// Unreachable makes server i stop answering at its address: the listener
// is closed and every connection through it reset, as when a pod dies.
// Its name still resolves there, unless [Movable.Unresolvable] said
// otherwise. [Movable.Move] brings it back, at a new address.
func (m *Movable) Unreachable(i int) error {
	s, err := m.server("unreachable", i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.fwd.Stop()
	return nil
}

// MoveAll moves every server in turn, in order, as a StatefulSet's
// rolling update replaces its pods: server i's name stops resolving and its
// address stops answering, away(ctx, i) runs if away is not nil (restart
// the server there, as the update would: [Ensemble.Restart]; or wait a
// while, as a new pod takes time to start), then server i answers at a new
// address and its name resolves to it ([Movable.Move]), and MoveAll waits
// until the server answers srvr there as ZooKeeper does when it serves
// before it moves the next, as the update waits until the new pod is
// ready. With a nil away, each server is gone for no time.
//
// Through the whole roll at most one server is away, so an ensemble keeps
// its quorum; a client that follows the names keeps its session, while one
// that resolved them once has none of the first addresses left by the end.
// The readiness check speaks plaintext: for servers WithTLS, call
// [Movable.Move] in a loop with a check of your own.
//
// ctx bounds the whole roll; a server's wait for readiness gives up with
// ctx. MoveAll stops at the first error (away's, a move's, or the wait's)
// and returns it, with the server's index; the servers moved so far stay
// where they are, and the one it stopped at may be left unreachable.
func (m *Movable) MoveAll(ctx context.Context, away func(ctx context.Context, i int) error) error {
	for i, s := range m.servers {
		if err := m.Unresolvable(i); err != nil {
			return err
		}
		if err := m.Unreachable(i); err != nil {
			return err
		}
		if away != nil {
			if err := away(ctx, i); err != nil {
				return fmt.Errorf("zktest: move server %d (%s): while it was away: %w", i, s.name, err)
			}
		}
		addr, err := m.Move(i)
		if err != nil {
			return err
		}
		if err := awaitSrvr(ctx, addr); err != nil {
			return fmt.Errorf("zktest: move server %d (%s) to %s: %w", i, s.name, addr, err)
		}
	}
	return nil
}

// awaitSrvr waits until the server at addr answers srvr as one that
// serves (with its mode), asking every 100ms, each time for at most a
// second, until ctx is done.
func awaitSrvr(ctx context.Context, addr string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		probe, cancel := context.WithTimeout(ctx, time.Second)
		out, err := FourLetter(probe, addr, "srvr")
		cancel()
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("srvr answered %q", strings.TrimSpace(out))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving: %w", errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}

// Close closes every server's [Forwarder]: nothing answers at their
// addresses any more. The names keep resolving. It returns nil; it makes a
// Movable an io.Closer.
func (m *Movable) Close() error {
	for _, s := range m.servers {
		_ = s.fwd.Close()
	}
	return nil
}
