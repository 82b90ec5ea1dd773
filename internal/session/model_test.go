package session

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The spin model of the lease deadline (model/lease.pml, `make model`)
// takes its constants from model/params.h. These tests read that file and
// compare it with the code at the model's scale (one unit a millisecond,
// T = 24 units), so that a change in the code that the model does not
// follow fails here, with ZooKeeper nowhere.

// modelUnit is the length of one of the model's time units in these tests.
const modelUnit = time.Millisecond

// modelParams reads the `#define NAME value` lines of model/params.h. A
// value may name an earlier one.
func modelParams(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "model", "params.h"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make(map[string]int64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != "#define" {
			continue
		}
		v, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			named, ok := p[fields[2]]
			if !ok {
				t.Fatalf("params.h: %s is %q, neither an integer nor an earlier name", fields[1], fields[2])
			}
			v = named
		}
		p[fields[1]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"T", "THIRD", "QUARTER", "MARGIN", "RETRY", "RECV", "CPING", "TICK", "LPING", "PDELAY", "DRIFT"} {
		if _, ok := p[name]; !ok {
			t.Fatalf("params.h defines no %s", name)
		}
	}
	return p
}

func units(n int64) time.Duration { return time.Duration(n) * modelUnit }

// The fractions of T the model uses are the code's.
func TestModelFractions(t *testing.T) {
	p := modelParams(t)
	tt := units(p["T"])
	// The deadline keeps T - horizon(T) in hand; the model keeps that
	// rounded down to whole units, which makes its deadline later, never
	// earlier, than the code's.
	if margin := tt - horizon(tt); units(p["MARGIN"]) > margin || units(p["MARGIN"]+1) <= margin {
		t.Errorf("params.h MARGIN = %d units, but the code keeps %v of T = %v in hand (horizon): want it rounded down", p["MARGIN"], margin, tt)
	}
	if units(p["DRIFT"]) > tt-horizon(tt) {
		t.Errorf("params.h DRIFT = %d units exceeds the margin the code keeps, %v", p["DRIFT"], tt-horizon(tt))
	}
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct{ confirmed, deadline int64 }{
		{0, 23}, {0, 10}, {40, 100}, {40, 50}, {40, 54}, {7, 0},
	} {
		got := nextConfirmation(t0.Add(units(tc.confirmed)), t0.Add(units(tc.deadline)), tt)
		want := tc.confirmed + p["THIRD"]
		if d := tc.deadline - p["QUARTER"]; d < want {
			want = d
		}
		if !got.Equal(t0.Add(units(want))) {
			t.Errorf("nextConfirmation(confirmed %d, deadline %d) = %v units, the model's min(confirmed+THIRD, deadline-QUARTER) = %d",
				tc.confirmed, tc.deadline, int64(got.Sub(t0)/modelUnit), want)
		}
	}
	for name, frac := range map[string]time.Duration{"THIRD": tt / 3, "QUARTER": tt / 4, "RETRY": tt / 12, "PDELAY": tt / 12} {
		if units(p[name]) != frac {
			t.Errorf("params.h %s = %d units, want %v of T = %v", name, p[name], frac, tt)
		}
	}
	// ZooKeeper: minSessionTimeout is two ticks, and the leader pings every
	// half tick (Leader.lead).
	if p["T"] != 2*p["TICK"] || p["LPING"] != p["TICK"]/2 {
		t.Errorf("params.h: T = %d, TICK = %d, LPING = %d: want T = 2*TICK, LPING = TICK/2", p["T"], p["TICK"], p["LPING"])
	}
}

// The keeper's stall and retry, inside keeper.confirm and
// keeper.confirmation, are the model's THIRD and RETRY: read off the source,
// as nothing else shows them.
func TestModelKeeperSource(t *testing.T) {
	p := modelParams(t)
	if p["THIRD"]*3 != p["T"] || p["RETRY"]*12 != p["T"] {
		t.Fatalf("params.h: THIRD = %d, RETRY = %d: want T/3 and T/12 of T = %d", p["THIRD"], p["RETRY"], p["T"])
	}
	src, err := os.ReadFile("keeper.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"stall := time.NewTimer(t / 3)",              // keeper.confirm: the model's THIRD stall
		"k.retryAt = time.Now().Add(t / 12)",         // after a failed confirmation: RETRY
		"w := c.wire.sentByOn(sent, sent.Add(-t/3))", // Session.Confirm's anchor: sentBy(isent - THIRD)
		"next := confirmed.Add(t / 3)",               // nextConfirmation: confirmed + THIRD
		"d := deadline.Add(-t / 4); d.Before(n",      // nextConfirmation: deadline - QUARTER
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("keeper.go no longer contains %q, which model/lease.pml follows: change the model (and params.h) with it", want)
		}
	}
}

// go-zookeeper's ping interval and read timeout are fractions of the
// session timeout in the version the model follows (conn.go,
// setTimeouts: recvTimeout = T*2/3, pingInterval = recvTimeout/2).
func TestModelGoZookeeper(t *testing.T) {
	p := modelParams(t)
	if p["RECV"] != p["T"]*2/3 || p["CPING"] != p["RECV"]/2 {
		t.Errorf("params.h: RECV = %d, CPING = %d: want T*2/3 and RECV/2 of T = %d", p["RECV"], p["CPING"], p["T"])
	}
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "github.com/go-zookeeper/zk v1.0.4\n") {
		t.Errorf("go.mod no longer requires go-zookeeper v1.0.4, whose setTimeouts model/params.h follows (RECV, CPING): check them against the new version's conn.go and change this test")
	}
}

// modelConn is a Backend with a session and nothing else: Confirm asks
// for no more.
type modelConn struct {
	Backend
	sid int64
}

func (m modelConn) SessionID() int64 { return m.sid }

// Session.Confirm computes the model's deadline: sentBy(sent - THIRD) +
// T - MARGIN, up to the model's rounding of the margin (the model's is at
// most a unit later).
func TestModelConfirm(t *testing.T) {
	p := modelParams(t)
	tt := units(p["T"])
	t0 := time.Now()
	at := func(u int64) time.Time { return t0.Add(units(u)) }
	for _, tc := range []struct {
		name     string
		packets  []int64 // sent, in units; the first is the connect request
		sent     int64
		wantW    int64
		deadline int64 // the model's: wantW + T - MARGIN
	}{
		{"steady", []int64{0, 8, 13, 16, 21}, 21, 13, 13 + p["T"] - p["MARGIN"]},
		{"anchor exactly T/3 before", []int64{0, 8, 16, 24}, 24, 16, 16 + p["T"] - p["MARGIN"]},
		{"younger connection", []int64{0, 4}, 5, 0, 0 + p["T"] - p["MARGIN"]},
	} {
		w := testWire(Options{})
		w.hs.grant(tt)
		r := w.clock.begin()
		r.first = at(tc.packets[0])
		for _, u := range tc.packets {
			r.sent = append(r.sent, at(u))
		}
		c := &Session{wire: w, zc: NewConn(modelConn{sid: 7}), confirmedCh: make(chan struct{})}
		c.Confirm(at(tc.sent), 7)
		got := c.deadline
		model := at(tc.deadline)
		if got.After(model) || !got.After(model.Add(-modelUnit)) {
			t.Errorf("%s: Confirm(sent at %d) set the deadline to %v units; the model's is %d (w = %d), and may only be up to a unit later",
				tc.name, tc.sent, float64(got.Sub(t0))/float64(modelUnit), tc.deadline, tc.wantW)
		}
		if !c.confirmed.Equal(at(tc.sent)) {
			t.Errorf("%s: confirmed = %v, want the write's send time", tc.name, c.confirmed.Sub(t0))
		}
	}
}
