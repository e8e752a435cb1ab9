package mirror

import (
	"io/fs"
	"syscall"
)

// ctime is fi's change time in Unix nanoseconds. No tool can set it: an
// edit that puts back the old size and mtime (cp -p, rsync -a, tar) still
// moves it.
func ctime(fi fs.FileInfo) int64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return st.Ctim.Nano()
}

// inode is fi's inode number.
func inode(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return st.Ino
}

// links is fi's number of hard links.
func links(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}
