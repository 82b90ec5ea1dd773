package zktest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zkrecipes/zklock"
	"github.com/zkrecipes/zklock/zktest"
)

func TestNames(t *testing.T) {
	t.Parallel()
	n := zktest.NewNames()
	ctx := t.Context()
	notFound := func(host string) {
		t.Helper()
		_, err := n.Lookup(ctx, host)
		var de *net.DNSError
		require.ErrorAs(t, err, &de)
		require.True(t, de.IsNotFound, "%v", err)
		require.Equal(t, host, de.Name)
	}
	notFound("zk-0")

	n.Set("zk-0", "127.0.0.2", "127.0.0.3")
	addrs, err := n.Lookup(ctx, "ZK-0.") // as DNS compares names
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.2", "127.0.0.3"}, addrs)
	addrs[0] = "changed by the caller"
	addrs, err = n.Lookup(ctx, "zk-0")
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.2", "127.0.0.3"}, addrs, "the caller's slice is its own")

	n.Set("zk-0", "127.0.0.4")
	addrs, err = n.Lookup(ctx, "zk-0")
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.4"}, addrs)

	n.Remove("zk-0")
	notFound("zk-0")
	n.Set("zk-0", "127.0.0.4")
	n.Set("zk-0") // no addresses: no record
	notFound("zk-0")
	require.Equal(t, 6, n.Lookups("zk-0"), "every lookup counts, resolved or not")
	require.Zero(t, n.Lookups("zk-1"))

	done, cancel := context.WithCancel(ctx)
	cancel()
	n.Set("zk-1", "127.0.0.5")
	_, err = n.Lookup(done, "zk-1")
	require.ErrorIs(t, err, context.Canceled, "a lookup whose context is done fails")
}

// echo is a TCP server on 127.0.0.1 that writes back what it reads, and
// counts what it accepted.
func echo(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu sync.Mutex
		n  int
		wg sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// roundTrip writes a line on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, line string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err := io.WriteString(c, line)
	require.NoError(t, err)
	buf := make([]byte, len(line))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, line, string(buf))
}

// closedByPeer reports whether c was closed at the other end: a read ends
// at once with EOF or a reset.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection is still open: %v", err)
}

// A Forwarder passes bytes both ways; Move puts it at a new address on the
// same port and kills the old one, its listener and its connections; Stop
// leaves nothing answering; Close ends it.
func TestForwarder(t *testing.T) {
	t.Parallel()
	target, accepted := echo(t)
	f := zktest.Forward(t, target)
	require.Equal(t, target, f.Target())
	first := f.Addr()
	host, port, err := net.SplitHostPort(first)
	require.NoError(t, err)
	require.True(t, net.ParseIP(host).IsLoopback() && host != "127.0.0.1", "listens at %s", first)

	c, err := net.Dial("tcp", first)
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, "before the move\n")

	moved, err := f.Move()
	require.NoError(t, err)
	require.Equal(t, moved, f.Addr())
	ip, movedPort, err := net.SplitHostPort(moved)
	require.NoError(t, err)
	require.Equal(t, port, movedPort, "same port")
	require.NotEqual(t, host, ip, "new address")
	closedByPeer(t, c)
	_, err = net.DialTimeout("tcp", first, time.Second)
	require.Error(t, err, "nothing answers at the old address")

	c2, err := net.Dial("tcp", moved)
	require.NoError(t, err)
	defer c2.Close()
	roundTrip(t, c2, "after the move\n")
	require.Equal(t, 2, accepted(), "one connection to the target for each accepted")

	f.Stop()
	require.Empty(t, f.Addr())
	closedByPeer(t, c2)
	_, err = net.DialTimeout("tcp", moved, time.Second)
	require.Error(t, err, "nothing answers while stopped")
	f.Stop() // again: nothing to do

	again, err := f.Move()
	require.NoError(t, err)
	require.NotEqual(t, moved, again, "an address is never handed out twice")
	require.NotEqual(t, first, again, "an address is never handed out twice")
	c3, err := net.Dial("tcp", f.Addr())
	require.NoError(t, err)
	defer c3.Close()
	roundTrip(t, c3, "started again\n")

	require.NoError(t, f.Close())
	closedByPeer(t, c3)
	_, err = f.Move()
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, f.Close(), "closing twice")
}

// A connection accepted while the target refuses is closed, not held.
func TestForwarderTargetDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	target := ln.Addr().String()
	require.NoError(t, ln.Close())
	f := zktest.Forward(t, target)
	c, err := net.Dial("tcp", f.Addr())
	require.NoError(t, err)
	defer c.Close()
	closedByPeer(t, c)

	_, err = zktest.NewForwarder("no port")
	require.Error(t, err)
}

func TestMovableRejectsBadServers(t *testing.T) {
	t.Parallel()
	_, err := zktest.NewMovable(nil)
	require.Error(t, err)
	_, err = zktest.NewMovable([]string{"127.0.0.1:2181", "no port"})
	require.Error(t, err)

	m := zktest.MovableServers(t, []string{"127.0.0.1:1"})
	require.Len(t, m.Servers(), 1)
	for name, err := range map[string]error{
		"move":         func() error { _, err := m.Move(1); return err }(),
		"unresolvable": m.Unresolvable(-1),
		"resolvable":   m.Resolvable(1),
		"unreachable":  m.Unreachable(1),
	} {
		require.Error(t, err, name)
	}
	require.Empty(t, m.Addr(1))
}

// sessions records a Client's session events.
type sessions struct {
	mu     sync.Mutex
	events []zklock.SessionInfo
}

func (s *sessions) trace() *zklock.Trace {
	return &zklock.Trace{Session: func(i zklock.SessionInfo) {
		s.mu.Lock()
		s.events = append(s.events, i)
		s.mu.Unlock()
	}}
}

func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// server is the server of the latest event, "" if it is not a connection.
func (s *sessions) server() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 || s.events[len(s.events)-1].State != zklock.SessionConnected {
		return ""
	}
	return s.events[len(s.events)-1].Server
}

// connectedSince reports whether a session was connected after event n.
func (s *sessions) connectedSince(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events[n:] {
		if e.State == zklock.SessionConnected {
			return true
		}
	}
	return false
}

// reconnectedAfter waits until, after event n, the session was lost and is
// connected again, and returns the server.
func (s *sessions) reconnectedAfter(t *testing.T, n int) string {
	t.Helper()
	var server string
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		lost := false
		for _, e := range s.events[n:] {
			switch e.State {
			case zklock.SessionDisconnected, zklock.SessionExpired:
				lost = true
			case zklock.SessionConnected:
				if lost {
					server = e.Server
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "no reconnection")
	return server
}

// sessionTimeout is what the tests' Clients ask for, but through a rolling
// update (rollingTimeout): a restart of the leader stops every write until
// the others have elected another, which on a loaded machine can outlast a
// lease's deadline (0.62 of the timeout after its last confirmation).
const (
	sessionTimeout = 10 * time.Second
	rollingTimeout = 30 * time.Second // zktest's maxSessionTimeout
)

// held checks that lease is live on node and held on the server: confirmed
// again after since, and another Client is refused the lock.
//
// A lease's deadline is at most 0.62 of the session timeout after the
// confirming write was sent (internal/session/keeper.go: w + T - T/20, w
// at least T/3 before the write), so a deadline more than two thirds of
// the timeout after since needs a write sent after since: one that reached
// the quorum through the Client's connection of now. A Client that cannot
// reconnect never gets there, though its lease may still be live.
func held(t *testing.T, ctx context.Context, lease *zklock.Lease, node string, since time.Time, timeout time.Duration,
	servers []string, path string) {
	t.Helper()
	require.NoError(t, lease.Err())
	require.Equal(t, node, lease.Node())
	require.Eventually(t, func() bool { return lease.ValidUntil().After(since.Add(timeout * 2 / 3)) },
		2*timeout, 20*time.Millisecond, "the lease is not confirmed again")
	require.NoError(t, lease.Err())
	other, err := zklock.Connect(ctx, servers)
	require.NoError(t, err)
	defer other.Close()
	m, err := zklock.NewMutex(other, path)
	require.NoError(t, err)
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, zklock.ErrLocked, "another client got the lock")
}

// A StatefulSet's rolling update of the ensemble: each server restarted,
// away from its name while it restarts, and back on a new address. A
// Client that follows the names keeps its session and its lease, on the
// same node; every address it first resolved is dead by the end.
func TestMovableRollingUpdateKeepsLease(t *testing.T) {
	t.Parallel()
	e := zktest.StartEnsemble(t)
	ctx := t.Context()
	m := zktest.MovableServers(t, e.Servers())
	var first []string
	for i := range m.Servers() {
		first = append(first, m.Addr(i))
	}

	var s sessions
	c, lease := lockThrough(t, m, rollingTimeout, &s)
	sid, node, path := c.SessionID(), lease.Node(), "/"+t.Name()

	before := s.count()
	require.NoError(t, m.MoveAll(ctx, func(ctx context.Context, i int) error { return e.Restart(ctx, i) }))
	rolled := time.Now()
	require.Contains(t, m.Servers(), s.reconnectedAfter(t, before), "reconnected through a name")
	require.Equal(t, sid, c.SessionID(), "the session was lost")
	held(t, ctx, lease, node, rolled, rollingTimeout, e.Servers(), path)
	for i, addr := range first {
		require.NotEqual(t, addr, m.Addr(i))
		_, err := net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, "server %d still answers at %s", i, addr)
	}
	require.NoError(t, lease.Release(ctx))
}

// Three names moved one after another, the one in use last, as Vitess
// lost a cluster to a client that resolved once (vitessio/vitess#4454):
// every address the Client first resolved is dead by the end, and it keeps
// its session and its lease. The three names lead to one server.
func TestMovableMovesNameInUseLast(t *testing.T) {
	t.Parallel()
	zkc := zktest.Start(t)
	ctx := t.Context()
	ep := zkc.ClientEndpoint()
	m := zktest.MovableServers(t, []string{ep, ep, ep})

	var s sessions
	c, lease := lockThrough(t, m, sessionTimeout, &s)
	sid, node, path := c.SessionID(), lease.Node(), "/"+t.Name()

	inUse := -1
	for i, name := range m.Servers() {
		if name == s.server() {
			inUse = i
		}
	}
	require.GreaterOrEqual(t, inUse, 0, "the session is on %q, not one of %v", s.server(), m.Servers())
	var order []int
	for i := range m.Servers() {
		if i != inUse {
			order = append(order, i)
		}
	}
	order = append(order, inUse)
	first := map[int]string{}
	for _, i := range order {
		first[i] = m.Addr(i)
		before := s.count()
		_, err := m.Move(i)
		require.NoError(t, err)
		if i == inUse {
			server := s.reconnectedAfter(t, before)
			require.Contains(t, m.Servers(), server)
		}
	}
	moved := time.Now()
	require.Equal(t, sid, c.SessionID(), "the session was lost")
	held(t, ctx, lease, node, moved, sessionTimeout, zkc.Servers(), path)
	for i, addr := range first {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, "server %d still answers at %s", i, addr)
	}
	require.NoError(t, lease.Release(ctx))
}

// A name that does not resolve is skipped: Connect succeeds through the
// one that does, at once; and while that one is unreachable the Client
// keeps looking the others up, until it is back on a new address, where
// the session resumes.
func TestMovableSkipsUnresolvableNames(t *testing.T) {
	t.Parallel()
	zkc := zktest.Start(t)
	ep := zkc.ClientEndpoint()
	m := zktest.MovableServers(t, []string{ep, ep, ep})
	require.NoError(t, m.Unresolvable(0))
	require.NoError(t, m.Unresolvable(1))
	names := m.Servers()

	var s sessions
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	c, err := zklock.Connect(ctx, names, zklock.WithHostResolver(m.Lookup),
		zklock.WithSessionTimeout(sessionTimeout), zklock.WithTrace(s.trace()))
	cancel()
	require.NoError(t, err, "connect with two names of three that do not resolve")
	defer c.Close()
	require.Equal(t, names[2], s.server())
	sid := c.SessionID()

	host := func(i int) string { h, _, _ := net.SplitHostPort(names[i]); return h }
	looked := [2]int{m.Names().Lookups(host(0)), m.Names().Lookups(host(1))}
	before := s.count()
	require.NoError(t, m.Unreachable(2))
	require.Eventually(t, func() bool {
		return m.Names().Lookups(host(0)) > looked[0] && m.Names().Lookups(host(1)) > looked[1]
	}, 10*time.Second, 20*time.Millisecond, "the names that do not resolve were not tried again")
	require.False(t, s.connectedSince(before), "connected through a name that does not resolve: %v", s.server())
	_, err = m.Move(2)
	require.NoError(t, err)
	require.Equal(t, names[2], s.reconnectedAfter(t, before))
	require.Equal(t, sid, c.SessionID())

	// Resolvable again: the Client can use it.
	require.NoError(t, m.Resolvable(0))
	before = s.count()
	require.NoError(t, m.Unreachable(2))
	require.NoError(t, m.Unresolvable(2))
	require.Equal(t, names[0], s.reconnectedAfter(t, before))
	require.Equal(t, sid, c.SessionID())
	require.True(t, strings.HasPrefix(names[0], "zk-0.zktest.invalid:"), "%v", names)
}

// MoveAll moves the servers in order, each away (its name unresolvable,
// its old address dead, the others untouched) while away runs, and back on
// a new address, where it serves, before the next.
func TestMovableMoveAll(t *testing.T) {
	t.Parallel()
	zkc := zktest.Start(t)
	ep := zkc.ClientEndpoint()
	m := zktest.MovableServers(t, []string{ep, ep, ep})
	ctx := t.Context()
	names := m.Servers()
	host := func(i int) string { h, _, _ := net.SplitHostPort(names[i]); return h }
	var first []string
	for i := range names {
		first = append(first, m.Addr(i))
	}

	var order []int
	err := m.MoveAll(ctx, func(ctx context.Context, i int) error {
		order = append(order, i)
		_, err := m.Lookup(ctx, host(i))
		require.Error(t, err, "server %d's name resolves while it is away", i)
		require.Empty(t, m.Addr(i))
		_, err = net.DialTimeout("tcp", first[i], time.Second)
		require.Error(t, err, "server %d answers at its old address while it is away", i)
		for j := range names {
			if j == i {
				continue
			}
			addrs, err := m.Lookup(ctx, host(j))
			require.NoError(t, err, "server %d is away with server %d", j, i)
			want, _, _ := net.SplitHostPort(m.Addr(j))
			require.Equal(t, []string{want}, addrs)
			if j > i {
				require.Equal(t, first[j], m.Addr(j), "server %d moved before its turn", j)
			} else {
				require.NotEqual(t, first[j], m.Addr(j), "server %d is back where it was", j)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, order)
	for i := range names {
		addr := m.Addr(i)
		require.NotEqual(t, first[i], addr)
		addrs, err := m.Lookup(ctx, host(i))
		require.NoError(t, err)
		ip, _, _ := net.SplitHostPort(addr)
		require.Equal(t, []string{ip}, addrs, "server %d's name follows it", i)
		out, err := zktest.FourLetter(ctx, addr, "srvr")
		require.NoError(t, err)
		require.Contains(t, out, "Mode: standalone")
	}

	// An error while a server is away stops the roll there.
	boom := errors.New("boom")
	err = m.MoveAll(ctx, func(context.Context, int) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Empty(t, m.Addr(0), "the server it stopped at is left away")
	require.NotEmpty(t, m.Addr(1))
}

// MoveAll waits until a moved server serves (answers srvr with its mode)
// before it moves the next: behind a server that never does, it waits
// until ctx ends, and says so.
func TestMovableMoveAllWaitsUntilServing(t *testing.T) {
	t.Parallel()
	target, _ := echo(t) // answers "srvr" with "srvr"
	m := zktest.MovableServers(t, []string{target, target})
	first := m.Addr(1)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := m.MoveAll(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "not serving")
	require.Equal(t, first, m.Addr(1), "the next server moved before the first served")
}

// lockThrough connects a Client through m's names with the session timeout
// given, its sessions traced into s (closed when the test ends), and takes
// a Mutex on /<test name>.
func lockThrough(t *testing.T, m *zktest.Movable, timeout time.Duration, s *sessions) (*zklock.Client, *zklock.Lease) {
	t.Helper()
	c, err := zklock.Connect(t.Context(), m.Servers(), zklock.WithHostResolver(m.Lookup),
		zklock.WithSessionTimeout(timeout), zklock.WithTrace(s.trace()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	mu, err := zklock.NewMutex(c, "/"+t.Name())
	require.NoError(t, err)
	lease, err := mu.Acquire(t.Context())
	require.NoError(t, err)
	return c, lease
}
