package zklock

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Lock names: the text between a node's protected prefix and its sequence
// number. They are Apache Curator's, so that Curator and zklock read each
// other's nodes (see docs/interop.md, "In brief").
const (
	lockNameMutex = "lock-"    // Curator's InterProcessMutex
	lockNameRead  = "__READ__" // Curator's InterProcessReadWriteLock, read side
	lockNameWrite = "__WRIT__" // Curator's InterProcessReadWriteLock, write side
	lockNameLease = "lease-"   // zklock's Semaphore (not Curator's layout)
	lockNameLatch = "latch-"   // Curator's LeaderLatch, and zklock's Election

	protectedPrefix = "_c_" // Curator's prefix for protected nodes
	uuidLen         = 36    // canonical UUID text: 8-4-4-4-12
	zkLockIDLen     = 32    // go-zookeeper's zk.Lock: 16 random bytes in hex
	seqLen          = 10    // ZooKeeper's %010d sequence suffix

	kazooLock  = "__lock__"  // kazoo's Lock and WriteLock
	kazooRLock = "__rlock__" // kazoo's ReadLock
	kazooIDLen = 32          // kazoo's uuid4().hex
)

// Kind says what a child of a lock path is, by its name. The set is
// closed: a [Driver] writes nodes of one of these kinds, so that every
// other participant, in any library, can tell what its nodes are.
type Kind int

// The kinds of child zklock recognises.
const (
	// KindUnknown is a child that is not a lock node. Drivers never see
	// one, and no driver may write one.
	KindUnknown Kind = iota
	// KindMutex is an exclusive node: `_c_<uuid>-lock-<seq>` (zklock's and
	// Curator's mutex, go-zookeeper's zk.Lock with a 32-hex id) or
	// `<hex>__lock__<seq>` (kazoo's Lock and WriteLock).
	KindMutex
	// KindRead is a reader: `_c_<uuid>-__READ__<seq>` (zklock and Curator)
	// or `<hex>__rlock__<seq>` (kazoo's ReadLock).
	KindRead
	// KindWrite is a writer: `_c_<uuid>-__WRIT__<seq>` (zklock and Curator).
	KindWrite
	// KindLease is a semaphore lease: `_c_<uuid>-lease-<seq>` (zklock).
	KindLease
	// KindLatch is an election candidate: `_c_<uuid>-latch-<seq>` (zklock's
	// [Election] and Curator's LeaderLatch). Other recipes count it as
	// exclusive.
	KindLatch
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
	case KindLatch:
		return "latch"
	}
	return "unknown"
}

// lockName returns the name a node of kind k carries, "" for none.
func (k Kind) lockName() string {
	switch k {
	case KindMutex:
		return lockNameMutex
	case KindRead:
		return lockNameRead
	case KindWrite:
		return lockNameWrite
	case KindLease:
		return lockNameLease
	case KindLatch:
		return lockNameLatch
	}
	return ""
}

// Child is one parsed child of a lock path, as a [Driver] sees it.
type Child struct {
	// Name is the node's name, without the lock path.
	Name string
	// Kind is what the name says the node is.
	Kind Kind
	// Owner is the node's protected id (the UUID of zklock and Curator, the
	// hex id of kazoo and go-zookeeper). The nodes of one participant share
	// it: a [Semaphore.AcquireN] creates n nodes with one Owner,
	// consecutively.
	Owner string
}

// child is a Child with the sequence number that orders it.
type child struct {
	Child
	seq int32
}

// parseChild recognises a lock node's name. ok is false for a name that has
// no sequence suffix (a plain node, which the engine ignores); err is set for
// a name that ends in a sequence but is of no format zklock knows.
func parseChild(name string) (ch child, ok bool, err error) {
	if ch, ok := parseProtected(name); ok {
		return ch, true, nil
	}
	if ch, ok := parseKazoo(name); ok {
		return ch, true, nil
	}
	ch.Name = name
	if len(name) >= seqLen {
		if _, valid := parseSeq(name[len(name)-seqLen:]); valid {
			return ch, true, fmt.Errorf("%w: %q", ErrUnknownNode, name)
		}
	}
	return ch, false, nil
}

// The kinds each format writes: zklock and Curator every kind, under a
// 36-character UUID; go-zookeeper's zk.Lock a mutex, under 32 hex digits.
var (
	protectedKinds = []Kind{KindMutex, KindRead, KindWrite, KindLease, KindLatch}
	zkLockKinds    = []Kind{KindMutex}
)

// parseProtected recognises `_c_<id>-<name><seq>`.
func parseProtected(name string) (child, bool) {
	rest, found := strings.CutPrefix(name, protectedPrefix)
	if !found {
		return child{}, false
	}
	for _, idLen := range [...]int{uuidLen, zkLockIDLen} {
		if len(rest) <= idLen || rest[idLen] != '-' {
			continue
		}
		id, kinds := rest[:idLen], protectedKinds
		if idLen == zkLockIDLen {
			if !isHex(id) {
				continue
			}
			kinds = zkLockKinds
		}
		if k, seq, ok := kindSeq(rest[idLen+1:], kinds); ok {
			return child{Child{Name: name, Kind: k, Owner: id}, seq}, true
		}
	}
	return child{}, false
}

// kindSeq reads s as one of kinds' lock names followed by a sequence.
func kindSeq(s string, kinds []Kind) (Kind, int32, bool) {
	for _, k := range kinds {
		if rest, found := strings.CutPrefix(s, k.lockName()); found {
			if seq, valid := parseSeq(rest); valid {
				return k, seq, true
			}
		}
	}
	return KindUnknown, 0, false
}

// parseKazoo recognises kazoo's `<32 hex>__lock__<seq>` and
// `<32 hex>__rlock__<seq>`.
func parseKazoo(name string) (child, bool) {
	if len(name) <= kazooIDLen || !isHex(name[:kazooIDLen]) {
		return child{}, false
	}
	for _, kz := range [...]struct {
		name string
		kind Kind
	}{{kazooLock, KindMutex}, {kazooRLock, KindRead}} {
		if s, found := strings.CutPrefix(name[kazooIDLen:], kz.name); found {
			if seq, valid := parseSeq(s); valid {
				return child{Child{Name: name, Kind: kz.kind, Owner: name[:kazooIDLen]}, seq}, true
			}
		}
	}
	return child{}, false
}

// parseSeq reads ZooKeeper's sequence suffix exactly as the server writes
// it: the parent's cversion, a signed 32-bit counter, formatted by Java's
// "%010d" (PrepRequestProcessor.pRequest2Txn). That is ten characters for
// every value from -999999999 up ("0000000042", "-000000042"), and eleven
// for the negative values beyond, which the counter reaches when it wraps
// after 2^31 creates under one parent ("-2147483648").
func parseSeq(s string) (int32, bool) {
	switch {
	case len(s) == seqLen:
	case len(s) == seqLen+1 && s[0] == '-' && s[1] != '0':
	default:
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && !(i == 0 && s[i] == '-') {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// seqBefore orders sequence numbers with serial-number arithmetic (RFC
// 1982, SERIAL_BITS 32): a comes before b when b-a, taken modulo 2^32, is
// positive as a signed 32-bit number. Live nodes of one parent are always
// far less than 2^31 creates apart, so this is the order in which they were
// created, also across the counter's wrap from 2147483647 to -2147483648,
// where a numeric order would put the newest node first.
func seqBefore(a, b int32) bool { return int32(uint32(b)-uint32(a)) > 0 }

// sortChildren parses and orders the children of a lock path by sequence
// number, with [seqOrigin]. Curator and kazoo order by sequence too (for
// every node Curator itself writes, the text it sorts on is exactly the
// sequence), so all three agree until the counter wraps; see
// docs/semantics.md, "Sequence wrap", for after. Plain nodes without a
// sequence suffix are dropped, unless refuse says they must not be there;
// a sequential node of an unknown format is an error wrapping
// ErrUnknownNode.
func sortChildren(names []string, refuse func(string) bool) ([]Child, error) {
	kids := make([]child, 0, len(names))
	for _, name := range names {
		ch, ok, err := parseChild(name)
		switch {
		case err != nil:
			return nil, err
		case ok:
			kids = append(kids, ch)
		case refuse != nil && refuse(name):
			return nil, fmt.Errorf("%w: %q (another library's semaphore layout)", ErrUnknownNode, name)
		}
	}
	// slices.SortFunc, not sort.Slice: no reflection on every read of
	// every acquire.
	origin := seqOrigin(kids)
	slices.SortFunc(kids, func(a, b child) int { return compareChildren(origin, a, b) })
	out := make([]Child, len(kids))
	for i, k := range kids {
		out[i] = k.Child
	}
	return out, nil
}

// seqOrigin returns where the queue of kids starts on the circle of 2^32
// sequence numbers: just after the widest gap between them (the first
// such gap, in numeric order, if several are as wide). Ordering by the
// distance from it is [seqBefore]'s order whenever the sequences lie
// within 2^31 of each other (the gap outside them is then the widest), as
// live nodes do; unlike seqBefore, it is a total order for any set, so the
// queue depends on the set of names alone, never on the order getChildren
// listed them in. seqBefore alone is not transitive over a wider span: a
// client that writes a plain node named as if at sequence s+2^31 makes a
// cycle with the nodes at s and s+1, and the participants that read the
// children in different orders then each see their own node first (found
// by FuzzSortChildren).
func seqOrigin(kids []child) uint32 {
	if len(kids) == 0 {
		return 0
	}
	seqs := make([]uint32, len(kids))
	for i, k := range kids {
		seqs[i] = uint32(k.seq)
	}
	slices.Sort(seqs)
	origin, gap := seqs[0], seqs[0]-seqs[len(seqs)-1] // the gap that wraps around
	for i := 1; i < len(seqs); i++ {
		if g := seqs[i] - seqs[i-1]; g > gap {
			origin, gap = seqs[i], g
		}
	}
	return origin
}

// compareChildren orders two children of a queue that starts at origin
// (see seqOrigin): by sequence, then readers first, then by name.
func compareChildren(origin uint32, a, b child) int {
	if ka, kb := uint32(a.seq)-origin, uint32(b.seq)-origin; ka != kb {
		if ka < kb {
			return -1
		}
		return 1
	}
	// Only a downgrade makes two nodes with one sequence: a reader
	// (plain ephemeral) at its writer's place. It holds, so it sorts
	// first, and everyone behind the writer is behind it too.
	if (a.Kind == KindRead) != (b.Kind == KindRead) {
		if a.Kind == KindRead {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

// nodePrefix is the name of our nodes before ZooKeeper's sequence.
func nodePrefix(id string, k Kind) string {
	return protectedPrefix + id + "-" + k.lockName()
}
