package session

import (
	"bytes"
	"slices"
	"sync"
	"time"
)

// sendClock records when packets went out on each connection, for the
// lease deadline: [Session.Confirm] takes the latest packet sent a third
// of the timeout before an acknowledged write, or earlier, on the write's
// connection (sentByOn).
type sendClock struct {
	mu  sync.Mutex
	cur *sendRecord // the current connection's
}

// sendRecord is one connection's record, under sendClock.mu.
type sendRecord struct {
	first time.Time   // when the connect request went out
	sent  []time.Time // when packets went out, thinned to one per sendGrain, oldest first
}

// sendGrain thins the record: one packet per sendGrain of the session
// timeout is kept, erring early, which only makes deadlines earlier.
const sendGrain = 24

// begin starts the record of a new current connection: what went out
// before says nothing of it.
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

// record records on r a packet sent at now, and reports whether it was
// r's first (the connect request).
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

// sentByOn returns, if a request sent at sent went out on the current
// connection (its connect request went out no later), when its latest
// packet sent by t went out (early by up to a grain), else its connect
// request; otherwise zero. A write acknowledged on an earlier connection
// says nothing of this one's packets, whose touches may never have reached
// the quorum: a process paused between a write's answer and Confirm, while
// a reconnect sent its connect request, would otherwise take that request
// as w (found by make model's authors, reading the code).
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

// markers are waits for a packet carrying a marker (a create's path) to go
// out, for the engine's prefetch ([Session.Sent]). go-zookeeper writes each
// request in one Write, in the order made, from one goroutine
// (Conn.sendLoop, sendData), so a read made once the channel is closed goes
// out behind the create.
type markers struct {
	mu    sync.Mutex
	waits []expectation
}

type expectation struct {
	marker []byte
	sent   chan struct{}
}

// expect returns a channel closed once a packet carrying marker has been
// written, and a function that stops the wait.
func (m *markers) expect(marker string) (sent <-chan struct{}, stop func()) {
	e := expectation{marker: []byte(marker), sent: make(chan struct{})}
	m.mu.Lock()
	m.waits = append(m.waits, e)
	m.mu.Unlock()
	return e.sent, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.waits = slices.DeleteFunc(m.waits, func(x expectation) bool { return x.sent == e.sent })
	}
}

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
