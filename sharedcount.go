package zklock

import (
	"encoding/binary"
	"sync"

	"github.com/zkrecipes/zklock/internal/session"
)

// sharedCount follows a Curator SharedCount node, as SharedValue does: the
// newest value read wins (SharedValue.updateValue keeps the value of the
// largest mzxid; we order by czxid and version, which grow with it).
type sharedCount struct {
	c    *Client
	path string
	seed int32

	mu    sync.Mutex
	value int32
	ver   sizeVersion
	known bool
}

// get returns the count last read.
func (s *sharedCount) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known {
		return int(s.seed)
	}
	return int(s.value)
}

// store keeps data read at ver, if it is newer than what we have.
func (s *sharedCount) store(data []byte, st session.Stat) (sizeVersion, error) {
	ver := sizeVersion{st.Czxid, st.Version}
	if len(data) < 4 {
		// Curator's SharedCount.fromBytes (ByteBuffer.getInt) fails too.
		return ver, invalidf("shared count %s holds %d bytes, not a 4-byte count", s.path, len(data))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known || ver.after(s.ver) {
		s.value, s.ver, s.known = int32(binary.BigEndian.Uint32(data)), ver, true
	}
	return ver, nil
}

// check reads the count, creating it with the seed if it is absent, as
// SharedValue.start does (a persistent node; parents are containers). It
// runs with the first look of every acquire.
func (s *sharedCount) check(zc session.Conn) error {
	for {
		data, st, err := zc.Get(s.path)
		if s.c.s.Classify(err) == session.Gone {
			if err := s.create(zc); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		_, err = s.store(data, st)
		return err
	}
}

func (s *sharedCount) create(zc session.Conn) error {
	for _, dir := range parents(s.path) {
		var err error
		if dir == s.path {
			seed := make([]byte, 4)
			binary.BigEndian.PutUint32(seed, uint32(s.seed))
			err = zc.CreatePersistent(dir, seed, s.c.s.ACL(dir))
		} else {
			err = zc.CreateContainer(dir, nil, s.c.s.ACL(dir))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// watch reads the count with a watch, for a waiter whose last decision
// used the version *seen. again: the count read is another than *seen, so
// decide again (at once, without waiting); otherwise ch fires when the
// count changes. Errors that may pass are left to the waiter's loop (nil,
// again).
func (s *sharedCount) watch(zc session.Conn, seen *sizeVersion) (ch <-chan session.Event, again bool, err error) {
	data, st, ch, err := zc.GetDataW(s.path)
	if s.c.s.Classify(err) == session.Gone {
		// Deleted: the value stays what it was (so does SharedValue's);
		// wake when it is made again.
		exists, ch, err := zc.ExistsW(s.path)
		if err == nil && !exists {
			return ch, false, nil
		}
		return nil, true, permanent(s.c, err)
	}
	if err != nil {
		return nil, true, permanent(s.c, err)
	}
	ver, err := s.store(data, st)
	if err != nil {
		return nil, true, err
	}
	if ver != *seen {
		*seen = ver
		return nil, true, nil
	}
	return ch, false, nil
}

// permanent returns err if it cannot pass by retrying, else nil.
func permanent(c *Client, err error) error {
	if err == nil || c.s.Classify(err) != session.Permanent {
		return nil
	}
	return err
}
