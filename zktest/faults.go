package zktest

import (
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zklock/faults"
)

// Faults is [faults.Faults]: a client transport that breaks on demand. It
// needs no Docker, so it lives in the library's module; zktest keeps the
// name for the tests that use both.
type Faults = faults.Faults

// ErrPartitioned is [faults.ErrPartitioned].
var ErrPartitioned = faults.ErrPartitioned

// ZooKeeper request opcodes, for [Faults.DropAfter].
const (
	OpCreate       = faults.OpCreate
	OpDelete       = faults.OpDelete
	OpGetData      = faults.OpGetData
	OpGetChildren2 = faults.OpGetChildren2
	OpMulti        = faults.OpMulti
)

// NewFaults is [faults.New].
func NewFaults(dial zk.Dialer) *Faults { return faults.New(dial) }
