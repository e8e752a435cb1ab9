package mirror

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestCRLFFileImportedAndLeftAlone: a file saved by a Windows editor (CRLF
// line ends, perhaps a byte-order mark) imports like its LF twin, and no
// sync or read rewrites it just to change its line ends; the record's body
// has LF line ends like every other.
func TestCRLFFileImportedAndLeftAlone(t *testing.T) {
	w := newWS(t)
	crlf := "\uFEFF---\r\ntype: procedural\r\ndescription: \"Release steps\"\r\ntags: [release]\r\n---\r\n\r\n1. Tag it.\r\n2. Push the tag.\r\n"
	plain := "# Deploy\r\n\r\nDeploy on Monday.\r\n"
	w.write("release.md", crlf)
	w.write("deploy.md", plain)
	w.age("release.md", time.Hour)
	w.age("deploy.md", time.Hour)

	rep := w.sync()
	if len(rep.Problems) != 0 || len(rep.Imported) != 2 {
		t.Fatalf("sync: %+v", rep)
	}
	got := w.mirrored()
	if r := got["release"]; r.Type != memory.Procedural || r.Description != "Release steps" || r.Body != "1. Tag it.\n2. Push the tag." {
		t.Errorf("release = %+v", r)
	}
	if r := got["deploy"]; r.Description != "Deploy" || strings.Contains(r.Body, "\r") {
		t.Errorf("deploy = %+v", r)
	}
	for i := 0; i < 2; i++ {
		if rep := w.sync(); rep.changed() || len(rep.Problems) != 0 {
			t.Errorf("sync %d again: %+v", i, rep)
		}
	}
	if b := w.read("release.md"); string(b) != crlf {
		t.Errorf("release.md was rewritten:\n%q", b)
	}
	if b := w.read("deploy.md"); string(b) != plain {
		t.Errorf("deploy.md was rewritten:\n%q", b)
	}

	// An edit through the server writes the file in the mirror's own form.
	if _, err := w.st.Update(w.ctx, w.project(), memory.Selector{Key: "release"}, memory.Patch{Body: ptr("1. Tag it.\n2. Push it.")}); err != nil {
		t.Fatal(err)
	}
	if b := w.read("release.md"); bytes.Contains(b, []byte("\r")) || !bytes.Contains(b, []byte("2. Push it.\n")) {
		t.Errorf("release.md after an edit:\n%q", b)
	}
}

// caseInsensitive reports whether dir's file system folds case, as macOS's
// and Windows' do by default.
func caseInsensitive(t *testing.T, dir string) bool {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(dir, "probe"))
	_, err := os.Lstat(filepath.Join(dir, "PROBE"))
	return err == nil
}

// TestUpperCaseFileName: keys are lower-case, so Deploy.md is refused on
// every system, with the name to rename it to, and left as it is. Where the
// file system folds case, Deploy.md is deploy.md's file too: a new record
// deploy is not written over it, and renaming deploy.md to Deploy.md does
// not delete its record.
func TestUpperCaseFileName(t *testing.T) {
	w := newWS(t)
	const hand = "# Deploy\n\nBy hand, on Fridays.\n"
	w.write("Deploy.md", hand)
	rep := w.sync()
	if len(rep.Problems) != 1 || rep.Problems[0].Path != ".prometheus/memories/Deploy.md" || !strings.Contains(rep.Problems[0].Reason, "rename it to deploy.md") || rep.changed() {
		t.Fatalf("sync: %+v", rep)
	}
	if len(w.mirrored()) != 0 {
		t.Errorf("records from a refused file: %v", w.mirrored())
	}
	folds := caseInsensitive(t, w.dir.Path())
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "deploy", Body: "Deploy on Monday."})
	if folds {
		if !errors.Is(err, memory.ErrConflict) {
			t.Errorf("put deploy over Deploy.md on a case-folding file system: %v, want a conflict", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if b := w.read("Deploy.md"); string(b) != hand {
		t.Errorf("Deploy.md = %q, was rewritten", b)
	}
	if !folds {
		return
	}

	// A record's file renamed to upper case: still its file there.
	if err := os.Remove(w.path("Deploy.md")); err != nil {
		t.Fatal(err)
	}
	w.sync()
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	if err := os.Rename(w.path("deploy.md"), w.path("Deploy.md")); err != nil {
		t.Fatal(err)
	}
	w.sync()
	if _, err := w.peek("deploy"); err != nil {
		t.Errorf("record after deploy.md was renamed to Deploy.md: %v", err)
	}
}
