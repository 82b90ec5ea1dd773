package zklock

import (
	"bufio"
	"crypto/rand"
	"sync"

	"github.com/google/uuid"
)

// ids hands out the protected ids of our nodes: random (version 4) UUIDs,
// as Curator's, read from the system's cryptographic source in batches of
// 32, so that an acquire does not pay for a system call of its own.
var ids = struct {
	sync.Mutex
	r *bufio.Reader
}{r: bufio.NewReaderSize(rand.Reader, 32*16)}

// newID returns a new protected id.
func newID() string {
	ids.Lock()
	id, err := uuid.NewRandomFromReader(ids.r)
	ids.Unlock()
	if err != nil {
		return uuid.NewString() // the source failed us once: uuid's own call, which panics if it fails again
	}
	return id.String()
}
