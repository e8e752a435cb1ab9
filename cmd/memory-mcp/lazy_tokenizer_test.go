package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tokenizer's tables are most of a small server's memory: a session
// that writes, reads by key, searches and lists never loads them; the
// first recall does, and a session that changed something and never
// recalled loads them on its way out to save the instructions, which the
// next session then carries.
func TestTokenizerLoadsOnlyWhenNeeded(t *testing.T) {
	e := newEnv(t)
	e.extra = []string{"PROMETHEUS_MEMORY_LOG_LEVEL=debug"}
	start := func() (*mcp.ClientSession, *lockedBuffer) {
		cmd := e.command()
		var log lockedBuffer
		cmd.Stderr = &log
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, log.String())
		}
		return cs, &log
	}
	const loaded = "loaded the tokenizer"

	cs, log := start()
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy-target", "body": "staging first", "description": "Where deploys go"})
	ok(t, cs, "memory_read", map[string]any{"key": "deploy-target"})
	ok(t, cs, "memory_search", map[string]any{"query": "staging"})
	ok(t, cs, "memory_list", map[string]any{})
	// Past the instructions' settling time: a refresh would have loaded it.
	time.Sleep(refreshMaxDelay + refreshPoll)
	if strings.Contains(log.String(), loaded) {
		t.Fatalf("writes, reads by key, searches and lists loaded the tokenizer:\n%s", log)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	// The process has exited, and so written all it logs.
	if !strings.Contains(log.String(), `msg="loaded the tokenizer" for="the instructions"`) {
		t.Errorf("the session ended with a change and never saved the instructions:\n%s", log)
	}

	cs, log = start()
	if instr := cs.InitializeResult().Instructions; !strings.Contains(instr, "deploy-target") {
		t.Errorf("the next session's instructions lack the write:\n%s", instr)
	}
	ok(t, cs, "memory_read", map[string]any{})
	// The log line may reach the pipe after the answer.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), `msg="loaded the tokenizer" for=recall`); {
		if time.Now().After(deadline) {
			t.Fatalf("a recall did not load the tokenizer:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cs.Close()
}

// The stdio server answers calls made at once, each of them.
func TestStdioAnswersCallsAtOnce(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_write",
				Arguments: map[string]any{"type": "working", "key": fmt.Sprintf("note-%d", i), "body": "at once"}})
			if err == nil && res.IsError {
				err = fmt.Errorf("%s", text(res))
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ok(t, cs, "memory_list", map[string]any{"type": "working", "limit": 50}); len(got["records"].([]any)) != 16 {
		t.Errorf("%d records listed, want 16", len(got["records"].([]any)))
	}
}

// How long the server waits before it saves new instructions, and how
// often it looks for a loaded tokenizer, as internal/server sets them.
const (
	refreshMaxDelay = 2 * time.Second
	refreshPoll     = 500 * time.Millisecond
)
