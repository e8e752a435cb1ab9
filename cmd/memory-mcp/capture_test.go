package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
)

func TestFromTranscript(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "transcripts", "claude-code-session.jsonl")
	got, err := fromTranscript(hookPayload{SessionID: "s1", TranscriptPath: path})
	if err != nil {
		t.Fatal(err)
	}
	want := captureIn{
		SessionID: "s1",
		Plan:      "Add cursor pagination to the /orders endpoint. Always run go vet before you finish. We use table-driven tests for handlers.",
		Outcome:   "Cursor pagination is in place on /orders (limit and cursor parameters); tests and go vet pass. The docker image could not be built here: no Docker daemon is running.",
		Statements: []string{
			"Always run go vet before you finish.",
			"We use table-driven tests for handlers.",
		},
		ToolSequences: []memory.Sequence{
			{Steps: []string{"Read /home/dev/shop/orders/handler.go", "Edit /home/dev/shop/orders/handler.go", "go test ./orders/...", "go vet ./..."}, Succeeded: true},
			{Steps: []string{"docker build -t shop .", "docker info"}, Succeeded: false},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fromTranscript (-want +got):\n%s", diff)
	}
}

func TestFromTranscriptCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	os.WriteFile(path, []byte(`{"type":"user","message":{"role":"user","content":"hi"}}`+"\n{not json\n"), 0o644)
	_, err := fromTranscript(hookPayload{SessionID: "s1", TranscriptPath: path})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("corrupt transcript: %v", err)
	}
}

func TestParseCapturePayload(t *testing.T) {
	if _, err := parseCapturePayload([]byte(`{"session_id":"s","statments":["typo"]}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
	if _, err := parseCapturePayload(nil); err == nil {
		t.Error("empty stdin was accepted")
	}
	in, err := parseCapturePayload([]byte(`{"session_id":"s","statements":["Prefer small PRs"]}`))
	if err != nil || in.SessionID != "s" || len(in.Statements) != 1 {
		t.Errorf("tool payload = %+v, %v", in, err)
	}
}

func TestStatementsIn(t *testing.T) {
	got := statementsIn("Fix the bug. Never push to main directly! please always squash; I think it's fine.\n- Remember: staging first\nWe use pnpm, not npm.")
	want := []string{"Never push to main directly!", "please always squash;", "Remember: staging first", "We use pnpm, not npm."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statementsIn (-want +got):\n%s", diff)
	}
}
