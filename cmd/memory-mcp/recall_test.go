package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRecallEndToEnd(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "use go test", "scope": "system"})
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "use make test", "description": "How tests run"})
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "key": "release", "body": "1. make release\n2. git push --tags", "description": "Cut a release"})
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "scratch", "body": "not woven"})

	out := ok(t, cs, "memory_read", map[string]any{})
	block := out["block"].(string)
	if !strings.Contains(block, "use make test") || strings.Contains(block, "use go test") {
		t.Errorf("block does not show the project override only:\n%s", block)
	}
	if !strings.Contains(block, "make release") || strings.Contains(block, "not woven") {
		t.Errorf("block content:\n%s", block)
	}
	if tok := out["tokens"].(float64); tok <= 0 || tok > 1500 {
		t.Errorf("tokens = %v", tok)
	}
	small := ok(t, cs, "memory_read", map[string]any{"max_tokens": 5})
	if tok := small["tokens"].(float64); tok > 5 {
		t.Errorf("tokens %v over a budget of 5", tok)
	}

	// The resource and the prompt give the same block.
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://recall"})
	if err != nil || !strings.Contains(res.Contents[0].Text, "use make test") {
		t.Fatalf("memory://recall = %v, %v", res, err)
	}
	idx, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://index"})
	if err != nil || !strings.Contains(idx.Contents[0].Text, "test-runner") || !strings.Contains(idx.Contents[0].Text, "scratch") {
		t.Fatalf("memory://index = %v, %v", idx, err)
	}
	one, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://system/semantic/test-runner"})
	if err != nil || !strings.Contains(one.Contents[0].Text, "use go test") {
		t.Fatalf("record resource = %v, %v", one, err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://project/semantic/nope"}); err == nil {
		t.Error("a missing record resource was found")
	}
	p, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "recall", Arguments: map[string]string{"query": "release"}})
	if err != nil || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "make release") {
		t.Fatalf("prompt = %v, %v", p, err)
	}

	// The CLI prints the same block for a session-start hook.
	cmd := e.command("read", "--max-tokens", "400")
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "use make test") || strings.Contains(string(got), "use go test") {
		t.Errorf("memory-mcp read:\n%s", got)
	}
}

func TestRecallQueryFirst(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "strong", "body": "The most trusted fact.", "confidence": 0.99})
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "kafka", "body": "Kafka topics are created by terraform.", "confidence": 0.1})
	out := ok(t, cs, "memory_read", map[string]any{"query": "kafka topics"})
	inc := out["included"].([]any)
	block := out["block"].(string)
	if len(inc) != 2 || strings.Index(block, "kafka") > strings.Index(block, "strong") {
		t.Errorf("the relevant record is not first:\n%s", block)
	}
}

func TestSubscribersNotified(t *testing.T) {
	e := newEnv(t)
	updated := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	// Under the current protocol Subscribe only sends subscriptions/listen;
	// the subscription holds once the server acknowledges it.
	acked := make(chan string, 16)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok && method == "notifications/subscriptions/acknowledged" {
				for _, uri := range p.Notifications.ResourceSubscriptions {
					acked <- uri
				}
			}
			return next(ctx, method, req)
		}
	})
	cs := connectClient(t, e, client)
	uris := []string{"memory://recall", "memory://project/semantic/style"}
	for _, uri := range uris {
		if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if cs.InitializeResult().ProtocolVersion >= "2026-07-28" {
		awaitAll(t, acked, uris, "acknowledged")
	}
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "style", "body": "gofmt everything"})
	awaitAll(t, updated, uris, "notified of")
	// A write to another key concerns the recall block, not the record.
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "naming", "body": "short names"})
	awaitAll(t, updated, uris[:1], "after the second write, notified of")
	select {
	case u := <-updated:
		t.Errorf("notified of %s, which did not change", u)
	case <-time.After(200 * time.Millisecond):
	}
}

// awaitAll reads URIs from ch until every one of want has come.
func awaitAll(t *testing.T, ch <-chan string, want []string, what string) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for _, u := range want {
		for !seen[u] {
			select {
			case got := <-ch:
				seen[got] = true
			case <-deadline:
				t.Fatalf("%s %v only; want %v", what, seen, want)
			}
		}
	}
}

func TestInstructionsCarryIndex(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy-target", "body": "staging first", "description": "Where deploys go"})
	// The first server saves capped instructions once its tokenizer is in,
	// which a recall loads.
	ok(t, cs, "memory_read", map[string]any{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		cs2 := connect(t, e, nil)
		instr := cs2.InitializeResult().Instructions
		cs2.Close()
		if strings.Contains(instr, "deploy-target") {
			if !strings.Contains(instr, "memory_read") {
				t.Errorf("instructions lack the guide:\n%s", instr)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instructions never carried the index (protocol %s):\n%s", cs2.InitializeResult().ProtocolVersion, instr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A change made just before the session ends reaches the next one:
	// the server refreshes the saved instructions on its way out.
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "last-minute", "body": "said just before closing"})
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	cs3 := connect(t, e, nil)
	if instr := cs3.InitializeResult().Instructions; !strings.Contains(instr, "last-minute") {
		t.Errorf("the next session's instructions lack the last change:\n%s", instr)
	}
}

func TestCaptureEndToEnd(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	capture := func(session string) map[string]any {
		return ok(t, cs, "memory_capture", map[string]any{
			"session_id": session, "plan": "Fix the flaky login test", "outcome": "Fixed it",
			"statements":     []string{"Always run make lint before committing."},
			"tool_sequences": []map[string]any{{"name": "verify", "steps": []string{"make lint", "make test"}, "succeeded": true}, {"name": "broken", "steps": []string{"make deploy"}, "succeeded": false}},
		})
	}
	first := capture("session-1")
	if n := len(first["facts_pending"].([]any)); n != 1 {
		t.Fatalf("pending after one session = %d", n)
	}
	again := capture("session-1")
	if !again["replaced"].(bool) || len(again["facts_promoted"].([]any)) != 0 {
		t.Fatalf("re-capture = %v", again)
	}
	second := capture("session-2")
	promoted := second["facts_promoted"].([]any)
	if len(promoted) != 1 {
		t.Fatalf("promoted after two sessions = %v", second)
	}
	c2 := promoted[0].(map[string]any)["confidence"].(float64)
	procs := second["procedures"].([]any)
	if len(procs) != 1 || procs[0].(map[string]any)["use_count"].(float64) != 2 {
		t.Fatalf("procedures = %v", procs)
	}
	third := capture("session-3")
	if c3 := third["facts_promoted"].([]any)[0].(map[string]any)["confidence"].(float64); c3 <= c2 {
		t.Errorf("confidence %v after a third session, was %v", c3, c2)
	}
	// The fact is mirrored like any other.
	key := promoted[0].(map[string]any)["key"].(string)
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", key+".md")); err != nil {
		t.Errorf("promoted fact not mirrored: %v", err)
	}
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "broken", "type": "procedural"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("a failed sequence was learned: %s", msg)
	}
}

func TestCaptureCLIFromClaudeCodeHook(t *testing.T) {
	transcript, err := filepath.Abs(filepath.Join("..", "..", "testdata", "transcripts", "claude-code-session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	for _, session := range []string{"cc-session-1", "cc-session-2"} {
		payload, _ := json.Marshal(map[string]any{"session_id": session, "transcript_path": transcript, "cwd": e.root, "hook_event_name": "SessionEnd", "reason": "exit"})
		cmd := e.command("capture")
		cmd.Stdin = strings.NewReader(string(payload))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("capture %s: %v\n%s", session, err, out)
		}
	}
	cs := connect(t, e, nil)
	ep := ok(t, cs, "memory_read", map[string]any{"key": "cc-session-1"})["record"].(map[string]any)
	if !strings.Contains(ep["body"].(string), "pagination") {
		t.Errorf("episode body:\n%s", ep["body"])
	}
	facts := ok(t, cs, "memory_list", map[string]any{"type": "semantic"})["records"].([]any)
	var keys []string
	for _, f := range facts {
		keys = append(keys, f.(map[string]any)["key"].(string))
	}
	if !strings.Contains(strings.Join(keys, " "), "always-run-go-vet") {
		t.Errorf("facts from the transcript: %v", keys)
	}
	procs := ok(t, cs, "memory_list", map[string]any{"type": "procedural"})["records"].([]any)
	if len(procs) != 1 || procs[0].(map[string]any)["use_count"].(float64) != 2 {
		t.Errorf("procedures from the transcript: %v", procs)
	}

	// A missing transcript: a clear error, a non-zero exit, nothing recorded.
	cmd := e.command("capture")
	cmd.Stdin = strings.NewReader(`{"session_id":"cc-missing","transcript_path":"/nonexistent/t.jsonl","hook_event_name":"SessionEnd"}`)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "transcript") {
		t.Errorf("missing transcript: %v\n%s", err, out)
	}
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "cc-missing"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("a failed capture recorded something: %s", msg)
	}
}
