package session

import (
	"bytes"
	"slices"
	"sync"
	"time"
)

// sendClock records when packets went out on each connection, for the
// lease deadline: [Session.Confirm] takes the latest packet that went out
// no later than a third of the timeout before an acknowledged write, on
// the connection the write went out on (sentByOn).
type sendClock struct {
	mu  sync.Mutex
	cur *sendRecord // the current connection's
}

// sendRecord is one connection's record, under sendClock.mu.
type sendRecord struct {
	first time.Time   // when the connect request went out
	sent  []time.Time // when packets went out, thinned to one per sendGrain, oldest first
}

// sendGrain thins the record of sent packets: one per sendGrain of the
// session timeout is kept, and what is kept errs early, which only makes
// deadlines earlier.
const sendGrain = 24

// begin starts the record of a new connection, the current one: what
// went out before says nothing of it.
func (s *sendClock) begin() *sendRecord {
	r := &sendRecord{}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	return r
}

func (s *sendClock) current() *sendRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// record records on r that a packet went out at now, with a session timeout
// of timeout, and reports whether it was r's first (the connect request).
func (s *sendClock) record(r *sendRecord, now time.Time, timeout time.Duration) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = r.first.IsZero()
	if first {
		r.first = now
	}
	grain := timeout / sendGrain
	if n := len(r.sent); n == 0 || now.Sub(r.sent[n-1]) >= grain {
		r.sent = append(r.sent, now)
	}
	if timeout > 0 { // forget what no deadline will look at again
		for len(r.sent) > 1 && now.Sub(r.sent[0]) > 2*timeout {
			r.sent = r.sent[1:]
		}
	}
	return first
}

// sentByOn returns when the latest packet that went out no later than t on
// the current connection went out (errs early by up to a grain), or, if none
// did, when the connection's connect request went out; if the current
// connection is the one a request sent at sent went out on (its connect
// request went out no later); else zero. A write acknowledged on an earlier
// connection says nothing of this one's packets, whose touches may never have
// reached the quorum: a process paused between a write's answer and Confirm,
// while a reconnect sent its connect request, would otherwise take that
// request as w (found by make model's authors, reading the code).
func (s *sendClock) sentByOn(sent, t time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.cur
	if r == nil || r.first.IsZero() || r.first.After(sent) {
		return time.Time{}
	}
	at := r.first
	for _, x := range r.sent {
		if x.After(t) {
			break
		}
		at = x
	}
	return at
}

// markers are waits for a packet that carries a marker (a create's path)
// to go out, for the engine's prefetch ([Session.Sent]): a read made once
// the create's packet is written goes out behind it. go-zookeeper writes
// each request in one Write, in the order the requests were made, from
// one goroutine (Conn.sendLoop, sendData), so a request made after the
// channel is closed goes out after that packet.
type markers struct {
	mu    sync.Mutex
	waits []expectation
}

// expectation is a wait for the packet that carries marker to go out.
type expectation struct {
	marker []byte
	sent   chan struct{}
}

// expect returns a channel that is closed once a packet that carries marker
// has been written to a connection, and a function that stops the wait.
func (m *markers) expect(marker string) (sent <-chan struct{}, stop func()) {
	e := expectation{marker: []byte(marker), sent: make(chan struct{})}
	m.mu.Lock()
	m.waits = append(m.waits, e)
	m.mu.Unlock()
	return e.sent, func() { m.forget(e.sent) }
}

func (m *markers) forget(sent chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waits = slices.DeleteFunc(m.waits, func(e expectation) bool { return e.sent == sent })
}

// sawWrite closes the expectations that packet p meets.
func (m *markers) sawWrite(p []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < len(m.waits); {
		if e := m.waits[i]; bytes.Contains(p, e.marker) {
			close(e.sent)
			m.waits = append(m.waits[:i], m.waits[i+1:]...)
			continue
		}
		i++
	}
}
