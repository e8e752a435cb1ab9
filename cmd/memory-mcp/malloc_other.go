//go:build !linux || !cgo

package main

// oneMallocArena is false where the C allocator is not glibc's.
func oneMallocArena() bool { return false }

// mallocArenas is -1: the count is glibc's.
func mallocArenas() int { return -1 }
