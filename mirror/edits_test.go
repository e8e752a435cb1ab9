package mirror

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestRemovedFileComesBack: removing a file hides its record at once; the
// same file put back (an editor that saves by remove and create, a branch
// switch) brings the record back with its id, use count and expiry.
func TestRemovedFileComesBack(t *testing.T) {
	w := newWS(t)
	ttl := 30 * 24 * time.Hour
	rec, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "deploy", Body: "Deploy on Monday.", TTL: &ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.st.Touch(w.ctx, []string{rec.ID, rec.ID}); err != nil {
		t.Fatal(err)
	}
	before, err := w.peek("deploy")
	if err != nil || before.UseCount == 0 || before.ExpiresAt == nil {
		t.Fatalf("before: %+v, %v", before, err)
	}
	data := w.read("deploy.md")
	if err := os.Remove(w.path("deploy.md")); err != nil {
		t.Fatal(err)
	}
	w.sync()
	if _, err := w.peek("deploy"); err == nil {
		t.Fatal("the record of a removed file is still visible")
	}
	w.write("deploy.md", string(data))
	w.sync()
	after, err := w.peek("deploy")
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID || after.UseCount != before.UseCount || after.ExpiresAt == nil || !after.ExpiresAt.Equal(*before.ExpiresAt) {
		t.Errorf("came back as id %s uses %d expiry %v; want %s %d %v", after.ID, after.UseCount, after.ExpiresAt, before.ID, before.UseCount, before.ExpiresAt)
	}
}

// TestSecondCheckoutKeepsIDLines: a git worktree of the same repository,
// served from the same database, keeps the id line of every file through
// updates, so pull requests from either checkout never churn it.
func TestSecondCheckoutKeepsIDLines(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	a := newWS(t)
	git(t, a.root, "init", "-q")
	git(t, a.root, "symbolic-ref", "HEAD", "refs/heads/main")
	rec := a.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	git(t, a.root, "add", ".")
	git(t, a.root, "commit", "-q", "-m", "memories")
	second := filepath.Join(t.TempDir(), "second")
	git(t, a.root, "worktree", "add", "-q", "-b", "other", second)

	b := newWSAt(t, second, a.st)
	b.sync()
	if _, err := b.st.Update(b.ctx, b.project(), memory.Selector{Key: "deploy"}, memory.Patch{Body: ptr("Deploy on Tuesday.")}); err != nil {
		t.Fatal(err)
	}
	got, err := Decode("deploy", b.read("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rec.ID || got.Body != "Deploy on Tuesday." {
		t.Errorf("the second checkout's file holds id %s body %q; want id %s", got.ID, got.Body, rec.ID)
	}
	// A new Dir (a restarted server) and a second update keep it too.
	b = newWSAt(t, second, a.st)
	b.sync()
	if _, err := b.st.Update(b.ctx, b.project(), memory.Selector{Key: "deploy"}, memory.Patch{Body: ptr("Deploy on Wednesday.")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := Decode("deploy", b.read("deploy.md")); got.ID != rec.ID {
		t.Errorf("after a restart the id line became %s, want %s", got.ID, rec.ID)
	}
	// Renamed in the second checkout, the record keeps its use.
	if err := os.Rename(b.path("deploy.md"), b.path("deploying.md")); err != nil {
		t.Fatal(err)
	}
	before, _ := b.peek("deploy")
	b.sync()
	if got, err := b.peek("deploying"); err != nil || got.ID != before.ID {
		t.Errorf("renamed in the second checkout: %+v, %v; want the record %s", got, err, before.ID)
	}
	if got, _ := Decode("deploying", b.read("deploying.md")); got.ID != rec.ID {
		t.Errorf("the renamed file's id line became %s", got.ID)
	}
}

// TestWriteLeavesNoTempInMemories: Write's temporary files live where git
// ignores them, so one a crash leaves behind is never committed.
func TestWriteLeavesNoTempInMemories(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	w := newWS(t)
	git(t, w.root, "init", "-q")
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	tmp := w.path(tempSub) // made by the write
	// What a write killed between create and rename leaves behind.
	if err := os.WriteFile(filepath.Join(tmp, ".deploy.md.0123456789ab.tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = w.root
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "?? .prometheus/memories/deploy.md" {
		t.Errorf("git status shows:\n%s", got)
	}
	if rep := w.sync(); len(rep.Problems) > 0 || rep.changed() {
		t.Errorf("sync with a leftover temporary file: %+v", rep)
	}
}

func ptr[T any](v T) *T { return &v }

// TestBranchSwitchBringsRecordsBack: checking out a branch without the
// memories directory hides every record at once; checking the first branch
// out again brings each back as it was, id, use count and expiry included.
func TestBranchSwitchBringsRecordsBack(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	w := newWS(t)
	git(t, w.root, "init", "-q")
	git(t, w.root, "symbolic-ref", "HEAD", "refs/heads/main")
	os.WriteFile(filepath.Join(w.root, "README"), []byte("x\n"), 0o644)
	git(t, w.root, "add", "README")
	git(t, w.root, "commit", "-q", "-m", "start")
	git(t, w.root, "checkout", "-q", "-b", "memories")
	ttl := 90 * 24 * time.Hour
	rec, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Procedural, Key: "release", Body: "1. Tag.\n2. Push.", TTL: &ttl})
	if err != nil {
		t.Fatal(err)
	}
	w.st.Touch(w.ctx, []string{rec.ID})
	before, _ := w.peek("release")
	git(t, w.root, "add", ".")
	git(t, w.root, "commit", "-q", "-m", "memories")

	git(t, w.root, "checkout", "-q", "main")
	if rep := w.sync(); len(rep.Deleted) != 1 {
		t.Errorf("sync on a branch without the file: %+v", rep)
	}
	if _, err := w.peek("release"); err == nil {
		t.Error("the record is visible on a branch without its file")
	}
	git(t, w.root, "checkout", "-q", "memories")
	w.sync()
	after, err := w.peek("release")
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID || after.UseCount != before.UseCount || after.UseCount == 0 || !after.ExpiresAt.Equal(*before.ExpiresAt) || after.CreatedAt != before.CreatedAt {
		t.Errorf("came back as %+v; was %+v", after, before)
	}
	if out, err := exec.Command("git", "-C", w.root, "status", "--porcelain").Output(); err != nil || len(out) > 0 {
		t.Errorf("the work tree is dirty: %q %v", out, err)
	}
}

// TestRemovedFileIsNotWrittenAgain: a write that comes between a file's
// removal and the next sync (another process's sync has not seen it yet)
// does not bring the removed file back; the sync then hides its record.
func TestRemovedFileIsNotWrittenAgain(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	if err := os.Remove(w.path("deploy.md")); err != nil {
		t.Fatal(err)
	}
	_, err := w.st.Update(w.ctx, w.project(), memory.Selector{Key: "deploy"}, memory.Patch{Body: ptr("Deploy on Friday.")})
	if !errors.Is(err, memory.ErrConflict) || !strings.Contains(err.Error(), "deploy.md") {
		t.Errorf("update of a removed file: %v", err)
	}
	if _, err := os.Stat(w.path("deploy.md")); !os.IsNotExist(err) {
		t.Errorf("the removed file is back: %v", err)
	}
	w.sync()
	if _, err := w.peek("deploy"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("after the sync: %v", err)
	}
}

// TestSecondCheckoutCopiedFile: in a second checkout, a file copied to
// start a new one (the same id line) becomes a new record; the original
// keeps its record.
func TestSecondCheckoutCopiedFile(t *testing.T) {
	a := newWS(t)
	a.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	second := t.TempDir()
	b := newWSAt(t, second, a.st)
	b.write("deploy.md", string(a.read("deploy.md")))
	b.sync()
	orig, err := b.peek("deploy")
	if err != nil {
		t.Fatal(err)
	}
	b.write("deploy-copy.md", strings.Replace(string(b.read("deploy.md")), "Monday", "Tuesday", 1))
	b.sync()
	if got, err := b.peek("deploy"); err != nil || got.ID != orig.ID || got.Body != "Deploy on Monday." {
		t.Errorf("the original after the copy: %+v, %v; want record %s", got, err, orig.ID)
	}
	if got, err := b.peek("deploy-copy"); err != nil || got.ID == orig.ID || got.Body != "Deploy on Tuesday." {
		t.Errorf("the copy: %+v, %v", got, err)
	}
	// A hand edit of the original is an edit, not a file moved over it.
	b.write("deploy.md", strings.Replace(string(b.read("deploy.md")), "Monday", "Sunday", 1))
	if rep := b.sync(); len(rep.Deleted) > 0 || !slices.Equal(rep.Imported, []string{"deploy"}) {
		t.Errorf("sync after an edit in the second checkout: %+v", rep)
	}
	if got, err := b.peek("deploy"); err != nil || got.ID != orig.ID || got.Body != "Deploy on Sunday." {
		t.Errorf("the original after its edit: %+v, %v", got, err)
	}
}
