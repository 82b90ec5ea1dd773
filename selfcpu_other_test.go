//go:build !unix

package zklock_test

import "time"

// selfCPU is not measured here: the benchmarks report 0.
func selfCPU() time.Duration { return 0 }
