// Package zklock_test holds zklock's suites that need more than a
// ZooKeeper server: the chaos suite (containers it breaks), the
// interoperability suite (Curator and kazoo peers from tools/peers) and the
// goroutine-leak check (goleak). They are black-box tests of zklock's
// exported API, in a module of their own so that the library's module does
// not depend on what they use.
package zklock_test

import (
	"testing"

	"github.com/zkrecipes/zklock/zktest"
)

// One ZooKeeper per test binary (or ZKLOCK_TEST_SERVERS), terminated at the
// end.
func TestMain(m *testing.M) { zktest.Main(m) }
