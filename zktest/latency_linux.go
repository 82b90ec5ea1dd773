//go:build linux

package zktest

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waiter waits out a chunk's delay on a timerfd of its own. Go's timers
// wake through epoll_wait, whose timeout is in whole milliseconds
// (runtime/netpoll_epoll.go, netpoll: a wait under 1ms is 1ms, a longer
// one is cut to whole ms and the rest waited again), so time.Sleep(1.5ms)
// lasts about 2.1ms and a 3ms round trip would be 4ms and more. A timerfd
// is a high-resolution timer read through the netpoller like a socket: it
// fires within microseconds of its time, never before it (timerfd_create(2)),
// and parks only the goroutine. Where one cannot be made, time.Sleep.
type waiter struct {
	fd int      // the timerfd, set through this
	f  *os.File // and read through this, pollable (never call its Fd: it would block)
}

func newWaiter() waiter {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return waiter{fd: -1}
	}
	return waiter{fd: fd, f: os.NewFile(uintptr(fd), "zktest-delay-timer")}
}

// sleep returns once d has passed.
func (w waiter) sleep(d time.Duration) {
	if w.f == nil {
		time.Sleep(d)
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		time.Sleep(d)
		return
	}
	var expirations [8]byte
	if _, err := w.f.Read(expirations[:]); err != nil {
		time.Sleep(d)
	}
}

func (w waiter) close() {
	if w.f != nil {
		_ = w.f.Close()
	}
}
