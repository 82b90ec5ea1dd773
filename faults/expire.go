package faults

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
)

// wire is what a [Faults] learned from the servers' answers to its client's
// handshakes (ConnectResponse): the session, its password, where it lives.
// Guarded by Faults.mu.
type wire struct {
	latest  wireSession   // the last session a server granted, as soon as it is on its way
	session wireSession   // the last session a server granted, once the client has read it
	seq     uint64        // handshakes the client has read
	refused uint64        // seq of the last handshake that refused an old session
	changed chan struct{} // closed at the next handshake; nil until someone waits
	servers []string      // every server the client dialed, in order
}

// dialed records a server the client dialed. Faults.mu is held.
func (w *wire) dialed(addr string) {
	if !slices.Contains(w.servers, addr) {
		w.servers = append(w.servers, addr)
	}
}

type wireSession struct {
	id      int64
	passwd  []byte
	timeout time.Duration
	addr    string // the server that granted it
	seq     uint64 // the handshake that granted it
}

// handshake collects the first packet a server sends on a connection, its
// ConnectResponse: int32 length, int32 protocolVersion, int32 timeOut,
// int64 sessionId, int32 length + password bytes, and, from servers of 3.4
// on, a readOnly byte. Only the writer to the client touches it.
type handshake struct {
	buf     []byte
	done    bool
	replied bool // a reply followed it (see faultConn.awaitWatches)
}

// lost gives up on the connection's handshake: part of it never reached the
// client, which will not use this connection.
func (h *handshake) lost() { h.done, h.buf = true, nil }

// observe reads the handshake out of the bytes about to go to the client.
// It records a granted session at once, so that it is known before the
// client can act on it, and returns, for a completed handshake, what to
// call once the client has read it.
func (c *faultConn) observe(p []byte) (read func()) {
	h := &c.hs
	if h.done {
		return nil
	}
	h.buf = append(h.buf, p...)
	if len(h.buf) < 4 {
		return nil
	}
	n := int(binary.BigEndian.Uint32(h.buf))
	if n < 20 || n > 1024 {
		h.lost() // not a ConnectResponse
		return nil
	}
	if len(h.buf) < 4+n {
		return nil
	}
	b := h.buf[4 : 4+n]
	h.lost()
	id := int64(binary.BigEndian.Uint64(b[8:16]))
	timeout := time.Duration(int32(binary.BigEndian.Uint32(b[4:8]))) * time.Millisecond
	plen := int(int32(binary.BigEndian.Uint32(b[16:20])))
	if plen < 0 || 20+plen > len(b) {
		return nil
	}
	s := wireSession{
		id:      id,
		passwd:  append([]byte(nil), b[20:20+plen]...),
		timeout: timeout,
		addr:    c.addr,
	}
	if id != 0 {
		c.f.mu.Lock()
		c.f.wire.latest = s
		c.f.mu.Unlock()
	}
	return func() { c.f.sawHandshake(s) }
}

// sawHandshake records a handshake the client has read.
func (f *Faults) sawHandshake(s wireSession) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &f.wire
	w.seq++
	if s.id == 0 {
		// The server refused the session the client asked for: it has
		// expired, and go-zookeeper now reports StateExpired.
		w.refused = w.seq
	} else {
		s.seq = w.seq
		w.session = s
	}
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// SessionID returns the id of the last session a server granted the client
// through f, read from the server's answer to the client's handshake, or 0
// if there has been none. It changes once the client has a new session
// after an expiry.
func (f *Faults) SessionID() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wire.latest.id
}

// current returns the client's session and how many handshakes f has seen.
func (f *Faults) current() (wireSession, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wire.latest.id == 0 {
		return wireSession{}, 0, errors.New("faults: no session seen yet: connect the client through Faults.Dialer first")
	}
	return f.wire.latest, f.wire.seq, nil
}

// KillSession ends the client's current session on the server, as Apache
// Curator's KillSession does, and returns once the server has closed it:
// its ephemeral nodes are deleted and their watches have fired. It opens a
// connection of its own to the server that granted the session (not through
// f, so a partition does not stop it), presents the session's id and
// password (which f read from the server's handshake), and sends
// closeSession. The server drops the client's own connection as it hands
// the session over, and refuses the session when the client reconnects:
// the client sees zk.StateDisconnected, then zk.StateExpired, then a new
// session. If the session had ended already, KillSession returns nil.
//
// A server of an ensemble that is electing a leader, or restarting, closes
// connections without answering, and a paused one never answers:
// KillSession gives each server two seconds, asks the other servers the
// client has dialed, and tries again every 100ms, for up to ten seconds or
// until ctx is done, and then returns the last error.
//
// See [Faults.ExpireSession] for how this differs from a real expiry.
func (f *Faults) KillSession(ctx context.Context) error {
	s, _, err := f.current()
	if err != nil {
		return err
	}
	return f.kill(ctx, s)
}

// kill ends session s on any server that will, trying the one that granted
// it first.
func (f *Faults) kill(ctx context.Context, s wireSession) error {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	f.mu.Lock()
	servers := append([]string{s.addr}, slices.DeleteFunc(slices.Clone(f.wire.servers),
		func(a string) bool { return a == s.addr })...)
	f.mu.Unlock()
	var last error
	for {
		for _, addr := range servers {
			on := s
			on.addr = addr
			// A paused server accepts connections and never answers.
			actx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
			last = killSession(actx, f.dial, on)
			cancelAttempt()
			if last == nil {
				return nil
			}
			if ctx.Err() != nil {
				return last
			}
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
	}
}

// ExpireSession expires the client's session with [Faults.KillSession] and
// then waits until the client has been told: until it has read a server's
// refusal of the old session (it reports zk.StateExpired as it does) or has
// a new one. With go-zookeeper that takes about a second, the pause it makes
// before reconnecting to a server list it has been through, whatever the
// session timeout. ctx bounds the wait; when it ends first, the session has
// been killed all the same if KillSession succeeded.
//
// The client can only be told while it can reach a server: for a client that
// is partitioned, use KillSession, then [Faults.Heal].
//
// A test has three ways to expire a session. Each ends it on the server as
// production would (its ephemeral nodes are deleted, their watches fire,
// others can take its locks); they differ in what the client lives through:
//
//   - ExpireSession ends the session from a second connection, as Apache
//     Curator's KillSession does: one round trip, about a second until the
//     client knows, nothing else touched. But the client goes through no
//     silence first. It is disconnected and told of the expiry in one go,
//     and its nodes can be gone, and its locks taken by others, a moment
//     before it has heard anything, which a real expiry never does (a
//     client notices the silence after two thirds of its timeout, the
//     server waits for all of it). To keep that order, cut the client off
//     first, wait until it has noticed, then kill:
//     Partition, Drop, (wait), KillSession, Heal.
//   - [Faults.PartitionUntilExpired] cuts the client off for twice its
//     session timeout: the client times out, the server expires the
//     session, and the client is told once the partition heals. That is the
//     sequence of a real network failure. It is slower (twice the session
//     timeout, so tests use short timeouts) and also touches only that
//     client.
//   - [Container.Pause] for longer than the session timeout expires the
//     sessions of every client of that server (in an [Ensemble], of every
//     client, once a quorum is paused): the way to test a whole fleet
//     losing ZooKeeper. It needs a server of the test's own.
func (f *Faults) ExpireSession(ctx context.Context) error {
	s, seq, err := f.current()
	if err != nil {
		return err
	}
	if err := f.kill(ctx, s); err != nil {
		return err
	}
	// The client may resume the session on another server of an ensemble
	// between the takeover and the close: that server drops it as soon as
	// it applies the close, so only a refusal or a new session count.
	return f.awaitTold(ctx, s.id, seq, false)
}

// PartitionUntilExpired expires the client's session the way a network
// failure does: it partitions the client ([Faults.Partition]) for twice the
// session timeout the server granted, which outlasts the server's timeout
// whatever its tick (ZooKeeper expires a session between one timeout and
// one timeout plus two ticks after it last heard from it, and a timeout is
// at least two ticks). Then it heals the partition and waits until the
// client has been told its session expired, as [Faults.ExpireSession] does.
// On the way, the client misses its heartbeats and reports
// zk.StateDisconnected after two thirds of its timeout, before the server
// expires the session: a lock holder learns it may have lost its lock
// before anyone else can take it, as in production.
//
// It returns an error if the client's session survived, or if someone
// healed the partition before the time was up. If ctx ends during the
// partition, the partition is healed and ctx's error returned.
func (f *Faults) PartitionUntilExpired(ctx context.Context) error {
	s, _, err := f.current()
	if err != nil {
		return err
	}
	f.Partition()
	t := time.NewTimer(2 * s.timeout)
	select {
	case <-ctx.Done():
		t.Stop()
		f.Heal()
		return fmt.Errorf("faults: partition until session 0x%x expires: %w", s.id, ctx.Err())
	case <-t.C:
	}
	f.mu.Lock()
	seq, healed := f.wire.seq, !f.partitioned
	f.mu.Unlock()
	if healed {
		return fmt.Errorf("faults: partition until session 0x%x expires: healed early, the session may have survived", s.id)
	}
	f.Heal()
	return f.awaitTold(ctx, s.id, seq, true)
}

// awaitTold waits for a handshake after seq that tells the client session id
// is over: a refusal, or another session. If resumeFails, a handshake that
// resumes id means the session survived.
func (f *Faults) awaitTold(ctx context.Context, id int64, seq uint64, resumeFails bool) error {
	for {
		f.mu.Lock()
		w := &f.wire
		refused := w.refused > seq
		other := w.session.seq > seq && w.session.id != id
		survived := resumeFails && w.session.seq > seq && w.session.id == id
		closed := f.closed
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		f.mu.Unlock()
		switch {
		case refused || other:
			return nil
		case survived:
			return fmt.Errorf("faults: session 0x%x did not expire: the client resumed it", id)
		case closed:
			return fmt.Errorf("faults: wait for the client to hear that session 0x%x expired: %w", id, net.ErrClosed)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faults: wait for the client to hear that session 0x%x expired: %w", id, ctx.Err())
		case <-changed:
		}
	}
}

const (
	opCloseSession int32 = -11
	closeXid       int32 = 1
	maxPacket            = 1 << 20
	killTimeout          = 10 * time.Second
)

// killSession takes session s over on a connection of its own and closes
// it: a ConnectRequest with the session's id and password (the server
// drops the connection the session had), then closeSession, whose reply
// comes once the session's end is committed.
func killSession(ctx context.Context, dial zk.Dialer, s wireSession) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("faults: kill session 0x%x on %s: %w", s.id, s.addr, err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	conn, err := dial("tcp", s.addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
	}()

	resumed, err := takeOver(conn, s)
	if err != nil || !resumed {
		return err
	}
	return closeSession(conn)
}

// takeOver sends a ConnectRequest for session s on conn; resumed is false
// if the server refused it (the session is over already).
func takeOver(conn net.Conn, s wireSession) (resumed bool, err error) {
	be := binary.BigEndian
	req := make([]byte, 4, 64)
	req = be.AppendUint32(req, 0)                                  // protocolVersion
	req = be.AppendUint64(req, 0)                                  // lastZxidSeen
	req = be.AppendUint32(req, uint32(s.timeout/time.Millisecond)) // timeOut
	req = be.AppendUint64(req, uint64(s.id))                       // sessionId
	req = be.AppendUint32(req, uint32(len(s.passwd)))              // passwd
	req = append(req, s.passwd...)
	req = append(req, 0) // readOnly: false
	be.PutUint32(req, uint32(len(req)-4))
	if _, err := conn.Write(req); err != nil {
		return false, err
	}
	resp, err := readPacket(conn)
	if err != nil {
		return false, fmt.Errorf("read handshake: %w", err)
	}
	if len(resp) < 16 {
		return false, fmt.Errorf("short handshake of %d bytes", len(resp))
	}
	return int64(be.Uint64(resp[8:16])) != 0, nil
}

// closeSession sends closeSession on conn and waits for its reply, which
// comes once the session's end is committed.
func closeSession(conn net.Conn) error {
	be := binary.BigEndian
	closeReq := be.AppendUint32(nil, 8)
	closeReq = be.AppendUint32(closeReq, uint32(closeXid))
	op := opCloseSession
	closeReq = be.AppendUint32(closeReq, uint32(op))
	if _, err := conn.Write(closeReq); err != nil {
		return err
	}
	for {
		reply, err := readPacket(conn)
		if err != nil {
			return fmt.Errorf("read closeSession reply: %w", err)
		}
		if len(reply) < 16 {
			return fmt.Errorf("short reply of %d bytes", len(reply))
		}
		if int32(be.Uint32(reply[:4])) != closeXid {
			continue // a notification or a ping reply
		}
		if code := int32(be.Uint32(reply[12:16])); code != 0 {
			return fmt.Errorf("closeSession failed with ZooKeeper error code %d", code)
		}
		return nil
	}
}

// readPacket reads one length-prefixed packet.
func readPacket(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := int(int32(binary.BigEndian.Uint32(n[:])))
	if size < 0 || size > maxPacket {
		return nil, fmt.Errorf("packet length %d out of range", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
