package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dry run reports what the import would: the same lines refused, for
// the same reasons, as the real run after it (a key clash of types, a
// past expiry, a time out of range, a malformed id), and writes nothing,
// neither records nor markdown files.
func TestImportDryRunRefusesWhatTheImportRefuses(t *testing.T) {
	e := newEnv(t)
	if _, stderr, err := runCLI(t, e, "", "write", "deploy", "--type", "semantic", "--body", "make release"); err != nil {
		t.Fatal(err, stderr)
	}
	lines := strings.Join([]string{
		`{"scope":"project","type":"procedural","key":"deploy","body":"clashes with the fact's file"}`,
		`{"scope":"workspace","type":"semantic","key":"past","body":"x","expires_at":"2001-01-01T00:00:00Z"}`,
		`{"scope":"workspace","type":"semantic","key":"old","body":"x","created_at":"1900-01-01T00:00:00Z"}`,
		`{"scope":"workspace","type":"semantic","key":"badid","body":"x","id":"not an id!"}`,
		`{"scope":"project","type":"semantic","key":"fine","body":"a fact with a file"}`,
	}, "\n") + "\n"
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	dryOut, dryErr, err := runCLI(t, e, "", "import", "--dry-run", p)
	if err == nil || !strings.Contains(dryOut, "would import 1 new, 0 updated, 0 unchanged; 4 refused (of 5 lines)") {
		t.Fatalf("dry run: %v\n%s%s", err, dryOut, dryErr)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "fine.md")); !os.IsNotExist(err) {
		t.Errorf("the dry run wrote a markdown file: %v", err)
	}
	if out, _, _ := runCLI(t, e, "", "show", "fine"); strings.Contains(out, "a fact with a file") {
		t.Error("the dry run stored a record")
	}
	out, stderr, err := runCLI(t, e, "", "import", p)
	if err == nil || !strings.Contains(out, "imported 1 new, 0 updated, 0 unchanged; 4 refused (of 5 lines)") {
		t.Fatalf("import: %v\n%s%s", err, out, stderr)
	}
	if stderr != dryErr {
		t.Errorf("refusals differ:\ndry run:\n%s\nimport:\n%s", dryErr, stderr)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "fine.md")); err != nil {
		t.Errorf("the import wrote no file: %v", err)
	}
}
