package zklock_test

import (
	"testing"

	"github.com/zkrecipes/zklock/zktest"
)

// One ZooKeeper per test binary (or ZKLOCK_TEST_SERVERS), terminated at the
// end.
func TestMain(m *testing.M) { zktest.Main(m) }
