package zklock

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
)

// ids hands out the protected ids of our nodes: random (version 4) UUIDs
// in canonical lower-case text, as Curator's, read from the system's
// cryptographic source in batches of 32, so that an acquire does not pay
// for a system call of its own.
var ids = struct {
	sync.Mutex
	r *bufio.Reader
}{r: bufio.NewReaderSize(rand.Reader, 32*16)}

// newID returns a new protected id.
func newID() (string, error) {
	var u [16]byte
	ids.Lock()
	_, err := io.ReadFull(ids.r, u[:])
	ids.Unlock()
	if err != nil {
		return "", fmt.Errorf("protected id: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	hex.Encode(s[9:13], u[4:6])
	hex.Encode(s[14:18], u[6:8])
	hex.Encode(s[19:23], u[8:10])
	hex.Encode(s[24:], u[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:]), nil
}
