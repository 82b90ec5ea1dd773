package zklock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zklock/internal/zkfake"
)

// TestRequestSizeIsJutes: requestSize is the size of the multi request
// that creates the nodes, field by field as jute writes it
// (org.apache.zookeeper.MultiOperationRecord, CreateRequest): the length
// prefix (4), the request header (xid 4, type 4); per op a MultiHeader
// (type 4, done 1, err 4) and a CreateRequest: the path (4 + bytes), the
// data (4 + bytes), the ACL vector (4, then per entry perms 4, scheme 4 +
// bytes, id 4 + bytes) and the flags (4); and the closing MultiHeader (9).
// The length prefix is counted, though the server's check
// (NIOServerCnxn.readLength) leaves it out: 4 bytes to spare.
func TestRequestSizeIsJutes(t *testing.T) {
	acl := func(string) []zk.ACL { return zk.WorldACL(zk.PermAll) } // world:anyone
	world := 4 + (4 + len("world")) + (4 + len("anyone"))
	op := func(name string, data int) int { return 9 + (4 + len(name)) + (4 + data) + (4 + world) + 4 }
	for _, tc := range []struct {
		names []string
		data  int
	}{
		{[]string{"/a/_c_x-lock-"}, 5},
		{[]string{"/a/_c_x-lease-", "/a/_c_x-lease-", "/a/_c_x-lease-"}, 0},
		{[]string{"/a/_c_x-lock-", "/bb/_c_x-lock-"}, 100},
	} {
		want := 4 + 8 + 9
		for _, n := range tc.names {
			want += op(n, tc.data)
		}
		if got := requestSize(tc.names, tc.data, acl); got != want {
			t.Errorf("requestSize(%q, %d) = %d, want %d", tc.names, tc.data, got, want)
		}
	}
}

// TestFitsUpToJuteMaxBuffer: a create whose request is exactly ZooKeeper's
// limit (jute.maxbuffer, 0xfffff bytes) goes ahead; one byte more is
// refused with ErrInvalidArgument, before any ZooKeeper call.
func TestFitsUpToJuteMaxBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Connect(ctx, []string{"zkfake"}, WithFakeForTest(zkfake.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Three nodes (node data is at most 512 KiB), the first name lengthened
	// to land on the limit exactly, then a byte over it.
	base := strings.Repeat("n", 20)
	three := func(extra int) []string {
		return []string{"/f/" + base + strings.Repeat("x", extra), "/f/" + base, "/f/" + base}
	}
	rest := 0xfffff - requestSize(three(0), 0, c.s.ACL)
	data, fit := rest/3, rest%3
	m, err := NewMutex(c, "/f", WithNodeData(make([]byte, data)))
	if err != nil {
		t.Fatal(err)
	}
	p := newQueueParticipant(c, "/f", []*Lock{m.lock}, 1)
	if size := requestSize(three(fit), data, c.s.ACL); size != 0xfffff {
		t.Fatalf("the request meant to be at the limit is of %d bytes", size)
	}
	for _, extra := range []int{fit, fit + 1} {
		names := three(extra)
		size := requestSize(names, data, c.s.ACL)
		err := p.fits(names)
		if want := size <= 0xfffff; want != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("a request of %d bytes: %v; want it to fit: %v", size, err, want)
		}
	}
}
