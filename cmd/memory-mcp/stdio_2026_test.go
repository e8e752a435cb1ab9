package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A 2026-07-28 session over stdio, one request at a time, against a golden
// transcript: discovery, the lists and reads with their caching hints, a
// write, completions, a missing resource, a bad argument, and the methods
// the revision removed. Rewrite it with -update.
func TestStdioTranscript2026(t *testing.T) {
	const listenID = 17
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "transcript", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	// Each step is a request answered before the next one goes, but for
	// the listen, whose answer comes when it is cancelled: it waits for the
	// acknowledgement instead.
	steps := []struct {
		method string
		params map[string]any
		until  string // the answer's method, for a step not answered at once
	}{
		{"server/discover", nil, ""},
		{"prompts/list", nil, ""},
		{"resources/list", nil, ""},
		{"resources/templates/list", nil, ""},
		{"tools/call", map[string]any{"name": "memory_write", "arguments": map[string]any{
			"type": "procedural", "scope": "project", "key": "run-tests", "body": "go test ./..."}}, ""},
		{"tools/call", map[string]any{"name": "memory_write", "arguments": map[string]any{
			"type": "procedural", "scope": "project", "key": "run-tests", "body": 42}}, ""},
		{"resources/read", map[string]any{"uri": "memory://project/procedural/run-tests"}, ""},
		{"resources/read", map[string]any{"uri": "memory://project/procedural/nothing-here"}, ""},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "memory://{scope}/{type}/{key}"},
			"argument": map[string]any{"name": "key", "value": "run"}, "context": map[string]any{"arguments": map[string]any{"type": "procedural"}}}, ""},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "memory://{scope}/{type}/{key}"},
			"argument": map[string]any{"name": "scope", "value": "p"}}, ""},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "recall"},
			"argument": map[string]any{"name": "query", "value": "ru"}}, ""},
		{"prompts/get", map[string]any{"name": "recall", "arguments": map[string]any{"query": "tests"}}, ""},
		{"initialize", map[string]any{"protocolVersion": "2026-07-28", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "transcript", "version": "1"}}, ""},
		{"ping", nil, ""},
		{"logging/setLevel", map[string]any{"level": "info"}, ""},
		{"resources/subscribe", map[string]any{"uri": "memory://index"}, ""},
		{"subscriptions/listen", map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{"memory://index"}}},
			"notifications/subscriptions/acknowledged"},
		{"tools/call", map[string]any{"name": "memory_delete", "arguments": map[string]any{"key": "run-tests"}}, ""},
		{"notifications/cancelled", map[string]any{"requestId": listenID}, "subscriptions/listen"},
	}

	e := newEnv(t)
	cmd := e.command()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	var got strings.Builder
	for i, step := range steps {
		params := map[string]any{"_meta": meta}
		for k, v := range step.params {
			params[k] = v
		}
		msg := map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": step.method, "params": params}
		if strings.HasPrefix(step.method, "notifications/") {
			delete(msg, "id")
		}
		req, _ := json.Marshal(msg)
		fmt.Fprintf(&got, "> %s\n", req)
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			t.Fatal(err)
		}
		// Notifications may come first; the answer carries the request's id.
		for answered := false; !answered; {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the server stopped before answering %s", step.method)
				}
				var m struct {
					ID     any    `json:"id"`
					Method string `json:"method"`
				}
				json.Unmarshal([]byte(line), &m)
				switch step.until {
				case "":
					answered = m.ID == float64(i+1)
				case "subscriptions/listen":
					answered = m.ID == float64(listenID)
				default:
					answered = m.Method == step.until
				}
				fmt.Fprintf(&got, "< %s\n", stable(line))
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer to %s", step.method)
			}
		}
	}

	golden := filepath.Join("testdata", "stdio-2026-07-28.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("transcript differs from %s (-want +got):\n%s", golden, diff)
	}
}

var (
	transcriptTime    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	transcriptID      = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`) // a record's ULID
	transcriptVersion = regexp.MustCompile(`("name":"memory-mcp",[^}]*"version":)"[^"]*"`)
)

// stable is line with what changes from run to run replaced: times, record
// ids and the server's version.
func stable(line string) string {
	line = transcriptTime.ReplaceAllString(line, "TIME")
	line = transcriptID.ReplaceAllString(line, "ID")
	return transcriptVersion.ReplaceAllString(line, `$1"VERSION"`)
}
