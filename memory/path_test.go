package memory

import (
	"os"
	"path/filepath"
	"testing"
)

// A database path holding characters that mean something in a URI (#, ?,
// %) opens that very file, not a file named by the path's prefix, which
// would be created beside it with the umask's mode.
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, name := range []string{"a#b", "a?b", "a%23b", "a b"} {
		dir := t.TempDir()
		path := filepath.Join(dir, name, "memory.db")
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		put(t, s, projA, Write{Type: Semantic, Key: "k", Body: "kept"})
		s.Close()
		fi, err := os.Stat(path)
		if err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: the database file is %v, %v", name, fi, err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s: the directory holds %v, want only %q", name, names, name)
		}
		s, err = openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Get(ctx, projA.ID, Selector{Key: "k"}); err != nil || r.Body != "kept" {
			t.Errorf("%s: reopened: %+v %v", name, r, err)
		}
		s.Close()
	}
}
