package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
)

type captureIn struct {
	SessionID     string            `json:"session_id"`
	Plan          string            `json:"plan,omitempty"`
	Outcome       string            `json:"outcome,omitempty"`
	Statements    []string          `json:"statements,omitempty"`
	ToolSequences []memory.Sequence `json:"tool_sequences,omitempty"`
}

type factRow struct {
	Key        string  `json:"key"`
	Confidence float64 `json:"confidence"`
}

type procRow struct {
	Key      string `json:"key"`
	UseCount int64  `json:"use_count"`
}

type captureOut struct {
	Episode       recordView       `json:"episode"`
	Replaced      bool             `json:"replaced"`
	FactsPromoted []factRow        `json:"facts_promoted"`
	FactsPending  []memory.Pending `json:"facts_pending"`
	Procedures    []procRow        `json:"procedures"`
	Refused       []memory.Refusal `json:"refused"`
}

func (srv *server) addCaptureTool(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "memory_capture",
		Title: "Learn from a finished session",
		Description: `Call once at the end of a session to turn it into memory. plan and outcome become the session's episodic record (capturing the same session again replaces it). Each statement — a rule or preference the user stated, like "always run make lint before committing" — counts as one confirmation; once confirmed in 2 sessions it becomes a project fact, and further confirmations raise its confidence. Each successful tool sequence becomes a procedure; repeating one raises its use count. Items holding secrets are refused one by one; the rest is kept.
Example: {"session_id":"2026-05-01-fix-login","plan":"Fix the login redirect","outcome":"Fixed; added a test","statements":["Always run make lint before committing"],"tool_sequences":[{"name":"run tests","steps":["make build","make test"],"succeeded":true}]}`,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		InputSchema: schemaFor[captureIn](func(p map[string]*jsonschema.Schema) {
			p["session_id"].Description = "the session's id; capturing it again replaces the earlier capture"
			p["plan"].Description = "what the session set out to do"
			p["outcome"].Description = "what came of it"
			p["statements"].Description = "durable rules or preferences stated in the session, one sentence each"
			p["tool_sequences"].Description = "tool calls run in order; steps are commands or tool names; only successful ones are learned"
		}),
	}, wrap(srv.capture))
}

func (srv *server) capture(ctx context.Context, in captureIn) (string, captureOut, error) {
	if _, err := srv.sync(ctx); err != nil {
		return "", captureOut{}, err
	}
	res, err := srv.app.capture(ctx, in)
	if err != nil {
		return "", captureOut{}, err
	}
	recs := append([]memory.Record{res.Episode}, res.Promoted...)
	srv.changed(ctx, append(recs, res.Procedures...)...)
	out := captureView(res)
	return captureText(out), out, nil
}

func (a *app) capture(ctx context.Context, in captureIn) (memory.CaptureResult, error) {
	return a.store.Capture(ctx, a.proj, memory.Capture{
		SessionID: in.SessionID, Plan: in.Plan, Outcome: in.Outcome, Statements: in.Statements, Sequences: in.ToolSequences,
	}, a.cfg.Confirmations)
}

func captureView(res memory.CaptureResult) captureOut {
	out := captureOut{Episode: view(res.Episode), Replaced: res.Replaced, FactsPromoted: []factRow{},
		FactsPending: res.Pending, Procedures: []procRow{}, Refused: res.Refused}
	out.Episode.Body = ""
	if out.FactsPending == nil {
		out.FactsPending = []memory.Pending{}
	}
	if out.Refused == nil {
		out.Refused = []memory.Refusal{}
	}
	for _, r := range res.Promoted {
		out.FactsPromoted = append(out.FactsPromoted, factRow{Key: r.Key, Confidence: r.Confidence})
	}
	for _, r := range res.Procedures {
		out.Procedures = append(out.Procedures, procRow{Key: r.Key, UseCount: r.UseCount})
	}
	return out
}

func captureText(out captureOut) string {
	var b strings.Builder
	verb := "Captured"
	if out.Replaced {
		verb = "Re-captured"
	}
	fmt.Fprintf(&b, "%s session %q as episodic %q.\n", verb, out.Episode.SessionID, out.Episode.Key)
	for _, f := range out.FactsPromoted {
		fmt.Fprintf(&b, "- fact %s (confidence %.2f)\n", f.Key, f.Confidence)
	}
	for _, p := range out.FactsPending {
		fmt.Fprintf(&b, "- pending: %q (%d of %d sessions)\n", p.Statement, p.Confirmations, p.Needed)
	}
	for _, p := range out.Procedures {
		fmt.Fprintf(&b, "- procedure %s (used %d times)\n", p.Key, p.UseCount)
	}
	for _, r := range out.Refused {
		fmt.Fprintf(&b, "- refused %s: %s\n", r.Item, r.Reason)
	}
	return b.String()
}

// hookPayload is what Claude Code sends a SessionEnd hook on stdin.
type hookPayload struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	CWD            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	Reason         string `json:"reason"`
}

// captureCLI reads a memory_capture payload, or a Claude Code hook payload
// whose transcript it distils, from stdin, and records it.
func captureCLI(ctx context.Context, a *app, stdin io.Reader, stdout io.Writer) error {
	data, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("capture: read stdin: %w", err)
	}
	in, err := parseCapturePayload(data)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if _, err := a.sync(ctx); err != nil {
		return err
	}
	res, err := a.capture(ctx, in)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	out := captureView(res)
	_, err = io.WriteString(stdout, captureText(out))
	return err
}

func parseCapturePayload(data []byte) (captureIn, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return captureIn{}, errors.New("stdin is empty: want memory_capture JSON or a Claude Code SessionEnd hook payload")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return captureIn{}, fmt.Errorf("stdin is not a JSON object: %v", err)
	}
	if _, ok := probe["transcript_path"]; ok {
		var hp hookPayload
		if err := json.Unmarshal(data, &hp); err != nil {
			return captureIn{}, fmt.Errorf("hook payload: %v", err)
		}
		if hp.SessionID == "" {
			return captureIn{}, errors.New("hook payload has no session_id")
		}
		return fromTranscript(hp)
	}
	var in captureIn
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return captureIn{}, fmt.Errorf("capture payload: %v", err)
	}
	return in, nil
}

// transcriptLine is the part of a Claude Code transcript line we read.
type transcriptLine struct {
	Type    string `json:"type"`
	IsMeta  bool   `json:"isMeta"`
	Message *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

type contentPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

// fromTranscript distils a transcript: the plan is the first user prompt,
// the outcome the last assistant text, each user prompt's tool calls one
// sequence (succeeded when none of their results was an error), and the
// statements the user's sentences that state a rule or preference.
func fromTranscript(hp hookPayload) (captureIn, error) {
	f, err := os.Open(hp.TranscriptPath)
	if err != nil {
		return captureIn{}, fmt.Errorf("transcript: %w", err)
	}
	defer f.Close()
	in := captureIn{SessionID: hp.SessionID}
	var cur *memory.Sequence
	calls := map[string]int{} // tool_use id → step index in cur
	flush := func() {
		if cur != nil && len(cur.Steps) >= 2 {
			in.ToolSequences = append(in.ToolSequences, *cur)
		}
		cur, calls = nil, map[string]int{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var tl transcriptLine
		if err := json.Unmarshal(line, &tl); err != nil {
			return captureIn{}, fmt.Errorf("transcript %s line %d is not JSON (%v); nothing was recorded", hp.TranscriptPath, n, err)
		}
		if tl.Message == nil || tl.IsMeta {
			continue
		}
		parts := contentParts(tl.Message.Content)
		switch tl.Message.Role {
		case "user":
			var text []string
			for _, p := range parts {
				switch p.Type {
				case "text":
					text = append(text, p.Text)
				case "tool_result":
					if _, ok := calls[p.ToolUseID]; ok && p.IsError {
						cur.Succeeded = false
					}
				}
			}
			prompt := strings.TrimSpace(strings.Join(text, "\n"))
			if prompt == "" || strings.HasPrefix(prompt, "<") {
				continue // tool results, or command and system wrappers
			}
			flush()
			if in.Plan == "" {
				in.Plan = clipText(prompt, 2000)
			}
			in.Statements = append(in.Statements, statementsIn(prompt)...)
		case "assistant":
			for _, p := range parts {
				switch p.Type {
				case "text":
					if t := strings.TrimSpace(p.Text); t != "" {
						in.Outcome = clipText(t, 4000)
					}
				case "tool_use":
					if cur == nil {
						cur = &memory.Sequence{Succeeded: true}
					}
					calls[p.ID] = len(cur.Steps)
					cur.Steps = append(cur.Steps, stepOf(p))
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return captureIn{}, fmt.Errorf("transcript %s: %w; nothing was recorded", hp.TranscriptPath, err)
	}
	flush()
	return in, nil
}

func contentParts(raw json.RawMessage) []contentPart {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []contentPart{{Type: "text", Text: s}}
	}
	var parts []contentPart
	json.Unmarshal(raw, &parts)
	return parts
}

// stepOf names one tool call: Bash by its command, other tools by their
// name and the file or pattern they worked on.
func stepOf(p contentPart) string {
	var in map[string]any
	json.Unmarshal(p.Input, &in)
	if s, ok := in["command"].(string); ok && s != "" {
		return strings.TrimSpace(s)
	}
	for _, k := range []string{"file_path", "path", "pattern", "url", "query"} {
		if s, ok := in[k].(string); ok && s != "" {
			return p.Name + " " + s
		}
	}
	return p.Name
}

var ruleSentence = regexp.MustCompile(`(?i)^(?:please\s+)?(?:always|never|we use|we always|we never|prefer|remember)\b`)

// statementsIn picks the sentences of a prompt that state a durable rule
// or preference.
func statementsIn(prompt string) []string {
	var out []string
	for _, line := range strings.Split(prompt, "\n") {
		for _, s := range splitSentences(line) {
			s = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "-*• "))
			if ruleSentence.MatchString(s) && len(s) <= 300 {
				out = append(out, s)
			}
		}
	}
	return out
}

func splitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?' || s[i] == ';') && (i+1 == len(s) || s[i+1] == ' ') {
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
