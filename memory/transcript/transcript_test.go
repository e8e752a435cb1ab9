package transcript

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
)

func TestRead(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "transcripts", "claude-code-session.jsonl")
	got, err := Read(path, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := memory.Capture{
		SessionID: "s1",
		Plan:      "Add cursor pagination to the /orders endpoint. Always run go vet before you finish. We use table-driven tests for handlers.",
		Outcome:   "Cursor pagination is in place on /orders (limit and cursor parameters); tests and go vet pass. The docker image could not be built here: no Docker daemon is running.",
		Statements: []string{
			"Always run go vet before you finish.",
			"We use table-driven tests for handlers.",
		},
		Sequences: []memory.Sequence{
			{Steps: []string{"Read /home/dev/shop/orders/handler.go", "Edit /home/dev/shop/orders/handler.go", "go test ./orders/...", "go vet ./..."}, Succeeded: true},
			{Steps: []string{"docker build -t shop .", "docker info"}, Succeeded: false},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
}

func TestReadCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	os.WriteFile(path, []byte(`{"type":"user","message":{"role":"user","content":"hi"}}`+"\n{not json\n"), 0o644)
	_, err := Read(path, "s1")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("corrupt transcript: %v", err)
	}
}

// A payload refused for a member's name or value never quotes it: a
// secret pasted as a name, inside a tool sequence too, or given where a
// list belongs, does not reach the error (and so the hook's log).
func TestParseErrorsQuoteNothing(t *testing.T) {
	secret := "ghp_" + strings.Repeat("Zk3q9XbT2mV7", 3)
	for _, in := range []string{
		`{"session_id":"s1","` + secret + `":"x"}`,
		`{"session_id":"s1","tool_sequences":[{"name":"t","` + secret + `":1}]}`,
		`{"session_id":"s1","statements":"` + secret + `"}`,
		`{"session_id":"s1","statements":[` + secret + `]}`,
		`{"transcript_path":"/x","session_id":"s1","cwd":["` + secret + `"]}`,
	} {
		_, _, err := Parse([]byte(in))
		if err == nil || strings.Contains(err.Error(), "Zk3q") {
			t.Errorf("Parse(%.40q...) = %v", in, err)
		}
	}
}

func TestParse(t *testing.T) {
	if _, _, err := Parse([]byte(`{"session_id":"s","statments":["typo"]}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
	if _, _, err := Parse(nil); err == nil {
		t.Error("empty stdin was accepted")
	}
	in, _, err := Parse([]byte(`{"session_id":"s","statements":["Prefer small PRs"]}`))
	if err != nil || in.SessionID != "s" || len(in.Statements) != 1 {
		t.Errorf("tool payload = %+v, %v", in, err)
	}
}

func TestStatementsIn(t *testing.T) {
	got := statementsIn("Fix the bug. Never push to main directly! please always squash; I think it's fine.\n- Remember: staging first\nWe use pnpm, not npm. Prefer tools, e.g. gofmt, over review comments. 常に日本語で。Always lint！Done.")
	want := []string{"Never push to main directly!", "please always squash; I think it's fine.", "Remember: staging first", "We use pnpm, not npm.", "Prefer tools, e.g. gofmt, over review comments.", "Always lint！"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statementsIn (-want +got):\n%s", diff)
	}
}

// BenchmarkRead distils a transcript of 500 prompts, each with
// four tool calls.
func BenchmarkRead(b *testing.B) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	for i := range 500 {
		enc.Encode(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": fmt.Sprintf("Fix bug %d. Always run go vet before you finish; it helps.", i)}})
		for j := range 4 {
			id := fmt.Sprint("t", i, "-", j)
			enc.Encode(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": fmt.Sprint("go test ./pkg", j)}}}}})
			enc.Encode(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok", "is_error": j == 2}}}})
		}
		enc.Encode(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Fixed; the tests pass and go vet is clean."}}}})
	}
	p := filepath.Join(b.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for range b.N {
		if _, err := Read(p, "s"); err != nil {
			b.Fatal(err)
		}
	}
}
