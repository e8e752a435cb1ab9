//go:build unix

package mirror

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
