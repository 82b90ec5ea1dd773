//go:build !linux

package zktest

import "time"

// waiter waits out a chunk's delay with time.Sleep, as precise as the
// platform's timers.
type waiter struct{}

func newWaiter() waiter { return waiter{} }

func (waiter) sleep(d time.Duration) { time.Sleep(d) }

func (waiter) close() {}
