package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory"
)

// refusedEdit turns a mirrored file into one the server cannot import (a
// confidence out of range) and adds a paragraph only the file holds.
func refusedEdit(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "confidence: 0.5", "confidence: 7", 1)
	if edited == string(b) {
		t.Fatalf("no confidence line in %s", b)
	}
	edited += "\nA paragraph only the reviewer wrote.\n"
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return edited
}

func sameFile(t *testing.T, file, want, after string) {
	t.Helper()
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("after %s the file is gone: %v", after, err)
	}
	if string(got) != want {
		t.Errorf("after %s the hand edit was overwritten:\n%s", after, got)
	}
}

// TestToolsNeverOverwriteARefusedEdit: a file edited by hand so that the
// server refuses it is neither rewritten by memory_update or memory_write
// nor removed by memory_delete; each refuses with conflict, naming the file.
func TestToolsNeverOverwriteARefusedEdit(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	file := filepath.Join(e.root, ".prometheus", "memories", "deploy.md")
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy with make deploy."})
	edited := refusedEdit(t, file)

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"memory_update", map[string]any{"key": "deploy", "body": "Deploy with the pipeline."}},
		{"memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy on Fridays."}},
		{"memory_delete", map[string]any{"key": "deploy"}},
	} {
		msg := fails(t, cs, c.tool, c.args)
		if !strings.HasPrefix(msg, "conflict") || !strings.Contains(msg, ".prometheus/memories/deploy.md") || !strings.Contains(msg, "confidence") {
			t.Errorf("%s: %s", c.tool, msg)
		}
		sameFile(t, file, edited, c.tool)
	}

	// Fixed, the edit is imported, and the tools work again.
	fixed := strings.Replace(edited, "confidence: 7", "confidence: 0.7", 1)
	os.WriteFile(file, []byte(fixed), 0o644)
	if got := bodyOf(t, cs, "deploy"); !strings.Contains(got, "only the reviewer wrote") {
		t.Errorf("the fixed file was not imported: %q", got)
	}
	ok(t, cs, "memory_update", map[string]any{"key": "deploy", "tags": []string{"ops"}})
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "only the reviewer wrote") || !strings.Contains(string(b), "confidence: 0.7") {
		t.Errorf("the update lost the imported edit:\n%s", b)
	}
}

// TestWriteNeverOverwritesAStrangersFile: a hand-written file the server
// never imported (it is refused) is not replaced by a memory_write of its key.
func TestWriteNeverOverwritesAStrangersFile(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	os.MkdirAll(dir, 0o755)
	file := filepath.Join(dir, "release.md")
	hand := "---\ntype: semantic\nconfidence: high\n---\n\nRelease notes go in CHANGES.md.\n"
	os.WriteFile(file, []byte(hand), 0o644)
	msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "release", "body": "Something else."})
	if !strings.HasPrefix(msg, "conflict") || !strings.Contains(msg, "release.md") {
		t.Errorf("memory_write over a refused hand-written file: %s", msg)
	}
	sameFile(t, file, hand, "memory_write")
}

// TestPurgeKeepsARefusedEdit: an expired fact whose file was edited by hand
// into one the server refuses keeps that file through the purge at start.
func TestPurgeKeepsARefusedEdit(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	file := filepath.Join(e.root, ".prometheus", "memories", "deploy.md")
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy with make deploy.", "ttl_seconds": 1})
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "plain", "body": "Expires untouched.", "ttl_seconds": 1})
	cs.Close()
	edited := refusedEdit(t, file)
	time.Sleep(1500 * time.Millisecond)
	cs = connect(t, e, nil) // purges at start
	ok(t, cs, "memory_list", nil)
	sameFile(t, file, edited, "the purge")
	if _, err := os.Stat(filepath.Join(filepath.Dir(file), "plain.md")); !os.IsNotExist(err) {
		t.Errorf("the untouched expired fact kept its file: %v", err)
	}
}

// TestLongNonASCIIFirstLine: a hand-written file whose first line is a long
// CJK sentence is imported, its description clipped by bytes on a rune
// boundary.
func TestLongNonASCIIFirstLine(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	os.MkdirAll(dir, 0o755)
	line := strings.Repeat("部署前必须运行所有测试并检查日志", 20)
	os.WriteFile(filepath.Join(dir, "deploy-zh.md"), []byte(line+"\n\n更多内容。\n"), 0o644)
	rec := ok(t, cs, "memory_read", map[string]any{"key": "deploy-zh"})["record"].(map[string]any)
	d, _ := rec["description"].(string)
	if d == "" || len(d) > memory.MaxDescriptionLen || !utf8.ValidString(d) || !strings.HasPrefix(line, strings.TrimSuffix(d, "…")) {
		t.Errorf("description %q (%d bytes)", d, len(d))
	}
}
