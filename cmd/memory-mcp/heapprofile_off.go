//go:build !heapprofile

package main

import (
	"fmt"
	"os"
)

// writeHeapProfile says, if a heap profile is asked for, that this build
// has none (see heapprofile.go). Stderr: stdout carries only frames.
func writeHeapProfile(path string) {
	if path != "" {
		fmt.Fprintln(os.Stderr, "memory-mcp: heap profile: not in this build; build with -tags heapprofile")
	}
}
