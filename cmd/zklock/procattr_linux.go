package main

import (
	"syscall"
	"unsafe"
)

// childAttr returns how to start the command: in a process group of its
// own, so that zklock can signal everything it started, and killed if
// zklock dies (Pdeathsig; see startOnThread). If zklock runs in the foreground of
// a terminal, the command's group takes the terminal (foreground is true):
// a command in a background group that read from it would be stopped by
// SIGTTIN, and the keys that send signals (^C, ^\) reach it as they
// would without zklock.
func childAttr() (attr *syscall.SysProcAttr, foreground bool) {
	attr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if pgrp, ok := terminalGroup(); ok && pgrp == syscall.Getpgrp() {
		attr.Foreground, attr.Ctty = true, 0
		foreground = true
	}
	return attr, foreground
}

// takeTerminal makes zklock's process group the terminal's foreground
// group again, so that whoever started zklock (a script in the same group)
// keeps the terminal after it. SIGTTOU must be ignored.
func takeTerminal() {
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}

// terminalGroup returns the foreground process group of the terminal on
// stdin, if stdin is zklock's controlling terminal.
func terminalGroup() (int, bool) {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp)))
	return int(pgrp), errno == 0
}
