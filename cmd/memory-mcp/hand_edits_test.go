package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// TestPurgeKeepsAValidEditOfAnExpiredFact: a fact that expired while the
// server was not running, whose file was then edited by hand, is not purged
// with its file at the next start: the edit is imported and brings the
// fact back.
func TestPurgeKeepsAValidEditOfAnExpiredFact(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	file := filepath.Join(e.root, ".prometheus", "memories", "deploy.md")
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy with make deploy.", "ttl_seconds": 1})
	cs.Close()
	time.Sleep(1500 * time.Millisecond)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := string(b) + "\nStill true: a reviewer checked.\n"
	os.WriteFile(file, []byte(edited), 0o644)
	cs = connect(t, e, nil) // purges at start
	if got := bodyOf(t, cs, "deploy"); !strings.Contains(got, "a reviewer checked") {
		t.Errorf("deploy reads %q", got)
	}
	if got, err := os.ReadFile(file); err != nil || !strings.Contains(string(got), "a reviewer checked") {
		t.Errorf("the edited file: %v\n%s", err, got)
	}
	cs.Close()
	cs = connect(t, e, nil) // and the next start keeps it
	if got := bodyOf(t, cs, "deploy"); !strings.Contains(got, "a reviewer checked") {
		t.Errorf("after a restart deploy reads %q", got)
	}
}

// TestKilledWritesLeaveNothingForGit runs 8 servers writing the same keys
// in one repository and kills them with SIGKILL 50 times in all: whatever a
// kill leaves behind, git status shows only memory files.
func TestKilledWritesLeaveNothingForGit(t *testing.T) {
	if testing.Short() {
		t.Skip("50 kills")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	e := newFastEnv(t)
	gitIn(t, e.root, "init", "-q")
	const procs, kills = 8, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	killed := 0
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				mu.Lock()
				if killed >= kills {
					mu.Unlock()
					return
				}
				killed++
				mu.Unlock()
				s := startCrashServer(t, e)
				select {
				case <-s.ready:
				case <-s.closed:
				case <-time.After(30 * time.Second):
				}
				var lines strings.Builder
				for i := range 30 {
					b, _ := json.Marshal(map[string]any{"type": "semantic", "key": fmt.Sprintf("kill-%02d", i%6),
						"body": strings.Repeat(fmt.Sprintf("process %d round %d write %d. ", p, round, i), 1800)})
					fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_write","arguments":%s}}`+"\n", i, b)
				}
				go io.WriteString(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+lines.String())
				time.Sleep(time.Duration(20+(p*7919+round*104729)%80) * time.Millisecond)
				s.kill()
			}
		}()
	}
	wg.Wait()
	out := gitIn(t, e.root, "status", "--porcelain", "--untracked-files=all")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "?? .prometheus/memories/kill-") || !strings.HasSuffix(line, ".md") {
			t.Errorf("git status shows %q", line)
		}
	}
}

// gitIn runs git in dir, isolated from the user's and the system's config,
// and returns its output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCaptureRefusedByAnEditChangesNothing: a capture that would rewrite a
// procedure whose file was edited by hand into one the server refuses
// reports the procedure refused, and leaves both the file and the record
// as they were (the refused write is not half done in the database).
func TestCaptureRefusedByAnEditChangesNothing(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	file := filepath.Join(e.root, ".prometheus", "memories", "release.md")
	seq := []map[string]any{{"name": "release", "steps": []string{"make test", "git tag v1", "git push --tags"}, "succeeded": true}}
	ok(t, cs, "memory_capture", map[string]any{"session_id": "s1", "tool_sequences": seq})
	edited := refusedEdit(t, file)
	out := ok(t, cs, "memory_capture", map[string]any{"session_id": "s2", "tool_sequences": seq})
	if b, _ := json.Marshal(out); !strings.Contains(string(b), "release.md") {
		t.Errorf("the capture does not report the refused procedure: %s", b)
	}
	sameFile(t, file, edited, "the capture")
	rows := ok(t, cs, "memory_list", map[string]any{"type": "procedural"})
	b, _ := json.Marshal(rows)
	if !strings.Contains(string(b), `"use_count":1`) {
		t.Errorf("the refused capture changed the record: %s", b)
	}
}

// TestHandEditRightAfterAToolWrite: through the real binary, with two
// servers on one workspace, a hand edit of the same size made the instant
// after a tool wrote the fact (and one that then sets the file's mtime
// back to the server's stamp, as touch -r does) is what both servers read
// next, and the fact can be written again by a tool.
func TestHandEditRightAfterAToolWrite(t *testing.T) {
	for _, keepStamp := range []bool{false, true} {
		t.Run(fmt.Sprint("keepStamp=", keepStamp), func(t *testing.T) {
			e := newEnv(t)
			a, b := connect(t, e, nil), connect(t, e, nil)
			ok(t, b, "memory_list", map[string]any{}) // b watches too
			ok(t, a, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy on Monday."})
			file := filepath.Join(e.root, ".prometheus", "memories", "deploy.md")
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(data), "Monday", "Friday", 1)
			if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			if keepStamp {
				if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			}
			for name, cs := range map[string]*mcp.ClientSession{"the writer": a, "the other server": b} {
				if got := bodyOf(t, cs, "deploy"); got != "Deploy on Friday." {
					t.Errorf("%s reads %q after the hand edit", name, got)
				}
			}
			ok(t, b, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy on Sunday."})
			if got := bodyOf(t, a, "deploy"); got != "Deploy on Sunday." {
				t.Errorf("after the other server's write the writer reads %q", got)
			}
		})
	}
}

// A write of a record the mirror does not hold skips the markdown check,
// and loses nothing by it: a fact edited and a fact deleted by hand just
// before a note's write (even one of the same key) are read as the files
// say on the next call, and the edit is never written over.
func TestNoteWriteAfterHandEditsLosesNone(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Deploy on Monday."})
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "retired", "body": "Use the old runner."})
	data, err := os.ReadFile(filepath.Join(dir, "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "Monday", "Friday", 1)
	if err := os.WriteFile(filepath.Join(dir, "deploy.md"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "retired.md")); err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "deploy", "body": "Scratch: ask about the deploy day."})
	out := ok(t, cs, "memory_read", map[string]any{"key": "deploy", "type": "semantic"})
	if got := out["record"].(map[string]any)["body"]; got != "Deploy on Friday." {
		t.Errorf("the fact reads %q after the note's write, want the hand edit", got)
	}
	res := call(t, cs, "memory_read", map[string]any{"key": "retired", "type": "semantic"})
	if !res.IsError {
		t.Error("the fact whose file was deleted is still read")
	}
	sameFile(t, filepath.Join(dir, "deploy.md"), edited, "a note's write")
}
