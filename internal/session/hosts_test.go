package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// table is a lookup a test changes: host to addresses.
type table struct {
	mu    sync.Mutex
	addrs map[string][]string
	calls int
}

func (tb *table) set(host string, addrs ...string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.addrs == nil {
		tb.addrs = make(map[string][]string)
	}
	tb.addrs[host] = addrs
}

func (tb *table) lookup(_ context.Context, host string) ([]string, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.calls++
	if a := tb.addrs[host]; len(a) > 0 {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// recordingWire is a wire whose dialer records the addresses it is asked
// for and connects to none, over the lookup tb, with its log in buf.
func recordingWire(t *testing.T, tb *table, buf *bytes.Buffer, servers ...string) (*wire, *[]string) {
	t.Helper()
	return recordingWireOf(t, tb, buf, 0, servers...)
}

// recordingWireOf is recordingWire with a session timeout of requested.
func recordingWireOf(t *testing.T, tb *table, buf *bytes.Buffer, requested time.Duration, servers ...string) (*wire, *[]string) {
	t.Helper()
	var dialed []string
	w := testWire(Options{Lookup: tb.lookup, SessionTimeout: requested,
		Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Dialer: func(_, addr string, _ time.Duration) (net.Conn, error) {
			dialed = append(dialed, addr)
			return nil, errors.New("refused")
		}})
	if err := w.res.newHosts(nil).Init(servers); err != nil {
		t.Fatal(err)
	}
	return w, &dialed
}

// A name is resolved each time it is dialed: a name that moved is dialed
// at its new address at the next attempt, and one that stops resolving
// fails the dial with its lookup's error, kept for Connect's error.
func TestDialResolvesEachTime(t *testing.T) {
	var tb table
	var log bytes.Buffer
	tb.set("zk1", "127.0.0.2")
	w, dialed := recordingWire(t, &tb, &log, "zk1:2181")
	if _, err := w.dialer("tcp", "zk1:2181", time.Second); err == nil {
		t.Fatal("the dial succeeded")
	}
	tb.set("zk1", "127.0.0.3")
	_, _ = w.dialer("tcp", "zk1:2181", time.Second)
	if want := []string{"127.0.0.2:2181", "127.0.0.3:2181"}; strings.Join(*dialed, " ") != strings.Join(want, " ") {
		t.Fatalf("dialed %v, want %v: the moved name at its new address", *dialed, want)
	}
	if !strings.Contains(log.String(), "new addresses") {
		t.Fatalf("the move was not logged: %s", log.String())
	}

	tb.set("zk1")
	for i := 0; i < 3; i++ {
		_, err := w.dialer("tcp", "zk1:2181", time.Second)
		var de *net.DNSError
		if !errors.As(err, &de) || de.Name != "zk1" {
			t.Fatalf("dial of a name that does not resolve: %v, want its *net.DNSError", err)
		}
	}
	if n := strings.Count(log.String(), "does not resolve"); n != 1 {
		t.Fatalf("%d warnings for three failed lookups of one name, want 1 until it resolves again:\n%s", n, log.String())
	}
	if len(*dialed) != 2 {
		t.Fatalf("dialed %v: a name that does not resolve is not dialed", *dialed)
	}
	err := w.whyNoSession(context.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last lookup error: lookup zk1") ||
		!strings.Contains(err.Error(), "last dial error: refused") {
		t.Fatalf("whyNoSession: %v, want the deadline, the last lookup error and the last dial error", err)
	}
	tb.set("zk1", "127.0.0.4")
	_, _ = w.dialer("tcp", "zk1:2181", time.Second)
	if strings.Count(log.String(), "does not resolve") != 1 || (*dialed)[len(*dialed)-1] != "127.0.0.4:2181" {
		t.Fatalf("after the name resolves again: dialed %v, log:\n%s", *dialed, log.String())
	}
}

// An IP address is its own address: the lookup is not asked.
func TestDialAddressNeedsNoLookup(t *testing.T) {
	var tb table
	w, dialed := recordingWire(t, &tb, new(bytes.Buffer), "127.0.0.9:2181", "[::1]:2181")
	_, _ = w.dialer("tcp", "127.0.0.9:2181", time.Second)
	_, _ = w.dialer("tcp", "[::1]:2181", time.Second)
	if tb.calls != 0 || strings.Join(*dialed, " ") != "127.0.0.9:2181 [::1]:2181" {
		t.Fatalf("lookups %d, dialed %v: want none, and the addresses as given", tb.calls, *dialed)
	}
}

// A name with several addresses: every address is tried in one attempt,
// from one further at each attempt; a round of attempts counts addresses,
// not names, before go-zookeeper's pause; the handshake's bound divides
// the session timeout among them.
func TestNameWithSeveralAddresses(t *testing.T) {
	var tb table
	tb.set("zk-hs", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	w, dialed := recordingWireOf(t, &tb, new(bytes.Buffer), 9*time.Second, "zk-hs:2181")
	h := w.res.hosts
	var firsts []string
	for i := 0; i < 3; i++ {
		name, retry := h.Next()
		if name != "zk-hs:2181" || retry {
			t.Fatalf("Next %d: %q, retry %v; want the name, no pause yet", i, name, retry)
		}
		before := len(*dialed)
		_, _ = w.dialer("tcp", name, time.Second)
		if got := len(*dialed) - before; got != 3 {
			t.Fatalf("attempt %d dialed %d addresses, want all 3", i, got)
		}
		firsts = append(firsts, (*dialed)[before])
	}
	if firsts[0] == firsts[1] || firsts[1] == firsts[2] || firsts[0] == firsts[2] {
		t.Fatalf("each attempt began at %v: want a different address each time", firsts)
	}
	if _, retry := h.Next(); !retry {
		t.Fatal("a fourth attempt with three addresses is not a new round")
	}
	if got := w.hs.bound(w.res.servers()); got != 3*time.Second {
		t.Fatalf("handshake bound %v, want the 9s timeout over 3 addresses", got)
	}

	// After a session was established, the others come first and the same
	// server again only after the pause.
	h.Connected()
	for i := 0; i < 2; i++ {
		if _, retry := h.Next(); retry {
			t.Fatalf("reconnect %d after a session paused", i)
		}
	}
	if _, retry := h.Next(); !retry {
		t.Fatal("the third reconnect attempt with three addresses did not pause")
	}
}

// Names are shuffled, so that clients spread over the servers, and each
// is handed out once a round.
func TestHostsShuffleAndRound(t *testing.T) {
	names := []string{"a:1", "b:1", "c:1", "d:1", "e:1", "f:1"}
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		h := &hosts{cur: -1}
		if err := h.Init(names); err != nil {
			t.Fatal(err)
		}
		var order []string
		for range names {
			n, retry := h.Next()
			if retry {
				t.Fatal("a pause within the first round")
			}
			order = append(order, n)
		}
		if _, retry := h.Next(); !retry {
			t.Fatal("no pause after a round of every name")
		}
		got := strings.Join(order, ",")
		for _, n := range names {
			if strings.Count(got, n) != 1 {
				t.Fatalf("round %v does not hand out each name once", order)
			}
		}
		seen[got] = true
	}
	if len(seen) < 2 {
		t.Fatalf("50 Inits gave one order: %v", seen)
	}
	if err := (&hosts{}).Init(nil); err == nil {
		t.Fatal("Init with no servers succeeded")
	}
}

// A name's first dial starts at a random one of its addresses, so that
// clients of a name with two addresses (or more) spread over them: over
// 64 wires, both addresses of a two-address name come first (the chance
// that 64 fair draws all agree is 2^-63).
func TestNameStartsAtARandomAddress(t *testing.T) {
	var tb table
	tb.set("zk-hs", "127.0.0.2", "127.0.0.3")
	firsts := map[string]int{}
	for i := 0; i < 64; i++ {
		w, dialed := recordingWire(t, &tb, new(bytes.Buffer), "zk-hs:2181")
		name, _ := w.res.hosts.Next()
		_, _ = w.dialer("tcp", name, time.Second)
		if len(*dialed) != 2 {
			t.Fatalf("dialed %v, want both addresses", *dialed)
		}
		firsts[(*dialed)[0]]++
	}
	if len(firsts) != 2 {
		t.Fatalf("64 clients began at %v: want both addresses first now and then", firsts)
	}
}
