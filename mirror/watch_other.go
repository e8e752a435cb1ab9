//go:build !linux

package mirror

// watch is inotify's stand-in where there is none: it never knows, so every
// sync scans.
type watch struct{}

func newWatch(string) *watch                   { return nil }
func (*watch) changes() ([]string, bool, bool) { return nil, false, false }
func (*watch) close()                          {}
