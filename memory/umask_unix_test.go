//go:build unix

package memory

import "syscall"

// setUmask sets the process's umask and returns the one before.
func setUmask(m int) int { return syscall.Umask(m) }
