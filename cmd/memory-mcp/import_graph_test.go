package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server-memory graph comes in as one fact per entity, its relations
// written at both ends; importing it again updates those facts, and an
// entity whose name makes the key of a memory written by hand is refused
// rather than put over it, file and all.
func TestImportGraphNeverReplacesAnotherMemory(t *testing.T) {
	e := newEnv(t)
	if _, stderr, err := runCLI(t, e, "", "write", "deploy", "--type", "semantic", "--body", "Deploy: make release, then tag."); err != nil {
		t.Fatal(err, stderr)
	}
	graph := strings.Join([]string{
		`{"type":"entity","name":"Payments","entityType":"service","observations":["Owns the ledger"]}`,
		`{"type":"entity","name":"Deploy","entityType":"process","observations":["Runs on Fridays"]}`,
		`{"type":"relation","from":"Payments","to":"Deploy","relationType":"ships with"}`,
	}, "\n") + "\n"
	p := filepath.Join(t.TempDir(), "memory.json")
	if err := os.WriteFile(p, []byte(graph), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"imported 1 new", "imported 0 new, 0 updated, 1 unchanged"} {
		out, stderr, err := runCLI(t, e, "", "import", "--format", "server-memory", p)
		if err == nil || !strings.Contains(out, want) || !strings.Contains(stderr, "line 2 refused: conflict") {
			t.Fatalf("import %d: %v\n%s%s", i+1, err, out, stderr)
		}
	}
	out, _, err := runCLI(t, e, "", "show", "deploy", "--type", "semantic")
	if err != nil || !strings.Contains(out, "make release, then tag") || strings.Contains(out, "Fridays") {
		t.Errorf("the hand-written fact: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(e.root, ".prometheus", "memories", "deploy.md"))
	if err != nil || !strings.Contains(string(b), "make release, then tag") {
		t.Errorf("its file: %v\n%s", err, b)
	}
	if out, _, err := runCLI(t, e, "", "show", "payments", "--type", "semantic"); err != nil || !strings.Contains(out, "Owns the ledger") {
		t.Errorf("the entity's fact: %v\n%s", err, out)
	}
}
