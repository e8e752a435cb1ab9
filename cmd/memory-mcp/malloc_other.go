//go:build !linux || !cgo

package main

// oneMallocArena does nothing where the C allocator is not glibc's.
func oneMallocArena(getenv func(string) string) bool { return false }

// mallocArenas is -1: the count is glibc's.
func mallocArenas() int { return -1 }
