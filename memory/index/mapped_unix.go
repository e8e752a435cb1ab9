//go:build unix

package index

import (
	"os"
	"syscall"
)

// mapBytes returns an anonymous private mapping of at least n bytes, whole
// pages, or nil if the system refuses one.
func mapBytes(n int) []byte {
	page := os.Getpagesize()
	n = (n + page - 1) / page * page
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// unmapBytes unmaps m, a mapping as mapBytes returned it; nil is none.
func unmapBytes(m []byte) {
	if m != nil {
		syscall.Munmap(m)
	}
}
