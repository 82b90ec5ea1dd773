package session

import "testing"

// unguard turns the wire's protections against go-zookeeper's lastZxid
// race off until t ends, for the reproducer in race_repro_test.go: gate,
// the setWatches gate and the first-watch rule; zxid, the wire's keeping
// of lastZxid (anchor.go). Nothing but a test sets these switches; the
// library reads no environment for them. The test that calls it must not
// run in parallel with others.
func unguard(t *testing.T, gate, zxid bool) {
	t.Helper()
	unguardedGate.Store(gate)
	unguardedZxid.Store(zxid)
	t.Cleanup(func() {
		unguardedGate.Store(false)
		unguardedZxid.Store(false)
	})
}
