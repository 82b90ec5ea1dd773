package zklock

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Lock names: the text between a node's protected prefix and its sequence
// number. They are Apache Curator's, so that Curator and zklock read each
// other's nodes (see the README's section on mixed fleets).
const (
	lockNameMutex = "lock-"    // Curator's InterProcessMutex
	lockNameRead  = "__READ__" // Curator's InterProcessReadWriteLock, read side
	lockNameWrite = "__WRIT__" // Curator's InterProcessReadWriteLock, write side
	lockNameLease = "lease-"   // zklock's Semaphore (not Curator's layout)

	protectedPrefix = "_c_" // Curator's prefix for protected nodes
	uuidLen         = 36    // canonical UUID text: 8-4-4-4-12
	seqLen          = 10    // ZooKeeper's %010d sequence suffix

	kazooLock  = "__lock__"  // kazoo's Lock and WriteLock
	kazooRLock = "__rlock__" // kazoo's ReadLock
	kazooIDLen = 32          // kazoo's uuid4().hex
)

// Kind says what a child of a lock path is, by its name.
type Kind int

// The kinds of child zklock recognises.
const (
	// KindUnknown is a child that is not a lock node: a plain node without
	// a sequence suffix. Drivers never see one; the engine drops them.
	KindUnknown Kind = iota
	// KindMutex is an exclusive node: `_c_<uuid>-lock-<seq>` (zklock's and
	// Curator's mutex) or `<hex>__lock__<seq>` (kazoo's Lock and WriteLock).
	KindMutex
	// KindRead is a reader: `_c_<uuid>-__READ__<seq>` (zklock and Curator)
	// or `<hex>__rlock__<seq>` (kazoo's ReadLock).
	KindRead
	// KindWrite is a writer: `_c_<uuid>-__WRIT__<seq>` (zklock and Curator).
	KindWrite
	// KindLease is a semaphore lease: `_c_<uuid>-lease-<seq>` (zklock).
	KindLease
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindMutex:
		return "mutex"
	case KindRead:
		return "read"
	case KindWrite:
		return "write"
	case KindLease:
		return "lease"
	}
	return "unknown"
}

// Child is one parsed child of a lock path, as a [Driver] sees it.
type Child struct {
	// Name is the node's name, without the lock path.
	Name string
	// Seq is the sequence number ZooKeeper appended to the name.
	Seq int64
	// Kind is what the name says the node is.
	Kind Kind
	// Owner is the node's protected id (the UUID of zklock and Curator, the
	// hex id of kazoo). The nodes of one participant share it: an
	// [Semaphore.AcquireN] creates n nodes with one Owner, consecutively.
	Owner string
}

// parseChild recognises a lock node's name. ok is false for a name that has
// no sequence suffix (a plain node, which the engine ignores); err is set for
// a name that ends in a sequence but is of no format zklock knows.
func parseChild(name string) (ch Child, ok bool, err error) {
	seq, hasSeq := parseSeq(name)
	if !hasSeq {
		return Child{Name: name}, false, nil
	}
	ch = Child{Name: name, Seq: seq}
	rest := name[:len(name)-seqLen]
	switch {
	case strings.HasPrefix(rest, protectedPrefix) && len(rest) > len(protectedPrefix)+uuidLen &&
		rest[len(protectedPrefix)+uuidLen] == '-':
		ch.Owner = rest[len(protectedPrefix) : len(protectedPrefix)+uuidLen]
		switch rest[len(protectedPrefix)+uuidLen+1:] {
		case lockNameMutex:
			ch.Kind = KindMutex
		case lockNameRead:
			ch.Kind = KindRead
		case lockNameWrite:
			ch.Kind = KindWrite
		case lockNameLease:
			ch.Kind = KindLease
		}
	case len(rest) == kazooIDLen+len(kazooLock) && strings.HasSuffix(rest, kazooLock):
		ch.Owner, ch.Kind = rest[:kazooIDLen], KindMutex
	case len(rest) == kazooIDLen+len(kazooRLock) && strings.HasSuffix(rest, kazooRLock):
		ch.Owner, ch.Kind = rest[:kazooIDLen], KindRead
	}
	if ch.Kind == KindUnknown {
		return ch, true, fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	return ch, true, nil
}

// parseSeq reads ZooKeeper's sequence suffix: ten characters, a
// zero-padded signed int32 ("%010d").
func parseSeq(name string) (int64, bool) {
	if len(name) < seqLen {
		return 0, false
	}
	s := name[len(name)-seqLen:]
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && !(i == 0 && s[i] == '-') {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return n, true
}

// foreignSemaphore reports a plain child that belongs to another library's
// semaphore on the same path: Curator's InterProcessSemaphoreV2 keeps its
// nodes under "locks" and "leases", kazoo's Semaphore writes one node per
// holder named by a 32-hex-digit id. A zklock Semaphore cannot count those
// holders, so it refuses the path rather than grant too many leases.
func foreignSemaphore(name string) bool {
	if name == "locks" || name == "leases" {
		return true
	}
	if len(name) != kazooIDLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !(name[i] >= '0' && name[i] <= '9' || name[i] >= 'a' && name[i] <= 'f') {
			return false
		}
	}
	return true
}

// sortChildren parses and orders the children of a lock path, the way
// Curator orders them: by sequence number. For every node Curator itself
// writes, Curator's key (the text after the lock name) is exactly the
// ten-digit sequence, so the two orders agree; kazoo's nodes are ordered by
// their sequence too, which is how kazoo orders them. Plain nodes without a
// sequence suffix are dropped, unless refuse says they must not be there; a
// sequential node of an unknown format is an error wrapping ErrUnknownNode.
func sortChildren(names []string, refuse func(string) bool) ([]Child, error) {
	kids := make([]Child, 0, len(names))
	for _, name := range names {
		ch, ok, err := parseChild(name)
		if err != nil {
			return nil, err
		}
		if !ok && refuse != nil && refuse(name) {
			return nil, fmt.Errorf("%w: %q (another library's semaphore layout)", ErrUnknownNode, name)
		}
		if ok {
			kids = append(kids, ch)
		}
	}
	sort.Slice(kids, func(i, j int) bool {
		if kids[i].Seq != kids[j].Seq {
			return kids[i].Seq < kids[j].Seq
		}
		return kids[i].Name < kids[j].Name
	})
	return kids, nil
}

// nodePrefix is the name of our nodes before ZooKeeper's sequence.
func nodePrefix(id, lockName string) string {
	return protectedPrefix + id + "-" + lockName
}
