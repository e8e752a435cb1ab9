package mirror

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// ignoreVolatile leaves out what files do not carry or a store sets itself.
var ignoreVolatile = cmpopts.IgnoreFields(memory.Record{}, "UseCount", "LastAccessedAt", "UpdatedAt", "Source", "SessionID")

func (w *ws) ls() []string {
	w.tb.Helper()
	entries, err := os.ReadDir(w.dir.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != tempSub {
			names = append(names, e.Name())
			continue
		}
		// The temporary directory counts only for what a write left in it.
		tmp, err := os.ReadDir(filepath.Join(w.dir.Path(), tempSub))
		if err != nil {
			w.tb.Fatal(err)
		}
		for _, t := range tmp {
			if t.Name() != ".gitignore" && !isCookie(t.Name()) {
				names = append(names, tempSub+"/"+t.Name())
			}
		}
	}
	return names
}

// snapshot is every file's bytes and mtime.
func (w *ws) snapshot() map[string]string {
	w.tb.Helper()
	m := map[string]string{}
	for _, name := range w.ls() {
		fi, err := os.Lstat(w.path(name))
		if err != nil {
			w.tb.Fatal(err)
		}
		b, _ := os.ReadFile(w.path(name))
		m[name] = fi.ModTime().String() + "\n" + string(b)
	}
	return m
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestRoundTripDBFilesDB(t *testing.T) {
	a := newWS(t)
	a.put(memory.Semantic, "test-runner", "Tests run with make test", "# Test runner\n\nRun `make test`.", "testing", "make")
	a.put(memory.Procedural, "deploy-staging", "Deploy to staging", "1. make image\n2. kubectl apply")
	conf := 0.9
	if _, _, err := a.st.Put(a.ctx, a.project(), memory.Write{
		Scope: scope.Project, Type: memory.Semantic, Key: "Go Version", Body: "Go 1.26.", Confidence: &conf,
		Metadata: map[string]string{"origin": "go.mod", "checked": "2025-03-01"},
	}); err != nil {
		t.Fatal(err)
	}
	// Not mirrored: another scope, another type.
	if _, _, err := a.st.Put(a.ctx, a.project(), memory.Write{Scope: scope.Workspace, Type: memory.Semantic, Key: "shared", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.st.Put(a.ctx, a.project(), memory.Write{Scope: scope.Project, Type: memory.Working, Key: "scratch", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"deploy-staging.md", "go-version.md", "test-runner.md"}, a.ls()); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	before := a.snapshot()

	// A second machine: same workspace, empty database.
	b := newWSAt(t, a.root, mustOpen(t, filepath.Join(t.TempDir(), "other.db")))
	rep := b.sync()
	if diff := cmp.Diff([]string{"deploy-staging", "go-version", "test-runner"}, sorted(rep.Imported)); diff != "" {
		t.Errorf("imported (-want +got):\n%s", diff)
	}
	if len(rep.Problems) > 0 {
		t.Errorf("problems: %v", rep.Problems)
	}
	if diff := cmp.Diff(a.mirrored(), b.mirrored(), ignoreVolatile); diff != "" {
		t.Errorf("records after DB → files → DB (-a +b):\n%s", diff)
	}
	if diff := cmp.Diff(before, b.snapshot()); diff != "" {
		t.Errorf("sync touched the files (-before +after):\n%s", diff)
	}
	if rep := b.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
}

func TestSyncImportsHandWritten(t *testing.T) {
	w := newWS(t)
	w.copyFixtures("good")
	before := w.snapshot()
	rep := w.sync()
	if diff := cmp.Diff([]string{"deploy-staging", "go-version", "hand-written", "test-runner"}, sorted(rep.Imported)); diff != "" {
		t.Errorf("imported (-want +got):\n%s", diff)
	}
	if len(rep.Problems) > 0 {
		t.Errorf("problems: %v", rep.Problems)
	}
	want := map[string]memory.Record{
		"go-version":   {Type: memory.Semantic, Description: "The Go version is pinned", Confidence: 0.5},
		"hand-written": {Type: memory.Procedural, Description: "Cut a release", Tags: []string{"release"}, Confidence: 0.5},
		"test-runner": {
			ID: "01JNB4Z8Q0M7V3K2D5T6R9WXYA", Type: memory.Semantic, Description: "Tests run with make test, not go test",
			Tags: []string{"testing", "make"}, Confidence: 0.8, CreatedAt: time.Date(2025, 2, 10, 14, 30, 0, 0, time.UTC),
		},
		"deploy-staging": {
			ID: "2f1c7a9e-4b3d-4e8a-9c1f-6d2b8e7a5c30", Type: memory.Procedural, Description: "Deploy to staging",
			Tags: []string{"deploy"}, Confidence: 0.6, CreatedAt: time.Date(2025, 1, 5, 8, 0, 0, 0, time.UTC),
			Metadata: map[string]string{"owner": "platform"},
		},
	}
	for key, want := range want {
		got, err := w.peek(key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		ignore := []string{"Scope", "Key", "Body", "UseCount", "LastAccessedAt", "UpdatedAt", "Source", "SessionID"}
		if want.ID == "" {
			ignore = append(ignore, "ID", "CreatedAt")
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(memory.Record{}, ignore...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", key, diff)
		}
		if got.Source != memory.FromMarkdown {
			t.Errorf("%s: source %q", key, got.Source)
		}
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("sync rewrote hand-written files (-before +after):\n%s", diff)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
}

func TestSyncProblems(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "stable", "A stable fact", "Stays as it was.")
	w.copyFixtures("good")
	w.copyFixtures("bad")
	secret := fakeSecret()
	w.write("leaked.md", "# Token\n\nThe CI token is "+secret+".\n")
	w.write("binary.md", "PNG\x00\x01\x02")
	w.write("huge.md", strings.Repeat("x", maxFileBytes+1))
	w.write("too-long.md", "# Long\n\n"+strings.Repeat("word ", 14000)) // over memory.MaxBodyBytes
	w.write("stable.md", "---\ntype: semantic\ndescription: [broken\n---\nNew text.\n")
	w.write("notes.txt", "not markdown: ignored")
	w.write(".hidden.md", "dotfiles: ignored")
	outside := filepath.Join(t.TempDir(), "target.md")
	os.WriteFile(outside, []byte("# Outside\n\nRead through a symlink.\n"), 0o644)
	if err := os.Symlink(outside, w.path("linked.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(w.path("folder.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := w.snapshot()

	rep := w.sync()
	want := map[string]string{
		".prometheus/memories/Bad Stem.md":      "rename it to bad-stem.md",
		".prometheus/memories/bad-yaml.md":      "not valid YAML",
		".prometheus/memories/binary.md":        "binary",
		".prometheus/memories/folder.md":        "not a regular file",
		".prometheus/memories/huge.md":          "256 KiB",
		".prometheus/memories/leaked.md":        "secret_rejected: body looks like a secret (rule github-pat",
		".prometheus/memories/linked.md":        "symlink",
		".prometheus/memories/no-body.md":       "invalid_argument: body is empty",
		".prometheus/memories/stable.md":        "not valid YAML",
		".prometheus/memories/too-long.md":      "too_large: body",
		".prometheus/memories/unknown-field.md": `field "title"`,
		".prometheus/memories/unknown-type.md":  `type "gossip" is unknown`,
		".prometheus/memories/working-note.md":  "semantic or procedural only",
	}
	check := func(rep Report) {
		t.Helper()
		got := map[string]string{}
		for _, p := range rep.Problems {
			got[p.Path] = p.Reason
			if strings.Contains(p.Reason, secret) || strings.Contains(p.Reason, "a1B2c3") {
				t.Errorf("%s: reason quotes the secret: %s", p.Path, p.Reason)
			}
		}
		for path, reason := range want {
			if !strings.Contains(got[path], reason) {
				t.Errorf("%s: reason %q does not say %q", path, got[path], reason)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d problems, want %d: %v", len(got), len(want), rep.Problems)
		}
	}
	check(rep)
	if diff := cmp.Diff([]string{"deploy-staging", "go-version", "hand-written", "test-runner"}, sorted(rep.Imported)); diff != "" {
		t.Errorf("imported (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("refused files changed (-before +after):\n%s", diff)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range w.mirrored() {
			if !yield(k) {
				return
			}
		}
	})
	if diff := cmp.Diff([]string{"deploy-staging", "go-version", "hand-written", "stable", "test-runner"}, keys); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if got, err := w.peek("stable"); err != nil || got.Body != "Stays as it was." {
		t.Errorf("stable = %q, %v; a refused file must not change its record", got.Body, err)
	}

	// Again, with nothing changed: the same problems, nothing else.
	rep = w.sync()
	check(rep)
	if rep.changed() {
		t.Errorf("second sync changed something: %+v", rep)
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("refused files changed (-before +after):\n%s", diff)
	}

	// Fixing a file clears its problem.
	w.write("stable.md", "---\ntype: semantic\ndescription: \"Fixed\"\n---\nNew text.\n")
	rep = w.sync()
	if !slices.Contains(rep.Imported, "stable") {
		t.Errorf("fixed file not imported: %+v", rep)
	}
	if got, _ := w.peek("stable"); got.Body != "New text." {
		t.Errorf("stable = %q after the fix", got.Body)
	}
}

func TestWriteLeavesUnchangedFilesAlone(t *testing.T) {
	w := newWS(t)
	rec := w.put(memory.Semantic, "fact", "A fact", "Body.", "a")
	first := w.read("fact.md")
	if diff := cmp.Diff(string(Encode(rec)), string(first)); diff != "" {
		t.Fatalf("file (-Encode +disk):\n%s", diff)
	}
	w.age("fact.md", time.Hour)
	before := w.snapshot()

	// The same write through the store, and straight through the Dir.
	w.put(memory.Semantic, "fact", "A fact", "Body.", "a")
	st, undo, err := w.dir.Write(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if undo != nil {
		t.Error("a write that left the file alone has something to undo")
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("unchanged record rewrote its file (-before +after):\n%s", diff)
	}
	fi, _ := os.Stat(w.path("fact.md"))
	if st.Size != fi.Size() || st.MTime != fi.ModTime().UnixNano() || st.Hash != hash(first) || st.Stem != "fact" {
		t.Errorf("state %+v does not describe the file", st)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("sync after writes: %+v", rep)
	}

	// A real change rewrites it, atomically: no temporary file is left.
	w.put(memory.Semantic, "fact", "A fact", "New body.", "a")
	if got := string(w.read("fact.md")); !strings.HasSuffix(got, "\n\nNew body.\n") {
		t.Errorf("file after update:\n%s", got)
	}
	if diff := cmp.Diff([]string{"fact.md"}, w.ls()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestWriteRefusesBadKeys(t *testing.T) {
	w := newWS(t)
	for _, key := range []string{"../escape", "a/b", `a\b`, "Upper", "", ".", "..", "-x", "a..b", "/etc/passwd"} {
		if _, _, err := w.dir.Write(memory.Record{Type: memory.Semantic, Key: key, Body: "x"}, nil); err == nil {
			t.Errorf("Write(%q) accepted", key)
		}
		if _, err := w.dir.Remove(key, nil); err == nil {
			t.Errorf("Remove(%q) accepted", key)
		}
	}
	if _, err := os.Stat(filepath.Join(w.root, ".prometheus", "escape.md")); err == nil {
		t.Error("a file was written outside the memories directory")
	}
}

func TestRemove(t *testing.T) {
	w := newWS(t)
	if _, err := w.dir.Remove("missing", nil); err != nil {
		t.Errorf("Remove with no directory: %v", err)
	}
	w.put(memory.Semantic, "fact", "", "Body.")
	w.put(memory.Procedural, "how", "", "Steps.")
	if _, err := w.dir.Remove("missing", nil); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
	lvl := scope.Project
	if _, err := w.st.Delete(w.ctx, w.project(), memory.Selector{Key: "fact", Scope: &lvl}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"how.md"}, w.ls()); diff != "" {
		t.Errorf("files after delete (-want +got):\n%s", diff)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("sync after delete: %+v", rep)
	}
}

func TestSyncTouched(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	// A checkout rewrites the file with the same bytes.
	b := w.read("fact.md")
	os.Remove(w.path("fact.md"))
	w.write("fact.md", string(b))
	w.age("fact.md", 10*time.Minute)
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("sync after a touch: %+v", rep)
	}
	state, err := w.st.MirrorState(w.ctx, w.p)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(w.path("fact.md"))
	if state["fact"].MTime != fi.ModTime().UnixNano() {
		t.Errorf("state mtime %d, file %d: the next sync would read it again", state["fact"].MTime, fi.ModTime().UnixNano())
	}
}

// TestSyncSameSizeQuickEdit is an edit of the same size right after a
// write: on a coarse-mtime file system size and mtime can both match, and
// only the recent mtime makes Sync look.
func TestSyncSameSizeQuickEdit(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body one.")
	fi, _ := os.Stat(w.path("fact.md"))
	b := strings.Replace(string(w.read("fact.md")), "Body one.", "Body two.", 1)
	w.write("fact.md", b)
	os.Chtimes(w.path("fact.md"), fi.ModTime(), fi.ModTime())
	w.sync()
	if got, _ := w.peek("fact"); got.Body != "Body two." {
		t.Errorf("body %q: the edit was missed", got.Body)
	}
}

func TestSyncEditDeleteRename(t *testing.T) {
	w := newWS(t)
	edit := w.put(memory.Semantic, "edit-me", "Edit me", "Old.")
	w.put(memory.Semantic, "delete-me", "Delete me", "Bye.")
	moved := w.put(memory.Procedural, "old-name", "Move me", "Steps.")

	w.write("edit-me.md", strings.Replace(string(w.read("edit-me.md")), "Old.", "New.", 1))
	os.Remove(w.path("delete-me.md"))
	os.Rename(w.path("old-name.md"), w.path("new-name.md"))
	rep := w.sync()
	want := Report{Imported: []string{"edit-me"}, Renamed: []string{"new-name"}, Deleted: []string{"delete-me"}}
	if diff := cmp.Diff(want, rep, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if got, _ := w.peek("edit-me"); got.Body != "New." || got.ID != edit.ID {
		t.Errorf("edit-me = %+v", got)
	}
	if _, err := w.peek("delete-me"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("delete-me: %v, want not found", err)
	}
	if _, err := w.peek("old-name"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("old-name: %v, want not found", err)
	}
	if got, _ := w.peek("new-name"); got.ID != moved.ID || got.Body != "Steps." || got.Type != memory.Procedural {
		t.Errorf("new-name = %+v, want the moved record", got)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
}

// TestSyncMissingDirectory: the files are canonical, so removing the
// directory (git rm -r) deletes the records it held.
func TestSyncMissingDirectory(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "a", "", "A.")
	w.put(memory.Procedural, "b", "", "B.")
	if err := os.RemoveAll(filepath.Join(w.root, ".prometheus")); err != nil {
		t.Fatal(err)
	}
	rep := w.sync()
	if diff := cmp.Diff([]string{"a", "b"}, sorted(rep.Deleted)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if got := w.mirrored(); len(got) != 0 {
		t.Errorf("records left: %v", got)
	}
	if _, err := os.Stat(w.dir.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sync recreated the directory: %v", err)
	}
}

// TestSyncExport: records written before the mirror existed get files.
func TestSyncExport(t *testing.T) {
	w := newWS(t)
	var recs []memory.Record
	for _, key := range []string{"early", "earlier"} {
		rec, _, err := w.st.Put(w.ctx, memory.Project{ID: w.p}, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: "Before the mirror."})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("sync: %+v", rep)
	}
	for _, rec := range recs {
		if diff := cmp.Diff(string(Encode(rec)), string(w.read(rec.Key+".md"))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", rec.Key, diff)
		}
	}
	state, _ := w.st.MirrorState(w.ctx, w.p)
	if len(state) != 2 {
		t.Errorf("state: %v", state)
	}
}

// TestSyncCopiedFile: a file copied to start a new one repeats the id; the
// original keeps it and the copy becomes a record of its own.
func TestSyncCopiedFile(t *testing.T) {
	w := newWS(t)
	orig := w.put(memory.Semantic, "original", "Original", "Original body.")
	w.write("copy.md", strings.Replace(string(w.read("original.md")), "Original body.", "Copied and edited.", 1))
	rep := w.sync()
	if diff := cmp.Diff(Report{Imported: []string{"copy"}}, rep, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	got, _ := w.peek("original")
	cp, _ := w.peek("copy")
	if got.ID != orig.ID || got.Body != "Original body." {
		t.Errorf("original = %+v", got)
	}
	if cp.ID == orig.ID || cp.ID == "" || cp.Body != "Copied and edited." {
		t.Errorf("copy = %+v", cp)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
	// Both changed at once: the one at the record's stem keeps the id.
	w.write("original.md", strings.Replace(string(w.read("original.md")), "Original body.", "Edited original.", 1))
	w.write("copy.md", strings.Replace(string(w.read("copy.md")), "Copied and edited.", "Edited copy.", 1))
	w.sync()
	got, _ = w.peek("original")
	cp2, _ := w.peek("copy")
	if got.ID != orig.ID || got.Body != "Edited original." || cp2.ID != cp.ID || cp2.Body != "Edited copy." {
		t.Errorf("after editing both: original %+v, copy %+v", got, cp2)
	}
}

// TestSyncMovedOver: `mv a.md b.md` over an existing b.md. The record a.md
// held takes the key b; the record b.md held is gone with its file.
func TestSyncMovedOver(t *testing.T) {
	for _, types := range [][2]memory.Type{{memory.Semantic, memory.Semantic}, {memory.Procedural, memory.Semantic}} {
		t.Run(string(types[0])+"-over-"+string(types[1]), func(t *testing.T) {
			w := newWS(t)
			a := w.put(types[0], "a", "A", "Body of a.")
			w.put(types[1], "b", "B", "Body of b.")
			if err := os.Rename(w.path("a.md"), w.path("b.md")); err != nil {
				t.Fatal(err)
			}
			rep := w.sync()
			if len(rep.Problems) > 0 {
				t.Errorf("problems: %v", rep.Problems)
			}
			recs := w.mirrored()
			if len(recs) != 1 || recs["b"].ID != a.ID || recs["b"].Body != "Body of a." || recs["b"].Type != types[0] {
				t.Errorf("records: %+v", recs)
			}
			if rep := w.sync(); !cmp.Equal(rep, Report{}) {
				t.Errorf("second sync: %+v", rep)
			}
		})
	}
}

func TestConflict(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "shared-key", "", "A fact.")
	before := w.snapshot()
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Procedural, Key: "shared-key", Body: "Steps."})
	if !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("Put of the other type: %v, want a conflict", err)
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("file changed (-before +after):\n%s", diff)
	}

	// The same through files: a renamed file whose new key a record without
	// a file already holds.
	if _, _, err := w.st.Put(w.ctx, memory.Project{ID: w.p}, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "taken", Body: "No file."}); err != nil {
		t.Fatal(err)
	}
	os.Rename(w.path("shared-key.md"), w.path("taken.md"))
	rep := w.sync()
	if len(rep.Problems) != 1 || rep.Problems[0].Path != ".prometheus/memories/taken.md" || !strings.HasPrefix(rep.Problems[0].Reason, string(memory.CodeConflict)+":") {
		t.Errorf("problems: %+v, want a conflict on taken.md", rep.Problems)
	}
	if got, _ := w.peek("taken"); got.Body != "No file." {
		t.Errorf("taken = %q", got.Body)
	}
}

// TestTwoWorkspacesSameFiles: a second clone or worktree of one repository
// holds the same files, ids included, in its own project.
func TestTwoWorkspacesSameFiles(t *testing.T) {
	st := mustOpen(t, filepath.Join(t.TempDir(), "memory.db"))
	a := newWSAt(t, t.TempDir(), st)
	b := newWSAt(t, t.TempDir(), st)
	a.copyFixtures("good")
	b.copyFixtures("good")
	for _, w := range []*ws{a, b} {
		rep := w.sync()
		if len(rep.Imported) != 4 || len(rep.Problems) > 0 {
			t.Errorf("%s: %+v", w.root, rep)
		}
	}
	b.write("test-runner.md", strings.Replace(string(b.read("test-runner.md")), "make test", "just test", -1))
	b.sync()
	ra, _ := a.peek("test-runner")
	rb, _ := b.peek("test-runner")
	if strings.Contains(ra.Body, "just test") || !strings.Contains(rb.Body, "just test") {
		t.Errorf("the workspaces share a record:\n%s\n%s", ra.Body, rb.Body)
	}
	if rep := b.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
}

// TestSweepsStaleTempFiles: a temporary file not written for an hour is
// left over from a crash, and the sync that comes two hours later sweeps
// it; younger ones, and other dotfiles, stay.
func TestSweepsStaleTempFiles(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	stale, fresh, other := ".fact.md.0123456789ab.tmp", ".fact.md.ba9876543210.tmp", ".notes"
	sub := func(name string) string { return tempSub + "/" + name }
	names := []string{stale, fresh, other, sub(stale), sub(fresh)}
	for _, name := range names {
		w.write(name, "x")
	}
	later := time.Now().Add(2 * time.Hour)
	for _, name := range []string{fresh, sub(fresh)} {
		if err := os.Chtimes(w.path(name), later, later); err != nil {
			t.Fatal(err)
		}
	}
	r, err := w.dir.openRoot(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	entries, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	s := &syncer{ctx: w.ctx, st: w.st, p: w.p, d: w.dir, now: later, present: map[string]bool{}}
	if err := s.scan(r, entries); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{fresh, other, tempSub + "/" + fresh, "fact.md"}, w.ls()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestConcurrentProcesses runs two servers' worth of writers and syncers on
// one workspace and one database file, then checks files and records agree.
func TestConcurrentProcesses(t *testing.T) {
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "memory.db")
	p1 := newWSAt(t, root, mustOpen(t, db))
	p2 := newWSAt(t, root, mustOpen(t, db))
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, w := range []*ws{p1, p2} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 15 {
				key := []string{"alpha", "beta", "gamma"}[j%3]
				body := strings.Repeat("x", i+j+1)
				if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body}); err != nil {
					errs <- err
				}
				if j%5 == 4 {
					lvl := scope.Project
					if _, err := w.st.Delete(w.ctx, w.project(), memory.Selector{Key: key, Scope: &lvl}); err != nil && !errors.Is(err, memory.ErrNotFound) {
						errs <- err
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 15 {
				rep, err := Sync(w.ctx, w.st, w.p, w.dir)
				if err != nil {
					errs <- err
				}
				if len(rep.Problems) > 0 {
					errs <- errors.New(rep.Problems[0].Path + ": " + rep.Problems[0].Reason)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p1.sync()
	p2.sync()
	recs := p1.mirrored()
	for _, name := range p1.ls() {
		key := strings.TrimSuffix(name, ".md")
		got, err := Decode(key, p1.read(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rec, ok := recs[key]; !ok || rec.Body != got.Body || rec.ID != got.ID {
			t.Errorf("%s: file %q (%s), record %q (%s)", name, got.Body, got.ID, rec.Body, rec.ID)
		}
		delete(recs, key)
	}
	if len(recs) > 0 {
		t.Errorf("records without files: %v", recs)
	}
}

func TestProblemsLoggedOnce(t *testing.T) {
	w := newWS(t)
	var buf strings.Builder
	var mu sync.Mutex
	w.dir.SetLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)))
	w.write("leaked.md", "Token: "+fakeSecret()+"\n")
	w.write("bad.md", "---\ntype: gossip\n---\nx\n")
	for range 3 {
		if rep := w.sync(); len(rep.Problems) != 2 {
			t.Fatalf("problems: %+v", rep.Problems)
		}
	}
	mu.Lock()
	log := buf.String()
	mu.Unlock()
	if n := strings.Count(log, "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want one per file:\n%s", n, log)
	}
	if strings.Contains(log, "a1B2c3") {
		t.Errorf("log quotes the secret:\n%s", log)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
