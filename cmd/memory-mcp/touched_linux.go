//go:build linux && cgo

package main

/*
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

// touched is the userfaultfd mappings are registered with (see
// mapTouchedOnly), or -errno if it could not be had, once touched_asked.
// It stays open as long as the process runs: closing it would undo the
// registrations.
static int touched, touched_asked;

// touched_open opens the userfaultfd, once: one that may mark mappings
// of any kind for asynchronous write protection (Linux 6.7 and later),
// for faults in user mode only (what an unprivileged process may ask
// for). It returns the descriptor or -errno.
static int touched_open(void) {
	if (touched_asked) return touched;
	touched_asked = 1;
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0) return touched = -errno;
	if (fd <= 2) {
		// Started with stdin, stdout or stderr closed: the descriptor
		// must not become one of them, where the Go runtime would take
		// it for the server's input or output.
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		int e = errno;
		close(fd);
		if (high < 0) return touched = -e;
		fd = high;
	}
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
	if (ioctl(fd, UFFDIO_API, &api) != 0) {
		int e = errno;
		close(fd);
		return touched = -e;
	}
	return touched = fd;
}

// touched_register registers [start, start+len) and keeps its pages from
// being mapped as huge pages: 0, or -errno.
static int touched_register(unsigned long start, unsigned long len) {
	int fd = touched_open();
	if (fd < 0) return fd;
	struct uffdio_register r = {.range = {.start = start, .len = len}, .mode = UFFDIO_REGISTER_MODE_WP};
	if (ioctl(fd, UFFDIO_REGISTER, &r) != 0) return -errno;
	// A fault on a page of a large folio of the page cache otherwise
	// maps the whole folio, as a huge page where it can.
	madvise((void *)start, len, MADV_NOHUGEPAGE);
	return 0;
}

// memory_mcp_touched_only registers every private read-only mapping of a
// file in the process, from the stdio server's constructor (see
// memory_mcp_stdio), before the Go runtime and its packages start.
void memory_mcp_touched_only(void) {
	if (touched_open() < 0) return;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f) return;
	char line[4096 + 128];
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[5];
		int path = 0;
		if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &lo, &hi, perms, &path) < 3) continue;
		if (hi <= lo || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' || path == 0 || line[path] != '/') continue;
		touched_register(lo, hi - lo);
	}
	fclose(f);
}
*/
import "C"

import "syscall"

// mapTouchedOnly makes the kernel map each page of the given mappings
// (read-only private mappings of files: the executable's code, tables
// and read-only data, libc's) only once the process touches it.
//
// A page fault on a file's mapping otherwise maps the pages of the
// file's page cache 64 KiB around the one touched ("fault-around"), and
// this kernel maps a large folio of the page cache whole; the resident
// set then counts code and tables the process never runs or reads. A
// stdio server held 12.4 MiB mapped from files after a side-by-side run
// and touched 7 of them. The kernel maps one page at a time where a
// mapping is registered with a userfaultfd for write protection, and
// Linux 6.7 lets a process register mappings of any kind when the
// protection is asynchronous (resolved by the kernel, with no thread to
// handle faults). Nothing here ever asks for a page to be protected, and
// the mappings are read-only, so no fault ever reaches the descriptor.
//
// The stdio server registers its mappings from its constructor (see
// memory_mcp_stdio), so that its package initialisers map only what they
// touch too; this registers them again (a no-op) or, in a process that
// did not start so, for the first time. Where the kernel refuses (one
// before 6.7, a seccomp filter, userfaultfd built out), pages map as
// before; the error says why.
func mapTouchedOnly(spans []span) error {
	var first error
	for _, s := range spans {
		// A mapping that went away in between is EINVAL or ENOMEM.
		if e := C.touched_register(C.ulong(s.start), C.ulong(s.end-s.start)); e < 0 && first == nil {
			first = syscall.Errno(-e)
		}
	}
	return first
}

// touchedErr is why the process has no userfaultfd to register its
// mappings with, if it has none.
func touchedErr() error {
	if e := C.touched_open(); e < 0 {
		return syscall.Errno(-e)
	}
	return nil
}
