package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// serverConn is the client's end of a net.Pipe whose other end plays the
// server: reads block as on a socket and fail once the connection is
// closed; writes (the connect request, requests) go nowhere.
type serverConn struct{ net.Conn }

func (serverConn) Write(p []byte) (int, error) { return len(p), nil }

// modeCreds is the bit of FuzzWireReader's mode byte (its others are
// ignored) that has two credentials follow the connect request: xid -4
// replies are theirs.
const modeCreds = 1

// hangBound is how long the reader may take once the server has hung up.
const hangBound = 10 * time.Second

// FuzzWireReader plays a server that sends any bytes, in reads of any
// size, to a connection of the wire, read as go-zookeeper's recvLoop
// reads (a 4-byte length, then that many bytes), with and without
// credentials. Once the server has sent everything and hung up, the
// reader must end by itself, with the server's hang-up or a bad frame's
// close; it never panics; what it gets
// is what the server sent, the replies' zxids hidden (zxid.go), a prefix
// of it if the wire closed the connection; and the wire's count of where
// a packet starts agrees with the server's framing. A frame that cannot
// be one (shorter than the 16-byte header every reply and connect
// response has, or longer than a jute int can say) ends the connection
// with an error before go-zookeeper gets its body.
func FuzzWireReader(f *testing.F) {
	var valid []byte
	valid = append(valid, connectResponse(4000, 55)...)
	valid = append(valid, reply(1, 900, 0)...)
	valid = append(valid, reply(-4, 0, 0)...)
	valid = append(valid, reply(4, 901, -101)...)
	valid = append(valid, reply(-2, 0, 0)...)
	valid = append(valid, reply(-4, 0, -115)...)
	valid = append(valid, reply(5, 902, 0)...)
	event := []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 2, '/', 'a'}
	binary.BigEndian.PutUint32(event, uint32(len(event)-4))
	valid = append(valid, event...)
	for mode := byte(0); mode <= modeCreds; mode++ {
		f.Add(mode, uint16(7), valid)
	}
	f.Add(byte(0), uint16(1), connectResponse(1<<30, 55))
	f.Add(byte(modeCreds), uint16(3), append(connectResponse(-1, 55), reply(1, 900, 0)...))
	f.Add(byte(0), uint16(4), []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add(byte(0), uint16(64), append(connectResponse(4000, 55), 0, 0, 0, 0, 0, 0, 0, 16))
	f.Add(byte(modeCreds), uint16(5), append(connectResponse(4000, 55), reply(-4, 1, -101)[:9]...))
	f.Add(byte(0), uint16(1), []byte{})

	f.Fuzz(func(t *testing.T, mode byte, chunk uint16, in []byte) {
		client, server := net.Pipe()
		o := Options{SessionTimeout: time.Minute}
		if mode&modeCreds != 0 {
			o.Auth = []Auth{{Scheme: "digest", Auth: []byte("u:p")}, {Scheme: "digest", Auth: []byte("v:q")}}
		}
		w := testWire(o)
		sc := &closeConn{Conn: serverConn{client}}
		c := w.newConn(sc, "zk1:2181")
		// The fuzzing engine bounds no input's time: a hang anywhere
		// (and a t.Fatal would run into it) crashes the worker, which
		// keeps the input.
		watchdog := time.AfterFunc(2*hangBound, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("mode %#x: hung for %v\n%s", mode, 2*hangBound, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		if _, err := c.Write(make([]byte, 48)); err != nil { // the connect request
			t.Fatal(err)
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
		read := make(chan result, 1)
		go func() {
			got, err := recvLoop(c)
			read <- result{got, err}
		}()

		// The server hangs up once it has sent everything: the reader
		// must end by itself, on every input.
		var r result
		select {
		case r = <-read:
		case <-time.After(hangBound):
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("mode %#x: the reader still waits after %v\n%s", mode, hangBound, buf[:runtime.Stack(buf, true)]))
		}
		wireClosed := sc.closed.Load()
		_ = c.Close()
		<-sent

		switch {
		case errors.Is(r.err, io.EOF), errors.Is(r.err, io.ErrUnexpectedEOF): // the server hung up
		case errors.Is(r.err, errBadFrame):
		default:
			t.Fatalf("mode %#x: the reader ended with %v", mode, r.err)
		}
		// What go-zookeeper gets is what the server sent, but for the
		// zxids of the replies, which the wire keeps (zxid.go).
		want := hiddenZxids(in)
		if !bytes.HasPrefix(want, r.got) {
			t.Fatalf("mode %#x: the reader got %d bytes that are not what the server sent", mode, len(r.got))
		}
		frames, bad := framing(in)
		if bad >= 0 && len(r.got) > bad+4 {
			t.Fatalf("mode %#x: the reader got the body of a bad frame at %d (%v)", mode, bad, r.err)
		}
		if bad >= 0 && bad+4 <= len(in) {
			if !errors.Is(r.err, errBadFrame) {
				t.Fatalf("mode %#x: a bad frame at %d, and the reader ended with %v", mode, bad, r.err)
			}
			if !wireClosed {
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
			if wireClosed {
				t.Fatalf("mode %#x: the wire closed a connection that read no bad frame", mode)
			}
		}
	})
}

// closeConn records whether it was closed.
type closeConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
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
// first, the connect response) whose xid is not negative zeroed, as far
// as the stream has it; independently of the wire's reader.
func hiddenZxids(in []byte) []byte {
	out := append([]byte(nil), in...)
	for off, packet := 0, 0; len(out)-off >= 4; packet++ {
		n := int64(binary.BigEndian.Uint32(out[off:]))
		body := out[off+4 : off+4+int(min(n, int64(len(out)-off-4)))]
		if packet > 0 && len(body) >= 4 && int32(binary.BigEndian.Uint32(body)) >= 0 {
			clear(body[4:min(12, len(body))])
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
func recvLoop(c *wireConn) ([]byte, error) {
	var got bytes.Buffer
	for {
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
