package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The credentials go out in the connect request's Write, behind it, framed
// as AuthPackets (xid -4, opcode 100, type 0, scheme, auth: the values are
// ZooKeeper's, written out here rather than taken from the code); their
// replies reach go-zookeeper as they came (xid -4: it logs and skips
// them), and are read for their codes whatever the reads split, back to
// back too. A refusal is kept, naming its scheme, with zk.ErrAuthFailed.
func TestWireSendsCredentials(t *testing.T) {
	auths := []Auth{{Scheme: "digest", Auth: []byte("u:p")}, {Scheme: "other", Auth: []byte("xyz")}}
	for _, chunk := range []int{1, 3, 1 << 20} {
		w := testWire(Options{Auth: auths})
		data := append(connectResponse(4000, 55), reply(-4, 0, 0)...)
		data = append(data, reply(-4, 0, -115)...) // AUTHFAILED
		data = append(data, reply(7, 0, 0)...)
		nc := &writesConn{bytesConn: bytesConn{data: data, chunk: chunk}}
		c := w.newConn(nc, "zk1:2181")
		connect := connectRequest(0, 0)
		if n, err := c.Write(connect); err != nil || n != len(connect) {
			t.Fatalf("the connect request's Write: %d, %v", n, err)
		}
		want := append(append([]byte(nil), connect...), authPacket(-4, 100, "digest", "u:p")...)
		want = append(want, authPacket(-4, 100, "other", "xyz")...)
		if len(nc.wrote) != 1 || !bytes.Equal(nc.wrote[0], want) {
			t.Fatalf("chunk %d: wrote %x\nwant %x", chunk, nc.wrote, want)
		}
		readWhole(t, c) // the connect response
		var xids []int32
		for i := 0; i < 3; i++ {
			xids = append(xids, int32(binary.BigEndian.Uint32(readWhole(t, c)[4:8])))
		}
		if xids[0] != -4 || xids[1] != -4 || xids[2] != 7 {
			t.Fatalf("chunk %d: go-zookeeper read xids %v, want [-4 -4 7]", chunk, xids)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := w.creds.await(ctx)
		if !errors.Is(err, zk.ErrAuthFailed) || !strings.Contains(err.Error(), "auth other") {
			t.Fatalf("chunk %d: a refused credential: %v, want zk.ErrAuthFailed naming scheme other", chunk, err)
		}
	}
}

// awaitCredentials waits for every credential to be accepted, and its
// waiters wake when the last is; it returns nil at once when there are none; a refusal
// of another code than AUTHFAILED is told with its code; a reply of xid -4
// that answers none of ours (none was sent) passes as it came, and
// changes nothing.
func TestWireAwaitsCredentials(t *testing.T) {
	digest := Options{Auth: []Auth{{Scheme: "digest", Auth: []byte("u:p")}}}
	w := testWire(digest)
	nc := &writesConn{bytesConn: bytesConn{data: append(connectResponse(4000, 55), reply(-4, 0, 0)...), chunk: 5}}
	c := w.newConn(nc, "zk1:2181")
	if _, err := c.Write(connectRequest(0, 0)); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.creds.await(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("before the reply: %v, want the context's error", err)
	}
	w.creds.mu.Lock()
	changed := w.creds.changed // what a waiter waits on now
	w.creds.mu.Unlock()
	readWhole(t, c)
	readWhole(t, c)
	select {
	case <-changed:
	default:
		t.Fatal("the last credential's acceptance woke no waiter")
	}
	if err := w.creds.await(done); err != nil {
		t.Fatalf("once accepted: %v", err)
	}

	none := testWire(Options{})
	if err := none.creds.await(done); err != nil {
		t.Fatalf("with no credentials: %v, want nil at once", err)
	}
	stray := none.newConn(&writesConn{bytesConn: bytesConn{data: append(connectResponse(4000, 56), reply(-4, 0, -115)...), chunk: 1}}, "zk1:2181")
	if _, err := stray.Write(connectRequest(0, 0)); err != nil {
		t.Fatal(err)
	}
	readWhole(t, stray)
	if xid := int32(binary.BigEndian.Uint32(readWhole(t, stray)[4:8])); xid != -4 {
		t.Fatalf("a stray reply of xid -4 reached go-zookeeper as xid %d, want -4", xid)
	}
	if none.creds.err != nil || none.creds.authed {
		t.Fatalf("a stray reply counted: err %v, authed %v", none.creds.err, none.creds.authed)
	}

	w = testWire(digest)
	c = w.newConn(&writesConn{bytesConn: bytesConn{data: append(connectResponse(4000, 57), reply(-4, 0, -6)...), chunk: 64}}, "zk1:2181")
	if _, err := c.Write(connectRequest(0, 0)); err != nil {
		t.Fatal(err)
	}
	readWhole(t, c)
	readWhole(t, c)
	if err := w.creds.await(done); err == nil || errors.Is(err, zk.ErrAuthFailed) || !strings.Contains(err.Error(), "-6") {
		t.Fatalf("a credential refused with code -6: %v, want an error with the code, not zk.ErrAuthFailed", err)
	}
}

// authPacket is an AuthPacket as the Java client frames it.
func authPacket(xid, op int32, scheme, auth string) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(scheme)))
	b = append(b, scheme...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(auth)))
	b = append(b, auth...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// failConn fails every Write, and says whether it was closed.
type failConn struct {
	bytesConn
	closed bool
}

func (f *failConn) Write([]byte) (int, error) { return 0, errors.New("test: broken pipe") }
func (f *failConn) Close() error              { f.closed = true; return nil }

// A failed write of a credential that go-zookeeper re-sends (a setAuth
// request, opcode 100, after the connect request) is reported as made and
// closes the connection (see wireConn.Write); any other failed write, the
// connect request's too, is reported as it failed. Once connected, a
// request goes out as it is, with no credentials behind it.
func TestWireFailedWrites(t *testing.T) {
	setAuth := make([]byte, 12)
	binary.BigEndian.PutUint32(setAuth[8:], 100)
	for _, tc := range []struct {
		name    string
		connect bool
		p       []byte
		made    bool
	}{
		{"a credential", false, setAuth, true},
		{"another request", false, request(7, opExists, "/a"), false},
		{"the connect request", true, setAuth, false},
	} {
		fc := &failConn{}
		w := testWire(Options{})
		c := w.newConn(fc, "zk1:2181")
		if !tc.connect {
			w.clock.record(c.sent, time.Now(), 0) // the connect request went out
		}
		n, err := c.Write(tc.p)
		if made := err == nil && n == len(tc.p); made != tc.made || fc.closed != tc.made {
			t.Errorf("%s: Write gave %d, %v, closed %v; want made and closed: %v", tc.name, n, err, fc.closed, tc.made)
		}
	}

	w := testWire(Options{Auth: []Auth{{Scheme: "digest", Auth: []byte("u:p")}}})
	nc := &writesConn{}
	c := w.newConn(nc, "zk1:2181")
	req := request(7, opExists, "/a")
	for _, p := range [][]byte{connectRequest(0, 0), req} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(nc.wrote) != 2 || !bytes.Equal(nc.wrote[1], req) {
		t.Fatalf("the request after the connect request went out as %x, want %x", nc.wrote[1:], req)
	}
}

// opcode reads a request's opcode (bytes 8 to 11), and 0 from a packet too
// short to carry one.
func TestOpcode(t *testing.T) {
	p := make([]byte, 12)
	binary.BigEndian.PutUint32(p[8:], 100)
	if got := opcode(p); got != 100 {
		t.Fatalf("opcode of a 12-byte request of opcode 100: %d", got)
	}
	for n := 0; n < 12; n++ {
		if got := opcode(p[:n]); got != 0 {
			t.Fatalf("opcode of %d bytes: %d, want 0", n, got)
		}
	}
}
