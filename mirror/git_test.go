package mirror

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"prom.codes/memory-mcp/memory"
)

// git runs git in dir, isolated from the user's and the system's config.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestGitCheckout switches a real repository between a branch that edits,
// adds, deletes and renames memory files and back, syncing after each
// checkout as the server does before a read.
func TestGitCheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	w := newWS(t)
	git(t, w.root, "init", "-q")
	git(t, w.root, "symbolic-ref", "HEAD", "refs/heads/main")
	edit := w.put(memory.Semantic, "edit-me", "Edited on the branch", "The old text.")
	del := w.put(memory.Semantic, "delete-me", "Deleted on the branch", "Going away.")
	ren := w.put(memory.Procedural, "rename-me", "Renamed on the branch", "1. Step one.")
	w.put(memory.Semantic, "keep", "Untouched", "Stays.")
	original := w.mirrored()
	git(t, w.root, "add", ".")
	git(t, w.root, "commit", "-q", "-m", "memories")

	git(t, w.root, "checkout", "-q", "-b", "feature")
	w.write("edit-me.md", strings.Replace(string(w.read("edit-me.md")), "The old text.", "The new text,\nedited in a pull request.", 1))
	w.write("new-fact.md", "# A **new** fact\n\nWritten by hand, without front matter.\n")
	git(t, w.root, "rm", "-q", ".prometheus/memories/delete-me.md")
	git(t, w.root, "mv", ".prometheus/memories/rename-me.md", ".prometheus/memories/renamed.md")
	git(t, w.root, "add", ".")
	git(t, w.root, "commit", "-q", "-m", "edit memories")

	// Back on main before the server ever saw the branch.
	git(t, w.root, "checkout", "-q", "main")
	if rep := w.sync(); rep.changed() || len(rep.Problems) > 0 {
		t.Errorf("sync on main: %+v", rep)
	}

	git(t, w.root, "checkout", "-q", "feature")
	rep := w.sync()
	want := Report{Imported: []string{"edit-me", "new-fact"}, Renamed: []string{"renamed"}, Deleted: []string{"delete-me"}}
	if diff := cmp.Diff(want, rep, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("sync on feature (-want +got):\n%s", diff)
	}
	if got, _ := w.peek("edit-me"); got.Body != "The new text,\nedited in a pull request." || got.ID != edit.ID {
		t.Errorf("edit-me = %+v", got)
	}
	if got, err := w.peek("new-fact"); err != nil || got.Description != "A new fact" || got.Type != memory.Semantic || got.Confidence != 0.5 {
		t.Errorf("new-fact = %+v, %v", got, err)
	}
	if _, err := w.peek("delete-me"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("delete-me: %v, want not found", err)
	}
	if _, err := w.peek("rename-me"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("rename-me: %v, want not found", err)
	}
	if got, _ := w.peek("renamed"); got.ID != ren.ID || got.Type != memory.Procedural || got.Body != ren.Body {
		t.Errorf("renamed = %+v, want %s", got, ren.ID)
	}

	git(t, w.root, "checkout", "-q", "main")
	rep = w.sync()
	want = Report{Imported: []string{"delete-me", "edit-me"}, Renamed: []string{"rename-me"}, Deleted: []string{"new-fact"}}
	if diff := cmp.Diff(want, rep, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("sync back on main (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(original, w.mirrored(), ignoreVolatile); diff != "" {
		t.Errorf("records back on main (-original +now):\n%s", diff)
	}
	if got, _ := w.peek("delete-me"); got.ID != del.ID {
		t.Errorf("delete-me came back as %s, want its id %s", got.ID, del.ID)
	}
	if out, err := exec.Command("git", "-C", w.root, "status", "--porcelain").Output(); err != nil || len(out) > 0 {
		t.Errorf("sync left the work tree dirty: %q %v", out, err)
	}
}
