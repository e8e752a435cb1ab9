package mirror

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestNoHardLinks: on a file system where link(2) fails but rename(2)
// works (vfat, exfat, some FUSE file systems), new facts are still
// written, and nothing is left in the temporary directory. It runs in a
// child process, so that the seccomp filter it installs reaches nothing
// else.
func TestNoHardLinks(t *testing.T) {
	if os.Getenv("MIRROR_CHILD") != t.Name() {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "MIRROR_CHILD="+t.Name())
		out, err := cmd.CombinedOutput()
		switch {
		case strings.Contains(string(out), "--- SKIP"):
			t.Skip(string(out))
		case err != nil:
			t.Errorf("in a child process: %v\n%s", err, out)
		}
		return
	}
	w := newWS(t)
	denyLinks(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("link under the filter: %v, want EPERM", err)
	}
	if err := w.putErr("first", "The first."); err != nil {
		t.Errorf("new fact: %v", err)
	}
	if _, err := w.update("first", "Again."); err != nil {
		t.Errorf("update: %v", err)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	if rep := w.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync: %+v", rep)
	}
}

// denyLinks installs a seccomp filter on every thread of this process
// that makes link(2) and linkat(2) fail with EPERM, as they do on a file
// system without hard links. rename(2) is untouched.
func denyLinks(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the filter is written for amd64")
	}
	const sysLink = 86 // link(2) on amd64
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the syscall number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 2, Jf: 0, K: unix.SYS_LINKAT},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: sysLink},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Skip("no_new_privs:", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		t.Skip("seccomp:", e)
	}
}
