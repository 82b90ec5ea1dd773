package session

import (
	"bytes"
	"sync"
)

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

// expect returns a channel that is closed once a packet that carries
// marker has been written to a connection, and a function that stops the
// wait.
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
	for i, e := range m.waits {
		if e.sent == sent {
			m.waits = append(m.waits[:i], m.waits[i+1:]...)
			return
		}
	}
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
