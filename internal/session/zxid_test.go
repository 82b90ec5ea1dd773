package session

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// writesConn serves data to reads, at most chunk bytes at a time, and
// records what is written to it.
type writesConn struct {
	bytesConn
	wrote [][]byte
}

func (w *writesConn) Write(p []byte) (int, error) {
	w.wrote = append(w.wrote, append([]byte(nil), p...))
	return len(p), nil
}

func (w *writesConn) Close() error { return nil }

// connectRequest is go-zookeeper's connect request: protocol version 0,
// LastZxidSeen, a timeout, the session id, a 16-byte password.
func connectRequest(lastZxid, session int64) []byte {
	b := make([]byte, 48)
	binary.BigEndian.PutUint32(b[0:], 44)
	binary.BigEndian.PutUint64(b[8:], uint64(lastZxid))
	binary.BigEndian.PutUint32(b[16:], 4000)
	binary.BigEndian.PutUint64(b[20:], uint64(session))
	binary.BigEndian.PutUint32(b[28:], 16)
	return b
}

// setWatchesRequest is a setWatches request with relativeZxid and no
// watches.
func setWatchesRequest(xid int32, relativeZxid int64) []byte {
	b := make([]byte, 4+4+4+8+3*4)
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:], uint32(xid))
	binary.BigEndian.PutUint32(b[8:], opSetWatches)
	binary.BigEndian.PutUint64(b[12:], uint64(relativeZxid))
	return b
}

// readWhole reads one packet from c as go-zookeeper's recvLoop does, and
// returns it, length first.
func readWhole(t *testing.T, c *wireConn) []byte {
	t.Helper()
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	return append(n[:], body...)
}

// go-zookeeper gets every reply whose xid is not negative with a zxid of
// 0, every byte of it (the first reply's zxid has none zero), however the
// reads split it, so that its recvLoop never writes
// Conn.lastZxid; the wire keeps the zxid, per session. Watch events, pings
// and the connect response pass as sent.
func TestReplyZxidsKeptByTheWire(t *testing.T) {
	event := reply(-1, 0x7ff, 0)
	for _, chunk := range []int{1, 3, 7, 64} {
		w := testWire(Options{})
		sent := [][]byte{connectResponse(4000, 55), reply(7, 0x0102030405060708, 0), event, reply(-2, 0x901, 0), reply(8, 0x902, -101), reply(9, 0, 0)}
		var data []byte
		for _, p := range sent {
			data = append(data, p...)
		}
		nc := &writesConn{bytesConn: bytesConn{data: data, chunk: chunk}}
		c := w.newConn(nc, "zk1:2181")
		sendConnect(t, c)
		for i, want := range sent {
			got := readWhole(t, c)
			if i > 0 && int32(binary.BigEndian.Uint32(want[4:8])) >= 0 {
				want = append([]byte(nil), want...)
				binary.BigEndian.PutUint64(want[8:16], 0)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("chunk %d, packet %d: go-zookeeper got % x, want % x", chunk, i, got, want)
			}
		}
		if w.zxid.last != (lastZxid{55, 0x902}) {
			t.Fatalf("chunk %d: the wire keeps %+v, want session 55 at 0x902 (the last reply with a zxid)", chunk, w.zxid.last)
		}
	}
}

// A connect request goes out with the last zxid the wire handed on in the
// session it resumes; one for a new session with 0. A setWatches request
// goes out with the zxid its connection started from, not a later one.
// The caller's buffer is left as it was.
func TestRequestsCarryTheKeptZxid(t *testing.T) {
	w := testWire(Options{})
	w.zxid.last = lastZxid{55, 0x900}
	nc := &writesConn{bytesConn: bytesConn{data: append(connectResponse(4000, 55), reply(3, 0x950, 0)...), chunk: 64}}
	c := w.newConn(nc, "zk1:2181")
	req := connectRequest(0, 55)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	if got := int64(binary.BigEndian.Uint64(nc.wrote[0][8:16])); got != 0x900 {
		t.Fatalf("the connect request resuming session 55 carries LastZxidSeen %#x, want 0x900", got)
	}
	if !bytes.Equal(req, connectRequest(0, 55)) {
		t.Fatal("the caller's connect request was changed")
	}
	readWhole(t, c) // the connect response
	readWhole(t, c) // a reply at 0x950: the wire is there now
	if _, err := c.Write(setWatchesRequest(4, 0)); err != nil {
		t.Fatal(err)
	}
	if got := int64(binary.BigEndian.Uint64(nc.wrote[1][12:20])); got != 0x900 {
		t.Fatalf("setWatches carries RelativeZxid %#x, want 0x900, where its connection started", got)
	}
	if _, err := c.Write(request(5, opExists, "/a")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nc.wrote[2], request(5, opExists, "/a")) {
		t.Fatal("another request was changed")
	}

	for _, tc := range []struct {
		session int64
		want    int64
	}{{55, 0x950}, {0, 0}, {77, 0}} {
		next := &writesConn{}
		c := w.newConn(next, "zk1:2181")
		if _, err := c.Write(connectRequest(0, tc.session)); err != nil {
			t.Fatal(err)
		}
		if got := int64(binary.BigEndian.Uint64(next.wrote[0][8:16])); got != tc.want {
			t.Fatalf("a connect request for session %d carries LastZxidSeen %#x, want %#x", tc.session, got, tc.want)
		}
	}
	// Whatever the wire kept, a new session starts from 0.
	w.zxid.last = lastZxid{0, 0x990}
	next := &writesConn{}
	if _, err := w.newConn(next, "zk1:2181").Write(connectRequest(0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := int64(binary.BigEndian.Uint64(next.wrote[0][8:16])); got != 0 {
		t.Fatalf("a connect request for a new session carries LastZxidSeen %#x, want 0", got)
	}
}

// A connect response for another session starts the kept zxid again from
// 0, as go-zookeeper's own lastZxid starts (a new Conn) or is reset
// (authenticate, on an expired session: session 0); one that resumes the
// session keeps it, so that the next connect request still keeps the
// client off servers behind what it has seen.
func TestNewSessionStartsFromZero(t *testing.T) {
	w := testWire(Options{})
	w.zxid.last = lastZxid{55, 0x900}
	c := w.newConn(&writesConn{bytesConn: bytesConn{data: connectResponse(4000, 55), chunk: 64}}, "zk1:2181")
	sendConnect(t, c)
	readWhole(t, c)
	if w.zxid.last != (lastZxid{55, 0x900}) {
		t.Fatalf("after a connect response resuming session 55 the wire keeps %+v, want 0x900 still", w.zxid.last)
	}

	for _, session := range []int64{77, 0} {
		w := testWire(Options{})
		w.zxid.last = lastZxid{55, 0x900}
		c := w.newConn(&writesConn{bytesConn: bytesConn{data: connectResponse(4000, session), chunk: 64}}, "zk1:2181")
		sendConnect(t, c)
		readWhole(t, c)
		if w.zxid.last != (lastZxid{session, 0}) {
			t.Fatalf("after a connect response for session %d the wire keeps %+v", session, w.zxid.last)
		}
	}
}

// The wire tells whether the server puts a notification's zxid in its
// header (ZooKeeper 3.9) from the notifications it read: unknown before
// one, no while they carry ZooKeeper 3.8's -1, yes once one carried a zxid,
// and still yes after a -1 (3.9's setWatches events); replies and pings say
// nothing of it.
func TestNotificationZxidsFollowTheNotifications(t *testing.T) {
	w := testWire(Options{})
	s := &Session{wire: w}
	sent := [][]byte{connectResponse(4000, 55), reply(7, 0x10, 0), reply(-2, 0, 0), reply(-1, -1, 0), reply(-1, -1, 0), reply(8, 0x11, 0), reply(-1, 0x12, 0), reply(-1, -1, 0)}
	want := []struct{ carries, known bool }{{false, false}, {false, false}, {false, false}, {false, true}, {false, true}, {false, true}, {true, true}, {true, true}}
	var data []byte
	for _, p := range sent {
		data = append(data, p...)
	}
	c := w.newConn(&writesConn{bytesConn: bytesConn{data: data, chunk: 5}}, "zk1:2181")
	sendConnect(t, c)
	for i := range sent {
		readWhole(t, c)
		if carries, known := s.NotificationZxids(); carries != want[i].carries || known != want[i].known {
			t.Fatalf("after packet %d: carries %v, known %v; want %+v", i, carries, known, want[i])
		}
	}
}

// notification is a watch's notification: xid -1, zxid (ZooKeeper 3.9's
// txn zxid, -1 before), then a WatcherEvent (type, state 3, path).
func notification(zxid int64, typ int32, path string) []byte {
	b := make([]byte, 4+16+12+len(path))
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:], 0xffffffff)
	binary.BigEndian.PutUint64(b[8:], uint64(zxid))
	binary.BigEndian.PutUint32(b[20:], uint32(typ))
	binary.BigEndian.PutUint32(b[24:], 3)
	binary.BigEndian.PutUint32(b[28:], uint32(len(path)))
	copy(b[32:], path)
	return b
}

// A NodeCreated notification's zxid is kept for its path, once, when the
// server sends one (a grant's: the handed-over lease's token); -1 (3.8)
// keeps nothing, and neither does another event type.
func TestCreatedZxidsKeptFromNotifications(t *testing.T) {
	w := testWire(Options{})
	s := &Session{wire: w}
	const nodeCreated, nodeDeleted = 1, 2
	sent := [][]byte{connectResponse(4000, 55),
		notification(0x7f1, nodeCreated, "/l/_g_0000000001_"),
		notification(-1, nodeCreated, "/l/_g_0000000002_"),
		notification(0x7f3, nodeDeleted, "/l/_g_0000000003_")}
	var data []byte
	for _, p := range sent {
		data = append(data, p...)
	}
	c := w.newConn(&writesConn{bytesConn: bytesConn{data: data, chunk: 3}}, "zk1:2181")
	sendConnect(t, c)
	for range sent {
		readWhole(t, c)
	}
	for _, tc := range []struct {
		path string
		want int64
	}{{"/l/_g_0000000001_", 0x7f1}, {"/l/_g_0000000001_", 0}, {"/l/_g_0000000002_", 0}, {"/l/_g_0000000003_", 0}} {
		if got := s.CreatedZxid(tc.path); got != tc.want {
			t.Fatalf("CreatedZxid(%s) = %#x, want %#x", tc.path, got, tc.want)
		}
	}
}
