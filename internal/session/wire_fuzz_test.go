package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// serverConn is the client's end of a net.Pipe whose other end plays the
// server: reads block as on a socket and fail once the connection is
// closed; writes (the connect request, requests) go nowhere.
type serverConn struct{ net.Conn }

func (serverConn) Write(p []byte) (int, error) { return len(p), nil }

// The modes of FuzzWireReader's connection, as bits of its mode byte.
const (
	modeArmed     = 1 << iota // the anchor is armed in the session the connect response names: gated
	modeSetWatch              // a setWatches request went out first: the gate is open
	modeWatchReqs             // watch requests (xids 1 to 3) and the anchor's (xid 4) are in flight
	modeGiven                 // the keeper gave the anchor up in that session
)

// hangBound is how long the reader may take once the server has hung up.
const hangBound = 10 * time.Second

// FuzzWireReader plays a server that sends any bytes, in reads of any
// size, to a connection of the wire, read as go-zookeeper's recvLoop
// reads (a 4-byte length, then that many bytes), in each state the wire
// can be in (gated, with setWatches sent first or while replies come;
// watchful, with watch requests and the anchor's in flight). Once the
// server has sent everything and hung up, the reader must end by itself,
// with the server's hang-up, the first-watch rule's close or a bad frame's;
// it never panics; what it gets is a prefix of what the server sent, all
// of it unless the wire closed the connection; and the wire's count of
// where a packet starts agrees with the server's framing. A frame that cannot be one (shorter
// than the 16-byte header every reply and connect response has, or longer
// than a jute int can say) ends the connection with an error before
// go-zookeeper gets its body.
func FuzzWireReader(f *testing.F) {
	var valid []byte
	valid = append(valid, connectResponse(4000, 55)...)
	valid = append(valid, reply(1, 900, 0)...)
	valid = append(valid, reply(4, 901, zkNoNodeCode)...)
	valid = append(valid, reply(-2, 0, 0)...)
	valid = append(valid, reply(5, 902, 0)...)
	event := []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 2, '/', 'a'}
	binary.BigEndian.PutUint32(event, uint32(len(event)-4))
	valid = append(valid, event...)
	for mode := byte(0); mode < 16; mode++ {
		f.Add(mode, uint16(7), valid)
	}
	f.Add(byte(modeArmed), uint16(1), connectResponse(1<<30, 55))
	f.Add(byte(modeArmed), uint16(3), append(connectResponse(-1, 55), reply(1, 900, 0)...))
	f.Add(byte(0), uint16(4), []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add(byte(0), uint16(64), append(connectResponse(4000, 55), 0, 0, 0, 0, 0, 0, 0, 16))
	f.Add(byte(modeWatchReqs), uint16(5), append(connectResponse(4000, 55), reply(2, 1, zkNoNodeCode)[:9]...))
	f.Add(byte(0), uint16(1), []byte{})

	f.Fuzz(func(t *testing.T, mode byte, chunk uint16, in []byte) {
		client, server := net.Pipe()
		w := &wire{anchor: newAnchor(), requested: time.Minute}
		c := newWireConn(serverConn{client}, w)
		w.cur = c
		// The fuzzing engine bounds no input's time: a hang anywhere
		// (and a t.Fatal would run into it) crashes the worker, which
		// keeps the input.
		watchdog := time.AfterFunc(2*hangBound, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("mode %#x: hung for %v\n%s", mode, 2*hangBound, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		var session int64
		if len(in) >= 20 {
			session = int64(binary.BigEndian.Uint64(in[12:20]))
		}
		if mode&modeArmed != 0 {
			w.anchor.armed = session
		}
		if mode&modeGiven != 0 {
			w.anchor.given = session
		}
		if mode&modeWatchReqs != 0 {
			c.watchReqs = []watchReq{{1, opGetData}, {2, opExists}, {3, opGetChildren2}}
			w.anchor.xid, w.anchor.on = 4, c
		}
		if _, err := c.Write(make([]byte, 48)); err != nil { // the connect request
			t.Fatal(err)
		}
		if mode&modeSetWatch != 0 {
			if _, err := c.Write(request(6, opSetWatches, "")); err != nil {
				t.Fatal(err)
			}
		}

		sent := make(chan struct{})
		go func() {
			defer close(sent)
			defer server.Close()
			step := max(int(chunk), 1)
			for b := in; len(b) > 0; b = b[min(step, len(b)):] {
				if _, err := server.Write(b[:min(step, len(b))]); err != nil {
					return // the wire closed the connection
				}
			}
		}()
		type result struct {
			got []byte
			err error
		}
		// go-zookeeper queues setWatches once the connect response is
		// read (Conn.loop, sendSetWatches), and its sendLoop writes it
		// while recvLoop reads: on a gated connection, the gate opens
		// then, before or after a reply arrives.
		var setWatches sync.WaitGroup
		connected := func() {}
		if mode&(modeArmed|modeSetWatch) == modeArmed {
			connected = func() {
				setWatches.Add(1)
				go func() {
					defer setWatches.Done()
					_, _ = c.Write(request(7, opSetWatches, ""))
				}()
			}
		}
		read := make(chan result, 1)
		go func() {
			got, err := recvLoop(c, connected)
			read <- result{got, err}
		}()

		// The server hangs up once it has sent everything: the reader
		// must end by itself, on every input. (A gated connection's held
		// reply waits for the setWatches above; one that never came
		// would wait for the gate's timer, a third of the session
		// timeout, as anchor_test.go shows.)
		var r result
		select {
		case r = <-read:
		case <-time.After(hangBound):
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("mode %#x: the reader still waits after %v\n%s", mode, hangBound, buf[:runtime.Stack(buf, true)]))
		}
		_ = c.Close()
		<-sent
		setWatches.Wait()
		w.mu.Lock()
		if c.timer != nil { // a timer the gate left, opening it after the test
			c.timer.Stop()
		}
		w.mu.Unlock()

		switch {
		case errors.Is(r.err, io.EOF), errors.Is(r.err, io.ErrUnexpectedEOF): // the server hung up
		case errors.Is(r.err, errShut): // the first-watch rule
		case errors.Is(r.err, errBadFrame):
		default:
			t.Fatalf("mode %#x: the reader ended with %v", mode, r.err)
		}
		// What go-zookeeper gets is what the server sent, but for the
		// zxids of the replies, which the wire keeps (anchor.go, lastZxid),
		// and the xid of a credential's reply, a ping's (auth.go).
		want := hiddenZxids(in)
		if !bytes.HasPrefix(want, r.got) {
			t.Fatalf("mode %#x: the reader got %d bytes that are not what the server sent", mode, len(r.got))
		}
		frames, bad := framing(in)
		if bad >= 0 && len(r.got) > bad+4 {
			t.Fatalf("mode %#x: the reader got the body of a bad frame at %d (%v)", mode, bad, r.err)
		}
		if bad >= 0 && bad+4 <= len(in) && !errors.Is(r.err, errShut) {
			if !errors.Is(r.err, errBadFrame) {
				t.Fatalf("mode %#x: a bad frame at %d, and the reader ended with %v", mode, bad, r.err)
			}
			select {
			case <-c.closed:
			default:
				t.Fatalf("mode %#x: a bad frame left the connection open", mode)
			}
		}
		if errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF) {
			// The server hung up: nothing was kept from the reader, and
			// the wire knows where the next packet starts.
			if !bytes.Equal(r.got, want) {
				t.Fatalf("mode %#x: the reader got %d of %d bytes, then %v", mode, len(r.got), len(in), r.err)
			}
			if bad >= 0 {
				t.Fatalf("mode %#x: a bad frame at %d was read through to the end", mode, bad)
			}
			if got := (frameState{c.rd.nlen, c.rd.left}); got != frames {
				t.Fatalf("mode %#x: the wire is at %+v of a packet, the stream at %+v", mode, got, frames)
			}
		}
	})
}

// frameState is where a stream of packets stands: bytes of a length read,
// and of a body still to come.
type frameState struct{ nlen, left int }

// framing follows in as packets (a 4-byte big-endian length, then the
// body), independently of the wire's reader, and returns where it ends and
// the offset of the first bad frame's length (-1 for none): a body shorter
// than replyHdrBytes, or longer than a jute int can be.
func framing(in []byte) (frameState, int) {
	bad := -1
	for off := 0; ; {
		if len(in)-off < 4 {
			return frameState{nlen: len(in) - off}, bad
		}
		n := int64(binary.BigEndian.Uint32(in[off:]))
		if bad < 0 && (n < replyHdrBytes || n > 1<<31-1) {
			bad = off
		}
		if int64(len(in)-off-4) < n {
			return frameState{nlen: 4, left: int(n - int64(len(in)-off-4))}, bad
		}
		off += 4 + int(n)
	}
}

// hiddenZxids returns in, a stream of packets from a server, as the wire
// hands it to go-zookeeper: the zxid of each reply (a packet after the
// first, the connect response) whose xid is not negative zeroed, and the
// xid of a credential's reply (-4) made a ping's (-2), as far as the
// stream has it; independently of the wire's reader.
func hiddenZxids(in []byte) []byte {
	out := append([]byte(nil), in...)
	for off, packet := 0, 0; len(out)-off >= 4; packet++ {
		n := int64(binary.BigEndian.Uint32(out[off:]))
		body := out[off+4 : off+4+int(min(n, int64(len(out)-off-4)))]
		if packet > 0 && len(body) >= 4 && int32(binary.BigEndian.Uint32(body)) >= 0 {
			clear(body[4:min(12, len(body))])
		}
		if packet > 0 && len(body) >= 4 && int32(binary.BigEndian.Uint32(body)) == -4 {
			body[3] = 0xfe // a credential's reply goes on as a ping's (auth.go)
		}
		if int64(len(body)) < n {
			break
		}
		off += 4 + int(n)
	}
	return out
}

// recvLoop reads packets from c as go-zookeeper's Conn.recvLoop and
// authenticate do, and returns the bytes it got and the error it ended
// with. It discards each body as it reads it, rather than allocating up
// to 4 GiB for a garbled length.
// connected runs once the first packet, the connect response, is read.
func recvLoop(c *wireConn, connected func()) ([]byte, error) {
	var got bytes.Buffer
	for packets := 0; ; packets++ {
		if packets == 1 {
			connected()
		}
		_ = c.SetReadDeadline(time.Now().Add(hangBound)) // go-zookeeper only logs its error
		var n [4]byte
		k, err := io.ReadFull(c, n[:])
		got.Write(n[:k])
		if err != nil {
			return got.Bytes(), err
		}
		_ = c.SetReadDeadline(time.Time{})
		if _, err := io.CopyN(&got, c, int64(binary.BigEndian.Uint32(n[:]))); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return got.Bytes(), err
		}
	}
}
