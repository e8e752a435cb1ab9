//go:build unix

package mirror

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"prom.codes/memory-mcp/memory"
)

// TestReadRegularDoesNotWaitOnAFIFO replaces a memory file, between the
// look at it and its read, with a FIFO nobody writes to: the read must
// say the file was replaced, not wait for a writer for ever, which would
// hang the server's call and every call after it.
func TestReadRegularDoesNotWaitOnAFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fact.md")
	if err := os.WriteFile(path, []byte("---\n---\nA fact.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := r.Lstat("fact.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readRegular(r, "fact.md", fi)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errReplaced) {
			t.Fatalf("read of a FIFO put in the file's place: %v, want errReplaced", err)
		}
	case <-time.After(10 * time.Second):
		// Let the blocked open go before the test ends.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("the read waited for a writer of the FIFO put in the file's place")
	}
}

// TestThingsSwappedInAreKept: whatever a person puts in a file's place as
// a tool writes or removes it (a FIFO with a writer that never writes, a
// socket, a symlink leading out of the directory, a directory) is theirs:
// the call returns a conflict saying it is not a regular file, at once,
// and the thing stays in its place: never read (a FIFO would be read for
// ever with the store's lock held), deleted or overwritten.
func TestThingsSwappedInAreKept(t *testing.T) {
	// unstick lets a read of the FIFO go, if one is stuck.
	var unstick func()
	kinds := map[string]struct {
		make func(t *testing.T, path string)
		is   func(fs.FileInfo) bool
	}{
		"FIFO": {
			make: func(t *testing.T, path string) {
				if err := unix.Mkfifo(path, 0o644); err != nil {
					t.Skipf("no FIFO here: %v", err)
				}
				writer, err := os.OpenFile(path, os.O_RDWR, 0) // a writer that never writes
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { writer.Close() })
				unstick = func() { writer.Write([]byte("x")); writer.Close() }
			},
			is: func(fi fs.FileInfo) bool { return fi.Mode().Type() == fs.ModeNamedPipe },
		},
		"socket": {
			make: func(t *testing.T, path string) {
				short, err := os.MkdirTemp("", "s")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(short) })
				l, err := net.Listen("unix", filepath.Join(short, "s"))
				if err != nil {
					t.Skipf("no Unix socket here: %v", err)
				}
				t.Cleanup(func() { l.Close() })
				if err := os.Rename(filepath.Join(short, "s"), path); err != nil {
					t.Fatal(err)
				}
			},
			is: func(fi fs.FileInfo) bool { return fi.Mode().Type() == fs.ModeSocket },
		},
		"symlink out": {
			make: func(t *testing.T, path string) {
				out := filepath.Join(t.TempDir(), "elsewhere.md")
				if err := os.WriteFile(out, []byte("Not a memory.\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(out, path); err != nil {
					t.Fatal(err)
				}
			},
			is: func(fi fs.FileInfo) bool { return fi.Mode().Type() == fs.ModeSymlink },
		},
		"directory": {
			make: func(t *testing.T, path string) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			is: func(fi fs.FileInfo) bool { return fi.IsDir() },
		},
	}
	for name, k := range kinds {
		for _, op := range []string{"write", "remove"} {
			t.Run(name+"/"+op, func(t *testing.T) {
				w := newWS(t)
				w.put(memory.Semantic, "fact", "", "Old.")
				w.dir.hook = func(got, key string) {
					if got != "checked" {
						return
					}
					w.dir.hook = nil
					if err := os.Remove(w.path("fact.md")); err != nil {
						t.Fatal(err)
					}
					k.make(t, w.path("fact.md"))
				}
				unstick = nil
				done := make(chan error, 1)
				go func() {
					if op == "write" {
						_, err := w.update("fact", "From a tool.")
						done <- err
					} else {
						done <- w.del(w.ctx, "fact")
					}
				}()
				select {
				case err := <-done:
					if !errors.Is(err, memory.ErrConflict) || !strings.Contains(err.Error(), "not a regular file") {
						t.Errorf("%s: %v, want a conflict saying it is not a regular file", op, err)
					}
				case <-time.After(10 * time.Second):
					if unstick != nil {
						unstick()
					}
					t.Fatalf("the %s waited on the %s put in the file's place", op, name)
				}
				if fi, err := os.Lstat(w.path("fact.md")); err != nil || !k.is(fi) {
					t.Errorf("fact.md after the %s: %v, %v; want the %s put back", op, fi, err, name)
				}
			})
		}
	}
}

// TestReadWaitsOutALease: a file another process holds a write lease on
// (as a file server does) makes a non-blocking open fail at once;
// readRegular then opens it the usual way, which waits for the lease to
// be given up.
func TestReadWaitsOutALease(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fact.md"), []byte("A fact.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(filepath.Join(dir, "fact.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	fd := holder.Fd()
	if _, err := unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Skipf("no lease here: %v", err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(100 * time.Millisecond)
		unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
	}()
	defer func() { <-released }()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := r.Lstat("fact.md")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readRegular(r, "fact.md", fi); err != nil || string(got) != "A fact.\n" {
		t.Fatalf("read of a file under a lease: %q, %v", got, err)
	}
}

// TestHugeFileSwappedInIsKept: a file far past the size limit put in a
// file's place as a tool writes or removes it is read back no further
// than the limit, and is the person's: a conflict, and it stays whole.
func TestHugeFileSwappedInIsKept(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), 16*maxFileBytes)
	for _, op := range []string{"write", "remove"} {
		t.Run(op, func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "fact", "", "Old.")
			w.dir.hook = func(got, _ string) {
				if got == "checked" {
					w.dir.hook = nil
					if err := os.WriteFile(w.path("fact.md"), huge, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var err error
			if op == "write" {
				_, err = w.update("fact", "From a tool.")
			} else {
				err = w.del(w.ctx, "fact")
			}
			if !errors.Is(err, memory.ErrConflict) {
				t.Errorf("%s: %v, want a conflict", op, err)
			}
			if got := w.read("fact.md"); !bytes.Equal(got, huge) {
				t.Errorf("fact.md after the %s: %d bytes, want the person's %d", op, len(got), len(huge))
			}
		})
	}
}
