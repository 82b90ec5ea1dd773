//go:build unix

package zklock_test

import (
	"syscall"
	"time"
)

// selfCPU returns the CPU time this process has used so far (user and
// system), as tools/zkbench measures a client's CPU per operation.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
