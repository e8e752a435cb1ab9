// Package transcript reads what a Claude Code session leaves behind into
// a capture: the SessionEnd hook's payload, and the JSONL transcript it
// names, distilled into the plan, the outcome, the rules the user stated
// and the tool sequences that worked. It is pure but for reading the
// transcript's file; it imports memory, never a store or the MCP SDK.
package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory"
)

// Hook is what Claude Code sends a SessionEnd hook on stdin.
type Hook struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	CWD            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	Reason         string `json:"reason"`
}

// PlanBytes and OutcomeBytes clip the plan and the outcome a transcript
// gives, once the whole text passed the secret scan.
const (
	PlanBytes    = 2000
	OutcomeBytes = 4000
)

// Empty reports whether c holds nothing to record.
func Empty(c memory.Capture) bool {
	return strings.TrimSpace(c.Plan) == "" && strings.TrimSpace(c.Outcome) == "" && len(c.Statements) == 0 && len(c.Sequences) == 0
}

// payload is memory_capture's own JSON.
type payload struct {
	SessionID     string            `json:"session_id"`
	Plan          string            `json:"plan,omitempty"`
	Outcome       string            `json:"outcome,omitempty"`
	Statements    []string          `json:"statements,omitempty"`
	ToolSequences []memory.Sequence `json:"tool_sequences,omitempty"`
}

// Parse reads what a capture hook is given on stdin: memory_capture's own
// JSON, or a Claude Code hook payload whose transcript it distils. dir is
// the directory the session ran in, when the payload says.
func Parse(data []byte) (c memory.Capture, dir string, err error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return memory.Capture{}, "", errors.New("stdin is empty: want memory_capture JSON or a Claude Code SessionEnd hook payload")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return memory.Capture{}, "", fmt.Errorf("stdin is not a JSON object: %s", describe(err))
	}
	if _, ok := probe["transcript_path"]; ok {
		var hp Hook
		if err := json.Unmarshal(data, &hp); err != nil {
			return memory.Capture{}, "", fmt.Errorf("hook payload: %s", describe(err))
		}
		if hp.SessionID == "" {
			return memory.Capture{}, "", errors.New("hook payload has no session_id")
		}
		c, err := Read(hp.TranscriptPath, hp.SessionID)
		return c, hp.CWD, err
	}
	var in payload
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return memory.Capture{}, "", fmt.Errorf("capture payload: %s", describe(err))
	}
	return memory.Capture{SessionID: in.SessionID, Plan: in.Plan, Outcome: in.Outcome, Statements: in.Statements, Sequences: in.ToolSequences}, "", nil
}

// fieldPath is a decoding error's path when it is one of the payload's
// own member names, not text the caller chose.
var fieldPath = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)*$`)

// describe says what is wrong with a payload without any of its text: the
// decoder's own messages quote unknown member names and characters, and a
// name may be a secret pasted in the wrong place. Hook stderr is often
// logged.
func describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te) && fieldPath.MatchString(te.Field):
		return fmt.Sprintf("%s has the wrong type (want %s)", te.Field, te.Type)
	case errors.As(err, &te):
		return fmt.Sprintf("a member has the wrong type (want %s)", te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return "a member it does not have (it takes session_id, plan, outcome, statements and tool_sequences with name, steps and succeeded)"
	}
	return "not a JSON object of the expected shape"
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

// Read distils the transcript at path, of session sessionID: the plan is the first user prompt,
// the outcome the last substantive answer, the statements the sentences of
// the user's prompts that state a rule or preference. Each prompt's tool
// calls that succeeded, in order, are one sequence; the calls that failed
// and never succeeded later in that prompt are a failed one, recorded in
// the session's episode but not learned. A subagent's lines, the summary of
// a compacted conversation and system wrappers are not the user's and are
// skipped.
func Read(path, sessionID string) (memory.Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return memory.Capture{}, fmt.Errorf("transcript: %w", err)
	}
	defer f.Close()
	in := memory.Capture{SessionID: sessionID}
	var answers []string
	var cur *turn
	flush := func() {
		if cur == nil {
			return
		}
		if a := strings.TrimSpace(cur.answer); a != "" {
			answers = append(answers, a)
		}
		in.Sequences = append(in.Sequences, sequencesOf(cur.steps)...)
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
			return memory.Capture{}, fmt.Errorf("transcript %s line %d is not JSON (%v); nothing was recorded", path, n, err)
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
				in.Plan = clipScanned(prompt, PlanBytes)
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
		return memory.Capture{}, fmt.Errorf("transcript %s: %w; nothing was recorded", path, err)
	}
	flush()
	in.Outcome = clipScanned(outcomeOf(answers), OutcomeBytes)
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
