package zklock

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"sync"
)

// ids hands out the protected ids of our nodes: UUIDs in canonical
// lower-case text, as Curator's, read from the system's cryptographic
// source in batches of 32, so that an acquire does not pay for a system
// call of its own.
var ids = struct {
	sync.Mutex
	r *bufio.Reader
}{r: bufio.NewReaderSize(rand.Reader, 32*16)}

// newID returns a new protected id: a random (version 4) UUID.
func newID() (string, error) {
	var u [16]byte
	if err := randomUUID(&u); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	return formatUUID(&u), nil
}

// newSizedID returns a new protected id for the nodes of a zklock
// semaphore of size leases: a version-8 UUID (RFC 9562, section 5.8: its
// 122 bits other than the version and variant are the writer's own) whose
// last 32 bits are size and the rest random. Every participant reads the
// size of every other from the children's names alone
// ([semaphorePolicy]), and the id is still unique (90 random bits) and
// canonical, so Curator and kazoo read the node as they read any other.
// size is in [1, math.MaxInt32] ([NewSemaphore] checks it).
func newSizedID(size int) (string, error) {
	var u [16]byte
	if err := randomUUID(&u); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x80 // version 8
	binary.BigEndian.PutUint32(u[12:], uint32(size))
	return formatUUID(&u), nil
}

// idSize reads the size a protected id written by [newSizedID] carries.
// ok is false for any other id: not a canonical lower-case UUID, not
// version 8 with the RFC's variant, or a size out of [1, math.MaxInt32]
// (a version-8 UUID of another writer, whose last bits mean something
// else, most often reads as no size, never as a size below 1).
func idSize(id string) (size int, ok bool) {
	if !canonicalUUID(id) || id[14] != '8' {
		return 0, false
	}
	switch id[19] {
	case '8', '9', 'a', 'b': // variant 10
	default:
		return 0, false
	}
	var b [4]byte
	if _, err := hex.Decode(b[:], []byte(id[28:])); err != nil {
		return 0, false
	}
	n := binary.BigEndian.Uint32(b[:])
	if n < 1 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// canonicalUUID reports whether id is a UUID in canonical lower-case
// text: 8-4-4-4-12 hex digits.
func canonicalUUID(id string) bool {
	if len(id) != uuidLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch i {
		case 8, 13, 18, 23:
			if id[i] != '-' {
				return false
			}
		default:
			if !isHex(id[i : i+1]) {
				return false
			}
		}
	}
	return true
}

// randomUUID fills u with random bits, then sets the RFC's variant (10).
func randomUUID(u *[16]byte) error {
	ids.Lock()
	_, err := io.ReadFull(ids.r, u[:])
	ids.Unlock()
	if err != nil {
		return fmt.Errorf("protected id: %w", err)
	}
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 / 9562 variant
	return nil
}

// formatUUID writes u in canonical lower-case text, 8-4-4-4-12.
func formatUUID(u *[16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	hex.Encode(s[9:13], u[4:6])
	hex.Encode(s[14:18], u[6:8])
	hex.Encode(s[19:23], u[8:10])
	hex.Encode(s[24:], u[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
