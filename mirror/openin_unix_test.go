//go:build unix

package mirror

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// TestFIFOSwappedInAsAToolReplacesIsKept: a FIFO put in a file's place at
// the very moment a tool's write replaces the file, with a writer that
// never writes, is the person's: the write returns a conflict at once,
// instead of reading the FIFO for ever with the store's lock held, and
// the FIFO is back in its place.
func TestFIFOSwappedInAsAToolReplacesIsKept(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	var writer *os.File
	defer func() {
		if writer != nil {
			writer.Close()
		}
	}()
	w.dir.hook = func(at, key string) {
		if at != "aside" {
			return
		}
		w.dir.hook = nil
		fifo := w.path(".fact.fifo")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Skipf("no FIFO here: %v", err)
		}
		var err error
		if writer, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil { // a writer that never writes
			t.Fatal(err)
		}
		if err := os.Rename(fifo, w.path("fact.md")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.update("fact", "From a tool.")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, memory.ErrConflict) {
			t.Errorf("write: %v, want a conflict", err)
		}
	case <-time.After(10 * time.Second):
		writer.Write([]byte("x")) // let the stuck read go
		writer.Close()
		writer = nil
		t.Fatal("the write waited on the FIFO put in the file's place")
	}
	if fi, err := os.Lstat(w.path("fact.md")); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("fact.md after the write: %v, %v; want the FIFO put back", fi, err)
	}
}

// TestFIFOSwappedInAsAToolRemovesIsKept is the same for a removal: the
// FIFO put in the file's place after it was checked is moved aside, seen
// for what it is without a read, and put back.
func TestFIFOSwappedInAsAToolRemovesIsKept(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	var writer *os.File
	defer func() {
		if writer != nil {
			writer.Close()
		}
	}()
	w.dir.hook = func(at, key string) {
		if at != "checked" {
			return
		}
		w.dir.hook = nil
		fifo := w.path(".fact.fifo")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Skipf("no FIFO here: %v", err)
		}
		var err error
		if writer, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(fifo, w.path("fact.md")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.del(w.ctx, "fact") }()
	select {
	case err := <-done:
		if !errors.Is(err, memory.ErrConflict) {
			t.Errorf("delete: %v, want a conflict", err)
		}
	case <-time.After(10 * time.Second):
		writer.Write([]byte("x"))
		writer.Close()
		writer = nil
		t.Fatal("the removal waited on the FIFO put in the file's place")
	}
	if fi, err := os.Lstat(w.path("fact.md")); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("fact.md after the removal: %v, %v; want the FIFO put back", fi, err)
	}
}
