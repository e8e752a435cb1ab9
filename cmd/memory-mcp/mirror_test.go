package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMarkdownIsCanonicalEndToEnd(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "db-engine", "body": "We use PostgreSQL 16.", "description": "Database"})
	file := filepath.Join(dir, "db-engine.md")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the fact was not mirrored: %v", err)
	}
	// Writing the same again leaves the file byte-identical.
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "db-engine", "body": "We use PostgreSQL 16.", "description": "Database"})
	if again, _ := os.ReadFile(file); string(again) != string(before) {
		t.Errorf("an unchanged rewrite changed the file:\n%s\n---\n%s", before, again)
	}

	// A reviewer edits the file: the next read returns the edit.
	edited := strings.Replace(string(before), "PostgreSQL 16", "PostgreSQL 17", 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := bodyOf(t, cs, "db-engine"); !strings.Contains(got, "PostgreSQL 17") {
		t.Errorf("after the edit memory_read gives %q", got)
	}

	// A hand-written file without front matter becomes a fact.
	os.WriteFile(filepath.Join(dir, "code-review.md"), []byte("# Two approvals for main\n\nEvery change to main needs two approvals.\n"), 0o644)
	rec := ok(t, cs, "memory_read", map[string]any{"key": "code-review"})["record"].(map[string]any)
	if rec["type"] != "semantic" || rec["description"] != "Two approvals for main" {
		t.Errorf("hand-written file read as %v", rec)
	}

	// A malformed file is reported and changes nothing.
	bad := "---\ntype: [unclosed\n---\nbody\n"
	os.WriteFile(filepath.Join(dir, "broken.md"), []byte(bad), 0o644)
	res := call(t, cs, "memory_search", map[string]any{"query": "approvals"})
	if res.IsError || !strings.Contains(text(res), "broken.md") {
		t.Errorf("the malformed file is not reported: %s", text(res))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "broken.md")); string(got) != bad {
		t.Error("the malformed file was changed")
	}

	// A deleted file deletes its record; deleting a record deletes its file.
	os.Remove(file)
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "db-engine"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("after deleting the file: %s", msg)
	}
	ok(t, cs, "memory_delete", map[string]any{"key": "code-review"})
	if _, err := os.Stat(filepath.Join(dir, "code-review.md")); !os.IsNotExist(err) {
		t.Errorf("deleting the record left its file: %v", err)
	}
}

// TestSearchShowsHandEdit: a hit found once keeps its card, and a hand edit
// of its file made between two searches, even one that keeps the file's
// size, is what the next search shows, never the text before it.
func TestSearchShowsHandEdit(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "release-train", "description": "Release train", "body": "The release train leaves on Tuesday from branch alpha."})
	preview := func() string {
		t.Helper()
		out := ok(t, cs, "memory_search", map[string]any{"query": "release train"})
		results := out["results"].([]any)
		if len(results) != 1 {
			t.Fatalf("%d results, want 1", len(results))
		}
		return results[0].(map[string]any)["preview"].(string)
	}
	if p := preview(); !strings.Contains(p, "Tuesday") {
		t.Fatalf("preview before the edit: %q", p)
	}
	file := filepath.Join(e.root, ".prometheus", "memories", "release-train.md")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(strings.Replace(string(before), "Tuesday", "Thurs.y", 1), "alpha", "gamma", 1)
	if len(edited) != len(before) {
		t.Fatal("the edit should keep the file's size")
	}
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := preview(); strings.Contains(p, "Tuesday") || strings.Contains(p, "alpha") || !strings.Contains(p, "gamma") {
		t.Errorf("preview after the hand edit: %q", p)
	}
}

// TestLineEndsSettleOnWrite: a body with CR CR LF and a lone CR is kept as
// its file holds it, so that reading it back, and the syncs after, change
// neither the record nor the file.
func TestLineEndsSettleOnWrite(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "crlf", "description": "Line ends", "body": "one\r\r\r\ntwo\rstill two\r\nthree"})
	want := "one\ntwo\rstill two\nthree"
	file := filepath.Join(e.root, ".prometheus", "memories", "crlf.md")
	first, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := bodyOf(t, cs, "crlf"); got != want {
			t.Fatalf("read %d: body %q, want %q", i, got, want)
		}
		if now, _ := os.ReadFile(file); string(now) != string(first) {
			t.Fatalf("read %d changed the file:\n%q\n%q", i, first, now)
		}
	}
}
