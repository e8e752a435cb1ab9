//go:build !unix

package main

import "errors"

// mkfifo fails where there are no named pipes in the file system.
func mkfifo(path string) error { return errors.ErrUnsupported }
