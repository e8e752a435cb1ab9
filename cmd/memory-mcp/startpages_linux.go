package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// releaseStartPages lets go of the pages of the executable and its
// libraries that the process has mapped so far, once start-up is over.
// The kernel maps a file's pages 64 KiB around each one touched, and
// start-up touches code and tables all over the binary: some 130 package
// initialisers (crypto, TLS, HTTP, the PostgreSQL driver, which a stdio
// server may never use again), opening the database, inferring the
// tools' schemas. A stdio server held 15 MiB of mapped files after its
// initialize and used 11 of them once its calls began. The pages stay in
// the page cache, shared with every other process running the binary;
// the ones a call needs again come back with a minor fault.
//
// Only read-only private mappings of files whose pages are all the
// file's are let go: a page the process wrote to (relocations, a
// debugger's breakpoint) is its own copy, which dropping would undo.
// The kernel records the peak resident set before it unmaps, so the
// peak a process reports still counts the pages it let go.
func releaseStartPages() {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	spans, err := filePages(f)
	f.Close()
	if err != nil {
		return
	}
	// From here on, a page comes back alone (see mapTouchedOnly); where
	// the kernel will not, 64 KiB of them around it, as before.
	mapTouchedOnly(spans)
	for _, s := range spans {
		// Best effort: a mapping that went away in between is EINVAL or
		// nothing at all.
		unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED)
	}
}

// span is an address range, [start, end).
type span struct{ start, end uintptr }

// filePages reads a smaps listing and returns the mappings that are
// private, read-only copies of a file with no page of the process's own,
// resident or swapped out, and not locked.
func filePages(r io.Reader) ([]span, error) {
	var (
		out   []span
		cur   span
		ok    bool // cur is a candidate so far
		owned bool // cur has anonymous or swapped pages
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		field, rest, _ := bytes.Cut(line, []byte(" "))
		if len(field) == 0 {
			continue
		}
		if field[len(field)-1] != ':' {
			// A mapping's first line: range, permissions, offset,
			// device, inode, path.
			cur, ok, owned = mapping(field, rest)
			continue
		}
		if !ok {
			continue
		}
		switch string(field) {
		case "Anonymous:", "Swap:":
			if kb := bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB"))); string(kb) != "0" {
				owned = true
			}
		case "VmFlags:":
			// The last line of a mapping.
			if !owned && !hasFlag(rest, "lo") {
				out = append(out, cur)
			}
			ok = false
		}
	}
	return out, sc.Err()
}

// mapping parses the first line of a mapping (its range, then the rest
// of the line) and reports whether it may hold pages to let go: private,
// not writable, and a file's.
func mapping(rng, rest []byte) (span, bool, bool) {
	lo, hi, found := bytes.Cut(rng, []byte("-"))
	if !found {
		return span{}, false, false
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	fields := bytes.Fields(rest)
	if err1 != nil || err2 != nil || end <= start || len(fields) < 5 {
		return span{}, false, false
	}
	perms := fields[0]
	if len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
		return span{}, false, false
	}
	// The path: a file's is absolute; [vdso], [heap] and the like are not.
	if !bytes.HasPrefix(fields[4], []byte("/")) {
		return span{}, false, false
	}
	return span{uintptr(start), uintptr(end)}, true, false
}

func hasFlag(flags []byte, flag string) bool {
	for _, f := range bytes.Fields(flags) {
		if string(f) == flag {
			return true
		}
	}
	return false
}
