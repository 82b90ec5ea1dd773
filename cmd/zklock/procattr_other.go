//go:build unix && !linux

package main

import "syscall"

// childAttr starts the command in a process group of its own. Only Linux
// has Pdeathsig: elsewhere a command outlives a zklock killed with
// SIGKILL, and it does not take the terminal (zklock is made for Linux).
func childAttr() (attr *syscall.SysProcAttr, foreground bool) {
	return &syscall.SysProcAttr{Setpgid: true}, false
}

func takeTerminal() {}
