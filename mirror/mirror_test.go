package mirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

func TestOpen(t *testing.T) {
	if _, err := Open("relative/root"); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("relative root: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing root accepted")
	}
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, ".prometheus", "memories"); d.Path() != want {
		t.Errorf("Path() = %s, want %s", d.Path(), want)
	}
	if _, err := os.Stat(filepath.Join(root, ".prometheus")); !os.IsNotExist(err) {
		t.Errorf("Open created the directory: %v", err)
	}
}

func TestSymlinkedDirectories(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, root, outside string)
		want string // "" for accepted
	}{
		{"memories outside", func(t *testing.T, root, outside string) {
			mkdir(t, filepath.Join(root, ".prometheus"))
			symlink(t, outside, filepath.Join(root, ".prometheus", "memories"))
		}, "outside the workspace"},
		{".prometheus outside", func(t *testing.T, root, outside string) {
			symlink(t, outside, filepath.Join(root, ".prometheus"))
		}, "outside the workspace"},
		{"relative escape", func(t *testing.T, root, outside string) {
			mkdir(t, filepath.Join(root, ".prometheus"))
			rel, _ := filepath.Rel(filepath.Join(root, ".prometheus"), outside)
			symlink(t, rel, filepath.Join(root, ".prometheus", "memories"))
		}, "outside the workspace"},
		{"dangling", func(t *testing.T, root, outside string) {
			symlink(t, filepath.Join(outside, "nowhere"), filepath.Join(root, ".prometheus"))
		}, "does not resolve"},
		{"a file", func(t *testing.T, root, outside string) {
			os.WriteFile(filepath.Join(root, ".prometheus"), []byte("x"), 0o644)
		}, "not a directory"},
		{"inside the workspace", func(t *testing.T, root, outside string) {
			mkdir(t, filepath.Join(root, "docs", "memories"))
			mkdir(t, filepath.Join(root, ".prometheus"))
			symlink(t, filepath.Join("..", "docs", "memories"), filepath.Join(root, ".prometheus", "memories"))
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			tt.make(t, root, outside)
			_, err := Open(root)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestSymlinkAppearsLater: a checkout can swap the directory for a symlink
// under a running server; Sync and every write refuse it from then on.
func TestSymlinkAppearsLater(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	outside := t.TempDir()
	if err := os.RemoveAll(w.dir.Path()); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, w.dir.Path())

	if _, err := Sync(w.ctx, w.st, w.p, w.dir); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("Sync: %v", err)
	}
	if _, ok := w.mirrored()["fact"]; !ok {
		t.Error("a refused directory deleted the records")
	}
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "other", Body: "x"})
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("Put: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("files written outside the workspace: %v", entries)
	}
}

// TestUnusableDirectoryKeepsRecords: only a directory that is really not
// there deletes records; a dangling link or a vanished workspace is an
// error.
func TestUnusableDirectoryKeepsRecords(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	prom := filepath.Join(w.root, ".prometheus")
	os.RemoveAll(prom)
	symlink(t, filepath.Join(w.root, "nowhere"), prom)
	if _, err := Sync(w.ctx, w.st, w.p, w.dir); err == nil || !strings.Contains(err.Error(), "does not resolve") {
		t.Errorf("Sync through a dangling link: %v", err)
	}
	os.Remove(prom)
	gone := w.root + ".moved"
	if err := os.Rename(w.root, gone); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(gone, w.root)
	if _, err := Sync(w.ctx, w.st, w.p, w.dir); err == nil {
		t.Error("Sync of a vanished workspace succeeded")
	}
	if _, ok := w.mirrored()["fact"]; !ok {
		t.Error("record deleted")
	}
}

func TestSymlinkFile(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	secretFile := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secretFile, []byte("# Not a memory\n\nPrivate.\n"), 0o600)
	symlink(t, secretFile, w.path("linked.md"))

	rep := w.sync()
	if len(rep.Problems) != 1 || rep.Problems[0].Path != ".prometheus/memories/linked.md" || !strings.Contains(rep.Problems[0].Reason, "symlink") {
		t.Errorf("problems: %+v", rep.Problems)
	}
	if _, err := w.peek("linked"); err == nil {
		t.Error("the symlink's target was imported")
	}
	// Writing that key neither follows nor replaces the link.
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "linked", Body: "Overwrite?"})
	if err == nil {
		t.Error("Put through a symlinked file succeeded")
	}
	if b, _ := os.ReadFile(secretFile); string(b) != "# Not a memory\n\nPrivate.\n" {
		t.Errorf("target changed: %q", b)
	}
	if fi, err := os.Lstat(w.path("linked.md")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link replaced: %v", err)
	}
	// Replacing a file by a symlink keeps the record (a refused file
	// changes nothing) and deleting the record leaves the link alone.
	os.Remove(w.path("fact.md"))
	symlink(t, secretFile, w.path("fact.md"))
	w.sync()
	if _, err := w.peek("fact"); err != nil {
		t.Errorf("fact: %v", err)
	}
	lvl := scope.Project
	if _, err := w.st.Delete(context.Background(), w.project(), memory.Selector{Key: "fact", Scope: &lvl}); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := os.Lstat(w.path("fact.md")); err != nil {
		t.Errorf("link removed: %v", err)
	}
	if _, err := os.Stat(secretFile); err != nil {
		t.Errorf("target removed: %v", err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}
