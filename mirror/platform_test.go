package mirror

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
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
