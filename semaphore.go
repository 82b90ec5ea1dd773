package zklock

import (
	"context"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Semaphore is a distributed counting semaphore on a ZooKeeper path: at
// most maxLeases leases are held at once, granted in first-come-first-served
// order (with Semaphores of other sizes on the path, at most the smallest
// size among the holders: see below). A release always wakes the first
// waiter, and only it.
//
// Its default layout (nodes `_c_<uuid>-lease-<seq>` directly under the
// path) is zklock's own. [WithSemaphoreLayout] selects Apache Curator's
// InterProcessSemaphoreV2 layout or kazoo's Semaphore layout instead, to
// share leases with processes using those libraries ([SemaphoreLayout]).
// A path that shows the nodes of another layout than the Semaphore's own
// (Curator's "locks" and "leases" children, kazoo's 32-hex-digit lease
// nodes, zklock's lease nodes) is refused with ErrUnknownNode, rather than
// grant leases it cannot count: under the Curator and kazoo layouts before
// anything is created; under zklock's, by the first look after its node is
// created (which the acquire then deletes).
//
// Under zklock's layout, Semaphores made with different sizes may share a
// path, as the replicas of a rolling deploy that resizes it do, and none
// fails for it: each node carries its Semaphore's size in its name (its
// protected id, a version-8 UUID), and node i of the queue holds when i is
// below the size of every node up to it. So the leases held are never more
// than any holder's size allows. A smaller size that arrives bounds every
// grant after it at once, behind it and ahead of it: a waiter ahead of it
// counts the leases that may be held with its own (those ahead of it, and
// those behind it that the rule lets hold and whose nodes do not say they
// are held back) and waits while they would exceed the smaller size.
// Leases granted before it arrived stay held. A larger size takes effect
// once the last participant of a smaller one has left the path (an empty
// path takes the next size at once). [Participant.Size] shows each participant's size
// and [SizeInForce] the smallest. docs/semantics.md, "Resizing a
// semaphore", has the procedure and the proof. The path's data is not
// read, but for nodes of builds that carried no size in their names, and
// is left as it is. The path is a container node, deleted once it has no
// children. A Semaphore is safe for concurrent use. The zero value is not
// usable: use [NewSemaphore].
type Semaphore struct {
	path   string
	max    int
	kind   SemaphoreLayout
	layout semLayout
}

// semLayout is one way of keeping a semaphore's leases on ZooKeeper
// ([SemaphoreLayout]): zklock's own (a lock on the path), or Curator's or
// kazoo's (an inner lock taken around each acquire, semaphore_layout.go).
// [NewSemaphore] chooses one; the Semaphore's methods only call it.
type semLayout interface {
	// acquire takes n leases, or fails; op names the call in errors.
	acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error)
	participants(ctx context.Context) ([]Participant, error)
	// checkN refuses an n the layout cannot grant at all.
	checkN(n int) error
}

// NewSemaphore returns a semaphore of maxLeases leases on path. It validates
// its arguments (maxLeases outside [1, 2147483647], an option that does not
// fit the layout and the rest wrap ErrInvalidArgument) and makes no
// ZooKeeper call. With [WithSharedCount], maxLeases is the count's seed.
func NewSemaphore(c *Client, path string, maxLeases int, opts ...LockOption) (*Semaphore, error) {
	s, err := newSemaphore(c, path, maxLeases, opts)
	if err != nil {
		return nil, opError("new semaphore", path, err)
	}
	return s, nil
}

func newSemaphore(c *Client, path string, maxLeases int, opts []LockOption) (*Semaphore, error) {
	if maxLeases < 1 || maxLeases > math.MaxInt32 {
		return nil, invalidf("maxLeases %d is out of range [1, %d]", maxLeases, math.MaxInt32)
	}
	cfg, o, err := newLockConfig(c, path, newSemaphorePolicy(maxLeases), opts)
	if err == nil {
		err = o.only(true, false)
	}
	if err != nil {
		return nil, err
	}
	var so semOptions
	if o.sem != nil {
		so = *o.sem
	}
	layout, err := newSemLayout(cfg, so, maxLeases)
	if err != nil {
		return nil, err
	}
	return &Semaphore{path: path, max: maxLeases, kind: so.layout, layout: layout}, nil
}

// zklockLayout is [LayoutZklock]: a lock on the path, whose policy counts
// ([semaphorePolicy]).
type zklockLayout struct {
	lock *Lock
	max  int
}

func (z zklockLayout) acquire(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	return z.lock.acquire(ctx, op, n, try)
}

func (z zklockLayout) participants(ctx context.Context) ([]Participant, error) {
	return z.lock.Participants(ctx)
}

func (z zklockLayout) checkN(n int) error { return checkN(n, z.max) }

// checkN refuses n outside [1, max].
func checkN(n, max int) error {
	if n < 1 || n > max {
		return invalidf("n %d is out of range [1, %d]", n, max)
	}
	return nil
}

// Acquire waits for one lease; see [Lock.Acquire]. Under the Curator and
// kazoo layouts it first takes the layout's inner lock and releases it
// once it holds the lease, or fails; a cancelled acquire leaves neither the
// lease node nor the inner lock's node behind. The lease's token is, as
// under zklock's layout, the pzxid of the read that granted it (Curator's
// layout), or its node's czxid (kazoo's).
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return s.acquireOne(ctx, "acquire", false)
}

// TryAcquire takes a lease if one is free and nobody is queued ahead (under
// the Curator and kazoo layouts: if nobody holds the inner lock);
// otherwise it returns an error wrapping ErrLocked and leaves no node
// behind.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.acquireOne(ctx, "try acquire", true)
}

func (s *Semaphore) acquireOne(ctx context.Context, op string, try bool) (*Lease, error) {
	leases, err := s.acquireN(ctx, op, 1, try)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// AcquireN waits for n leases at once: all n, or none. The n nodes are
// created in one multi-operation and queue together, so the caller never
// holds part of its request while it waits for the rest (two callers each
// holding half of what they need can never deadlock). On failure, as with
// Acquire, none of the n nodes is left behind. n < 1 or n > maxLeases fails
// with ErrInvalidArgument before any ZooKeeper call (with a SharedCount,
// only n < 1: the count may grow). The leases share one token and are
// released one by one.
//
// Under the Curator layout the n lease nodes are created together while
// the inner mutex is held, and wait together until at most the size are
// there: Curator counts them as n leases. Curator's own acquire(qty) takes
// its leases one by one, so a Curator process may hold part of its request
// while it waits for the rest, and two such requests can deadlock each
// other (and one of ours), as between Curator processes. Under the kazoo
// layout n > 1 fails with ErrInvalidArgument: kazoo has no such request.
func (s *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	return s.acquireN(ctx, "acquire "+strconv.Itoa(n)+" of", n, false)
}

func (s *Semaphore) acquireN(ctx context.Context, op string, n int, try bool) ([]*Lease, error) {
	err := s.layout.checkN(n)
	if err == nil && n > math.MaxInt32 {
		err = invalidf("n %d is out of range [1, %d]", n, math.MaxInt32)
	}
	if err != nil {
		return nil, opError(op, s.path, err)
	}
	leases, err := s.layout.acquire(ctx, op, n, try)
	return leases, opError(op, s.path, err)
}

// TryAcquireN takes n leases at once if they are free and nobody is queued
// ahead, without waiting for anyone; otherwise it returns an error wrapping
// ErrLocked and leaves none of the n nodes behind. Arguments as for
// [Semaphore.AcquireN].
func (s *Semaphore) TryAcquireN(ctx context.Context, n int) ([]*Lease, error) {
	return s.acquireN(ctx, "try acquire "+strconv.Itoa(n)+" of", n, true)
}

// Participants lists the holders first, then the waiters in queue order,
// with their node data and, under zklock's layout, the size each was made
// with ([Participant.Size]; [SizeInForce] is the size in force). Under the
// Curator layout these are the lease nodes (not the inner mutex's
// waiters); under kazoo's, the holders only (kazoo's waiters queue on its
// lock).
func (s *Semaphore) Participants(ctx context.Context) ([]Participant, error) {
	ps, err := s.layout.participants(ctx)
	return ps, opError("participants", s.path, err)
}

// foreignSemaphore reports a plain child that belongs to another library's
// semaphore on the same path: Curator's InterProcessSemaphoreV2 keeps its
// nodes under "locks" and "leases", kazoo's Semaphore writes one node per
// holder named by a 32-hex-digit id. A zklock Semaphore cannot count those
// holders, so it refuses the path rather than grant too many leases.
func foreignSemaphore(name string) bool {
	return name == "locks" || name == "leases" || (len(name) == kazooIDLen && isHex(name))
}

// SemaphoreSize reads a semaphore's size from the data of its path, as
// kazoo's Semaphore records it ("3"), and so zklock's under [LayoutKazoo]
// (zklock's own layout records none: each lease node carries its
// participant's size, see [Participant.Size]), by the rules the Semaphore
// itself applies: ok is false for data that is not a size record, and for
// a size out of [1, 2147483647].
func SemaphoreSize(data []byte) (n int, ok bool) {
	v, ok := parseSize(data)
	if !ok || v < 1 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// parseSize reads a semaphore path's data as kazoo's Semaphore does,
// int(data.decode("utf-8")): surrounding white space, an optional sign,
// and decimal digits, single underscores allowed between them; the digits
// of any script count, as Python's int() reads them ("٣" is 3). ok is false
// for anything else (empty data too): that is not a size record. A number
// too large for an int64 reads as 0, which no semaphore's size equals.
func parseSize(data []byte) (n int64, ok bool) {
	s := asciiDigits(strings.TrimSpace(string(data)))
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || digits[0] == '_' || digits[len(digits)-1] == '_' ||
		strings.Contains(digits, "__") {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if (digits[i] < '0' || digits[i] > '9') && digits[i] != '_' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s[:len(s)-len(digits)]+strings.ReplaceAll(digits, "_", ""), 10, 64)
	if err != nil {
		return 0, true // out of range: a number all the same
	}
	return n, true
}

// asciiDigits replaces each decimal digit of another script in s by its
// ASCII digit, as CPython's int() does first
// (_PyUnicode_TransformDecimalAndSpaceToASCII). Unicode encodes every
// script's decimal digits as runs of 0 to 9, so a digit's value is its
// distance from the start of its run of digits, modulo 10.
func asciiDigits(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r > unicode.MaxASCII && unicode.IsDigit(r) }) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r <= unicode.MaxASCII || !unicode.IsDigit(r) {
			return r
		}
		zero := r
		for unicode.IsDigit(zero - 1) {
			zero--
		}
		return '0' + (r-zero)%10
	}, s)
}
