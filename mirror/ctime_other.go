//go:build !linux

package mirror

import "io/fs"

// ctime is 0 where the change time is not at hand: size, mtime and the
// content hash then decide alone.
func ctime(fs.FileInfo) int64 { return 0 }

// inode is 0 where it is not at hand; files are not stamped there.
func inode(fs.FileInfo) uint64 { return 0 }

// links is 1 where the number of hard links is not at hand.
func links(fs.FileInfo) uint64 { return 1 }
