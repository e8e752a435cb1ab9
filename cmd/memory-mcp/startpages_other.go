//go:build !linux

package main

// releaseStartPages does nothing here: letting go of mapped pages is
// Linux's (see startpages_linux.go).
func releaseStartPages() {}
