package zktest

import (
	"encoding/binary"
	"io"
	"net"
)

// SwapSessions makes the server behind the Forwarder one that hands out a
// new session on reconnect, as ClickHouse Keeper may (ClickHouse#116690,
// #44571), where ZooKeeper itself resumes the session or declares it
// expired. While on, a connect request that names a session (a client's
// reconnect) is passed on asking for a new one (session id 0, password
// zeroed): the client is given a session other than the one it had, and
// hears of no expiry. Its old session lives on at the server, with its
// ephemeral nodes, until its timeout passes. Connections already through
// are untouched: [Forwarder.Drop] makes the clients reconnect. Off (the
// default), connect requests pass as they are.
//
// A client that checks nothing (go-zookeeper, the Java client, kazoo) goes
// on in the new session, its ephemeral nodes left to the old one; zklock's
// Client ends every lease and wait of the old session with
// zklock.ErrSessionReplaced.
func (f *Forwarder) SwapSessions(on bool) { f.swapping.Store(on) }

// Swapped returns how many connect requests [Forwarder.SwapSessions] has
// rewritten: how many sessions the clients were given in place of theirs.
func (f *Forwarder) Swapped() int { return int(f.swaps.Load()) }

// Drop closes every connection through the Forwarder, both ends, and goes
// on listening at the same address: its clients see the connection reset
// and reconnect, as after a server's restart that keeps sessions.
func (f *Forwarder) Drop() {
	f.mu.Lock()
	conns := f.conns
	f.conns = make(map[net.Conn]bool)
	f.mu.Unlock()
	closeConns(conns)
}

// maxConnect bounds the connect request a Forwarder rewrites: ZooKeeper's
// is under 64 bytes (its password is 16).
const maxConnect = 4096

// upstream copies the client's bytes on c to the server's connection up
// until either ends, then closes both. While the Forwarder swaps sessions,
// the first packet, a connect request, is rewritten to ask for a new
// session.
func (f *Forwarder) upstream(up, c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	defer up.Close()
	if f.swapping.Load() {
		first, err := readConnect(c)
		if askNewSession(first) {
			f.swaps.Add(1)
		}
		if _, werr := up.Write(first); werr != nil || err != nil {
			return
		}
	}
	_, _ = io.Copy(up, c)
}

// readConnect reads the first packet of a connection, its length
// included: all of it if its length is that of a connect request, else
// only the length, to be passed on as it is.
func readConnect(r io.Reader) ([]byte, error) {
	b := make([]byte, 4, 64)
	if n, err := io.ReadFull(r, b); err != nil {
		return b[:n], err
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	if size < connectMin || size > maxConnect {
		return b, nil // not a ZooKeeper client's: bytes pass as they come
	}
	b = append(b, make([]byte, size)...)
	n, err := io.ReadFull(r, b[4:])
	return b[:4+n], err
}

// The connect request, after its int32 length: int32 protocolVersion,
// int64 lastZxidSeen, int32 timeOut, int64 sessionId, int32 length +
// password bytes, and, from 3.4 on, a readOnly byte.
const (
	sessionAt  = 4 + 4 + 8 + 4     // the sessionId's offset in the frame
	passwdAt   = sessionAt + 8     // the password's length's
	connectMin = 4 + 8 + 4 + 8 + 4 // the shortest request, without its length
)

// askNewSession rewrites a connect request frame to ask for a new session
// if it names one: session id 0, password zeroed; the server then makes a
// session (ZooKeeperServer.processConnectRequest: a sessionId of 0 means
// createSession). It reports whether it rewrote it.
func askNewSession(frame []byte) bool {
	if len(frame) < passwdAt+4 || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		return false
	}
	be := binary.BigEndian
	if be.Uint64(frame[sessionAt:]) == 0 {
		return false // a first connect, or one after an expiry: new already
	}
	be.PutUint64(frame[sessionAt:], 0)
	n := int(int32(be.Uint32(frame[passwdAt:])))
	if n > 0 && passwdAt+4+n <= len(frame) {
		clear(frame[passwdAt+4 : passwdAt+4+n])
	}
	return true
}
