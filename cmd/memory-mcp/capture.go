package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
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

func (srv *server) addCaptureTool(s toolAdder) {
	addTool(s, &mcp.Tool{
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
		fmt.Fprintf(&b, "- procedure %s (used %s)\n", p.Key, plural(int(p.UseCount), "time", "times"))
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

// Clips of what a transcript gives, made only after the whole text passed
// the secret scan.
const (
	planBytes    = 2000
	outcomeBytes = 4000
)

// captureCLI reads a memory_capture payload, or a Claude Code hook payload
// whose transcript it distils, from stdin, and records it in the project
// the session ran in: the payload's cwd, else CLAUDE_PROJECT_DIR, else the
// workspace this process is in. A transcript with nothing in it records
// nothing.
func captureCLI(ctx context.Context, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, asJSON bool) error {
	data, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("capture: read stdin: %w", err)
	}
	in, dir, err := parseCapturePayload(data)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if in.empty() {
		if asJSON {
			return printJSON(stdout, map[string]any{"captured": false, "reason": "the session holds no conversation"})
		}
		_, err := io.WriteString(stdout, "Nothing to capture: the session holds no conversation.\n")
		return err
	}
	if dir == "" {
		dir = getenv("CLAUDE_PROJECT_DIR")
	}
	if dir != "" {
		root, err := sessionRoot(dir, getenv("PROMETHEUS_WORKSPACE_ROOT"))
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		// Set as the workspace root, so that where this process runs
		// plays no part, even a directory removed since.
		env := getenv
		getenv = func(k string) string {
			if k == "PROMETHEUS_WORKSPACE_ROOT" {
				return root
			}
			return env(k)
		}
	}
	return withApp(ctx, getenv, stderr, func(a *app, _ *slog.Logger) error {
		if _, err := a.sync(ctx); err != nil {
			return err
		}
		res, err := a.capture(ctx, in)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if asJSON {
			return printJSON(stdout, captureView(res))
		}
		_, err = io.WriteString(stdout, captureText(captureView(res)))
		return err
	})
}

// sessionRoot is the workspace root of a session that ran in dir: the git
// top-level above it, as a server started there would find. A root set
// explicitly still wins for sessions inside it.
func sessionRoot(dir, explicit string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("session directory %q is not an absolute path", dir)
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("session directory: %w", err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("session directory %s is not a directory", dir)
	}
	root, err := scope.Root("", dir)
	if err != nil {
		return "", err
	}
	if explicit != "" {
		if top, err := scope.Root(explicit, ""); err == nil {
			real := dir
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				real = r
			}
			if rel, err := filepath.Rel(top, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return top, nil
			}
		}
	}
	return root, nil
}

func (in captureIn) empty() bool {
	return strings.TrimSpace(in.Plan) == "" && strings.TrimSpace(in.Outcome) == "" && len(in.Statements) == 0 && len(in.ToolSequences) == 0
}

// parseCapturePayload reads stdin: the tool's own JSON, or a hook payload
// whose transcript it distils. dir is the directory the session ran in,
// when the payload says.
func parseCapturePayload(data []byte) (in captureIn, dir string, err error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return captureIn{}, "", errors.New("stdin is empty: want memory_capture JSON or a Claude Code SessionEnd hook payload")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return captureIn{}, "", fmt.Errorf("stdin is not a JSON object: %v", err)
	}
	if _, ok := probe["transcript_path"]; ok {
		var hp hookPayload
		if err := json.Unmarshal(data, &hp); err != nil {
			return captureIn{}, "", fmt.Errorf("hook payload: %v", err)
		}
		if hp.SessionID == "" {
			return captureIn{}, "", errors.New("hook payload has no session_id")
		}
		in, err := fromTranscript(hp)
		return in, hp.CWD, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return captureIn{}, "", fmt.Errorf("capture payload: %v", err)
	}
	return in, "", nil
}

// transcriptLine is the part of a Claude Code transcript line we read.
type transcriptLine struct {
	Type   string `json:"type"`
	IsMeta bool   `json:"isMeta"`
	// A subagent's conversation, logged in line with the session's.
	IsSidechain bool `json:"isSidechain"`
	// The summary that opens a compacted conversation: written for the
	// model, not said by the user.
	IsCompactSummary          bool `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly bool `json:"isVisibleInTranscriptOnly"`
	Message                   *struct {
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

// bookkeeping tools track the agent's own work; they are no step of how a
// thing is done.
var bookkeeping = map[string]bool{"TodoWrite": true, "TodoRead": true, "ExitPlanMode": true}

// turn is what followed one user prompt.
type turn struct {
	steps  []step
	byID   map[string]int
	answer string // assistant text since the last tool call
}

type step struct {
	text     string
	done, ok bool
}

// fromTranscript distils a transcript: the plan is the first user prompt,
// the outcome the last substantive answer, the statements the sentences of
// the user's prompts that state a rule or preference. Each prompt's tool
// calls that succeeded, in order, are one sequence; the calls that failed
// and never succeeded later in that prompt are a failed one, recorded in
// the session's episode but not learned. A subagent's lines, the summary of
// a compacted conversation and system wrappers are not the user's and are
// skipped.
func fromTranscript(hp hookPayload) (captureIn, error) {
	f, err := os.Open(hp.TranscriptPath)
	if err != nil {
		return captureIn{}, fmt.Errorf("transcript: %w", err)
	}
	defer f.Close()
	in := captureIn{SessionID: hp.SessionID}
	var answers []string
	var cur *turn
	flush := func() {
		if cur == nil {
			return
		}
		if a := strings.TrimSpace(cur.answer); a != "" {
			answers = append(answers, a)
		}
		in.ToolSequences = append(in.ToolSequences, sequencesOf(cur.steps)...)
		cur = nil
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
		if tl.Message == nil || tl.IsMeta || tl.IsSidechain || tl.IsCompactSummary || tl.IsVisibleInTranscriptOnly {
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
					if cur == nil {
						continue
					}
					if i, ok := cur.byID[p.ToolUseID]; ok {
						cur.steps[i].done, cur.steps[i].ok = true, !p.IsError
					}
				}
			}
			prompt := strings.TrimSpace(strings.Join(text, "\n"))
			if prompt == "" || strings.HasPrefix(prompt, "<") || strings.HasPrefix(prompt, "[Request interrupted") {
				continue // tool results, interruptions, command and system wrappers
			}
			flush()
			cur = &turn{byID: map[string]int{}}
			if in.Plan == "" {
				in.Plan = clipScanned(prompt, planBytes)
			}
			in.Statements = append(in.Statements, statementsIn(prompt)...)
		case "assistant":
			if cur == nil {
				cur = &turn{byID: map[string]int{}}
			}
			for _, p := range parts {
				switch p.Type {
				case "text":
					if t := strings.TrimSpace(p.Text); t != "" {
						if cur.answer != "" {
							cur.answer += "\n\n"
						}
						cur.answer += t
					}
				case "tool_use":
					cur.answer = "" // what came before a call was no answer
					if bookkeeping[p.Name] {
						continue
					}
					cur.byID[p.ID] = len(cur.steps)
					cur.steps = append(cur.steps, step{text: stepOf(p)})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return captureIn{}, fmt.Errorf("transcript %s: %w; nothing was recorded", hp.TranscriptPath, err)
	}
	flush()
	in.Outcome = clipScanned(outcomeOf(answers), outcomeBytes)
	return in, nil
}

// sequencesOf turns one prompt's tool calls into what a capture learns: the
// calls that succeeded, in order, a repeated call once (a command that
// failed and then succeeded is kept in its successful form); and the calls
// that failed and never succeeded, for the record. A call with no result
// (the session ended first) is neither.
func sequencesOf(steps []step) []memory.Sequence {
	var ok, failed []string
	worked := map[string]bool{}
	for _, s := range steps {
		if s.done && s.ok {
			worked[s.text] = true
		}
	}
	for _, s := range steps {
		switch {
		case !s.done:
		case s.ok:
			if len(ok) == 0 || ok[len(ok)-1] != s.text {
				ok = append(ok, s.text)
			}
		case !worked[s.text] && !slices.Contains(failed, s.text):
			failed = append(failed, s.text)
		}
	}
	var out []memory.Sequence
	if len(ok) >= 2 {
		out = append(out, memory.Sequence{Steps: ok, Succeeded: true})
	}
	if len(failed) > 0 {
		out = append(out, memory.Sequence{Steps: failed, Succeeded: false})
	}
	return out
}

// acknowledgement matches an answer that only acknowledges ("Noted.", "Got it, will
// do."): no outcome of a session.
var acknowledgement = regexp.MustCompile(`(?i)^(?:ok(?:ay)?|noted|got it|sure|understood|will do|thanks|thank you|you're welcome|sounds good|great|perfect|acknowledged|roger|i'll remember|i will remember)\b`)

// outcomeOf is the last substantive answer, else the last answer.
func outcomeOf(answers []string) string {
	for i := len(answers) - 1; i >= 0; i-- {
		a := answers[i]
		n := utf8.RuneCountInString(a)
		if n > 12 && !(n <= 120 && acknowledgement.MatchString(a)) {
			return a
		}
	}
	if len(answers) > 0 {
		return answers[len(answers)-1]
	}
	return ""
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
// name and the file, pattern or task they worked on.
func stepOf(p contentPart) string {
	var in map[string]any
	json.Unmarshal(p.Input, &in)
	if s, ok := in["command"].(string); ok && s != "" {
		return strings.TrimSpace(s)
	}
	for _, k := range []string{"file_path", "path", "notebook_path", "pattern", "url", "query", "description"} {
		if s, ok := in[k].(string); ok && s != "" {
			return p.Name + " " + s
		}
	}
	return p.Name
}

var (
	ruleSentence = regexp.MustCompile(`(?i)^(?:please\s+)?(?:always|never|we use|we always|we never|prefer|remember)\b`)
	notRule      = regexp.MustCompile(`(?i)^(?:please\s+)?never\s*mind\b`)
)

// statementsIn picks the sentences of a prompt that state a durable rule
// or preference. Questions are none, nor is text the user quoted or pasted
// (code blocks, quoted lines).
func statementsIn(prompt string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(prompt, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(t, ">") {
			continue
		}
		for _, s := range splitSentences(t) {
			s = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "-*•+ "))
			if ruleSentence.MatchString(s) && !notRule.MatchString(s) && !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "？") && len(s) <= 300 {
				out = append(out, s)
			}
		}
	}
	return out
}

// abbreviations end in a full stop that does not end a sentence.
var abbreviations = map[string]bool{"e.g": true, "i.e": true, "etc": true, "vs": true, "cf": true}

// splitSentences cuts a line after each full stop, exclamation or question
// mark that ends a sentence. Semicolons and commas do not: a statement is
// the whole sentence.
func splitSentences(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		end := i + utf8.RuneLen(r)
		switch r {
		case '。', '！', '？':
		case '.', '!', '?':
			if end < len(s) && s[end] != ' ' {
				continue
			}
			if r == '.' {
				word := s[strings.LastIndexByte(s[:i], ' ')+1 : i]
				if abbreviations[strings.ToLower(word)] {
					continue
				}
			}
		default:
			continue
		}
		out = append(out, s[start:end])
		start = end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// clipScanned clips s to n bytes on a rune boundary, but only once the
// whole of it passed the secret scan: a text holding a secret is passed on
// whole, for the capture to refuse, so that no part of a secret that
// straddles the clip is kept.
func clipScanned(s string, n int) string {
	if len(s) <= n || memory.ScanField("", s) != nil {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
