package mirror

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"prom.codes/memory-mcp/memory"
)

// TestWriteOverFileHeldOpen: Windows refuses to rename over a file another
// process holds open without sharing its deletion; a write waits for it to
// be let go instead of failing.
func TestWriteOverFileHeldOpen(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	name, err := windows.UTF16PtrFromString(w.path("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(name, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := time.AfterFunc(200*time.Millisecond, func() { windows.CloseHandle(h) })
	defer func() {
		if released.Stop() {
			windows.CloseHandle(h)
		}
	}()
	if _, err := w.st.Update(w.ctx, w.project(), memory.Selector{Key: "deploy"}, memory.Patch{Body: ptr("Deploy on Tuesday.")}); err != nil {
		t.Fatalf("update while the file is held open: %v", err)
	}
	if b := w.read("deploy.md"); !strings.Contains(string(b), "Deploy on Tuesday.") {
		t.Errorf("deploy.md = %q", b)
	}
}
