package memory

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"prom.codes/memory-mcp/scope"
)

// Capture is what one finished session teaches.
type Capture struct {
	SessionID  string
	Plan       string
	Outcome    string
	Statements []string   // rules and preferences stated during the session
	Sequences  []Sequence // tool sequences run
}

// Sequence is a run of tool calls.
type Sequence struct {
	Name      string   `json:"name"`
	Steps     []string `json:"steps"`
	Succeeded bool     `json:"succeeded"`
}

// CaptureResult says what a capture recorded.
type CaptureResult struct {
	Episode    Record    // the session's episodic record
	Replaced   bool      // the session had been captured before
	Promoted   []Record  // facts created or strengthened by a statement
	Pending    []Pending // statements not yet confirmed often enough
	Procedures []Record  // procedures recorded or repeated
	Refused    []Refusal // items left out, each with why
}

// Pending is a statement waiting for more sessions to confirm it.
type Pending struct {
	Statement     string `json:"statement"`
	Confirmations int    `json:"confirmations"`
	Needed        int    `json:"needed"`
}

// Refusal is an item of a capture that was not recorded.
type Refusal struct {
	Item   string `json:"item"` // e.g. "statements[2]"
	Code   Code   `json:"code"`
	Reason string `json:"reason"` // never the value
}

// Confidence of a fact promoted from statements, and how far each further
// confirmation moves it towards 1.
const (
	promotedConfidence = 0.6
	confirmStep        = 0.5
	maxConfidence      = 0.99
)

// strengthen is the confidence after one more confirmation.
func strengthen(c float64) float64 {
	return math.Min(maxConfidence, math.Round((c+(1-c)*confirmStep)*1e4)/1e4)
}

// Capture records a finished session for project p: its episodic record
// (replacing an earlier capture of the same session), one confirmation per
// statement, which becomes or strengthens a project fact once needed
// distinct sessions have confirmed it, and a procedure for each successful
// tool sequence. An item holding a secret or otherwise invalid is refused on
// its own and the rest proceeds. It all happens in one transaction.
// Errors: CodeInvalidArgument for a missing or unusable session id.
func (s *Store) Capture(ctx context.Context, p Project, c Capture, needed int) (CaptureResult, error) {
	if needed < 1 {
		needed = 2
	}
	if strings.TrimSpace(c.SessionID) == "" {
		return CaptureResult{}, Errorf(CodeInvalidArgument, "session_id", "is empty")
	}
	if err := ScanField("session_id", c.SessionID); err != nil {
		return CaptureResult{}, err
	}
	key, err := NormalizeKey("session_id", Slug(c.SessionID))
	if err != nil {
		return CaptureResult{}, err
	}
	var res CaptureResult
	refuse := func(item string, err error) {
		var me *Error
		if !errors.As(err, &me) {
			me = &Error{Code: CodeInvalidArgument, Msg: err.Error()}
		}
		res.Refused = append(res.Refused, Refusal{Item: item, Code: me.Code, Reason: me.Error()})
	}
	clean := func(item, field, v string) string {
		if err := ScanField(field, v); err != nil {
			refuse(item, err)
			return ""
		}
		return v
	}
	plan := clean("plan", "plan", strings.TrimSpace(c.Plan))
	outcome := clean("outcome", "outcome", strings.TrimSpace(c.Outcome))
	var stmts []string
	for i, st := range c.Statements {
		item := fmt.Sprintf("statements[%d]", i)
		st = strings.Join(strings.Fields(st), " ")
		if st == "" {
			continue
		}
		if clean(item, item, st) == "" {
			continue
		}
		stmts = append(stmts, st)
	}
	var seqs []Sequence
	for i, q := range c.Sequences {
		item := fmt.Sprintf("tool_sequences[%d]", i)
		if clean(item, item+".name", q.Name) == "" && q.Name != "" {
			continue
		}
		ok := true
		var steps []string
		for j, st := range q.Steps {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			if err := ScanField(fmt.Sprintf("%s.steps[%d]", item, j), st); err != nil {
				refuse(item, err)
				ok = false
				break
			}
			steps = append(steps, st)
		}
		if ok && len(steps) > 0 {
			q.Steps = steps
			seqs = append(seqs, q)
		}
	}

	err = s.tx(ctx, func(tx *sql.Tx) error {
		res.Promoted, res.Pending, res.Procedures = nil, nil, nil
		ep, created, err := s.put(ctx, tx, p, Write{
			Scope: scope.Project, Type: Episodic, Key: key, Description: episodeDescription(plan, outcome),
			Body: episodeBody(c.SessionID, plan, outcome, stmts, seqs), SessionID: c.SessionID, Source: FromCapture,
		}, "")
		if err != nil {
			return err
		}
		res.Episode, res.Replaced = ep, !created
		for _, st := range stmts {
			if err := s.confirm(ctx, tx, p, c.SessionID, st, needed, &res); err != nil {
				return err
			}
		}
		for _, q := range seqs {
			if !q.Succeeded {
				continue
			}
			if err := s.learnProcedure(ctx, tx, p, c.SessionID, q, &res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return CaptureResult{}, err
	}
	return res, nil
}

// NormalizeStatement makes trivial rewordings of a statement equal: case,
// spacing and trailing punctuation do not count.
func NormalizeStatement(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// Slug turns free text into a key: lower case, runs of anything but letters
// and digits become '-', at most 60 characters (a short hash keeps longer
// texts apart).
func Slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) || r == '.' || r == '_' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	out := strings.Trim(b.String(), "._-")
	if len(out) > 60 || out == "" {
		sum := sha256.Sum256([]byte(s))
		cut := min(len(out), 51)
		out = strings.Trim(out[:cut], "._-")
		if out != "" {
			out += "-"
		}
		out += hex.EncodeToString(sum[:4])
	}
	return out
}

func (s *Store) confirm(ctx context.Context, tx *sql.Tx, p Project, session, statement string, needed int, res *CaptureResult) error {
	norm := NormalizeStatement(statement)
	if norm == "" {
		return nil
	}
	r, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO statement_sessions (project, statement, session_id, said) VALUES (?, ?, ?, ?)`, string(p.ID), norm, session, statement)
	if err != nil {
		return err
	}
	added, _ := r.RowsAffected()
	// The first session's wording is the one a fact keeps.
	var n int
	var first string
	if err := tx.QueryRowContext(ctx, `SELECT count(*), (SELECT said FROM statement_sessions WHERE project = ?1 AND statement = ?2 ORDER BY rowid LIMIT 1)
		FROM statement_sessions WHERE project = ?1 AND statement = ?2`, string(p.ID), norm).Scan(&n, &first); err != nil {
		return err
	}
	confirmations := map[string]string{"confirmations": fmt.Sprint(n)}
	fact, found, err := s.factFor(ctx, tx, p.ID, norm)
	if err != nil {
		return err
	}
	switch {
	case found && added == 0:
		// This session confirmed it already; nothing changes.
		res.Promoted = append(res.Promoted, fact)
		return nil
	case found:
		conf := strengthen(fact.Confidence)
		fact.Metadata = withEntries(fact.Metadata, confirmations)
		rec, err := s.putWithin(ctx, tx, p, fact, &conf)
		if err != nil {
			return err
		}
		res.Promoted = append(res.Promoted, rec)
		return nil
	case n < needed:
		res.Pending = append(res.Pending, Pending{Statement: statement, Confirmations: n, Needed: needed})
		return nil
	}
	conf := promotedConfidence
	for i := needed; i < n; i++ {
		conf = strengthen(conf)
	}
	key := Slug(norm)
	rec, _, err := s.put(ctx, tx, p, Write{
		Scope: scope.Project, Type: Semantic, Key: key, Description: clip(first, 120), Body: first + "\n",
		Confidence: &conf, SessionID: session, Source: FromCapture, Metadata: confirmations,
	}, "")
	if errors.Is(err, ErrConflict) {
		res.Refused = append(res.Refused, Refusal{Item: "statement", Code: CodeConflict, Reason: err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	res.Promoted = append(res.Promoted, rec)
	return nil
}

// withEntries returns a copy of m with add's entries set.
func withEntries(m, add map[string]string) map[string]string {
	out := make(map[string]string, len(m)+len(add))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// factFor finds the project fact a normalised statement speaks of: one
// whose key is the statement's slug, or whose body says the same thing.
func (s *Store) factFor(ctx context.Context, tx *sql.Tx, p scope.Identity, norm string) (Record, bool, error) {
	r, err := getOne(ctx, tx, `WHERE r.project = ? AND r.scope = 0 AND r.type = 'semantic' AND r.key = ?`, string(p), Slug(norm))
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Record{}, false, err
	}
	// A hand-written fact: compare bodies, normalised the same way. Only
	// short bodies can be one statement.
	rows, err := queryRecords(ctx, tx, `SELECT `+cols+` FROM records r WHERE r.project = ? AND r.scope = 0 AND r.type = 'semantic' AND length(r.body) <= ?`, string(p), len(norm)+64)
	if err != nil {
		return Record{}, false, err
	}
	for _, r := range rows {
		if NormalizeStatement(r.Body) == norm || NormalizeStatement(r.Description) == norm {
			return r, true, nil
		}
	}
	return Record{}, false, nil
}

// putWithin rewrites rec with a new confidence through the one write path.
func (s *Store) putWithin(ctx context.Context, tx *sql.Tx, p Project, rec Record, conf *float64) (Record, error) {
	w := Write{Scope: rec.Scope, Type: rec.Type, Key: rec.Key, Description: rec.Description, Body: rec.Body,
		Tags: rec.Tags, Confidence: conf, SessionID: rec.SessionID, Source: rec.Source, Metadata: rec.Metadata,
		keepExpiry: true, expiresAt: rec.ExpiresAt}
	if err := validate(&w); err != nil {
		return Record{}, err
	}
	out, _, err := s.put(ctx, tx, p, w, "")
	return out, err
}

func (s *Store) learnProcedure(ctx context.Context, tx *sql.Tx, p Project, session string, q Sequence, res *CaptureResult) error {
	name := q.Name
	if strings.TrimSpace(name) == "" {
		// Unnamed: the steps themselves name it, so the same steps in
		// another session are the same procedure.
		name = strings.Join(q.Steps, " ; ")
	}
	key := Slug(name)
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO procedure_sessions (project, key, session_id) VALUES (?, ?, ?)`, string(p.ID), key, session); err != nil {
		return err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM procedure_sessions WHERE project = ? AND key = ?`, string(p.ID), key).Scan(&n); err != nil {
		return err
	}
	var body strings.Builder
	for i, st := range q.Steps {
		fmt.Fprintf(&body, "%d. %s\n", i+1, oneLine(st))
	}
	desc := q.Name
	if desc == "" {
		desc = "Steps starting with " + clip(q.Steps[0], 80)
	}
	w := Write{Scope: scope.Project, Type: Procedural, Key: key, Description: desc, Body: body.String(),
		SessionID: session, Source: FromCapture, UseCount: &n}
	if err := validate(&w); err != nil {
		res.Refused = append(res.Refused, Refusal{Item: "tool_sequence " + clip(key, 40), Code: CodeInvalidArgument, Reason: err.Error()})
		return nil
	}
	rec, _, err := s.put(ctx, tx, p, w, "")
	if errors.Is(err, ErrConflict) {
		res.Refused = append(res.Refused, Refusal{Item: "tool_sequence " + key, Code: CodeConflict, Reason: err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	res.Procedures = append(res.Procedures, rec)
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if strings.Contains(s, "\n") {
		return "`" + strings.ReplaceAll(s, "\n", " ⏎ ") + "`"
	}
	return s
}

func episodeDescription(plan, outcome string) string {
	d := plan
	if d == "" {
		d = outcome
	}
	if d == "" {
		return "Session"
	}
	return clip(strings.Join(strings.Fields(d), " "), 200)
}

func episodeBody(session, plan, outcome string, stmts []string, seqs []Sequence) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s\n", session)
	if plan != "" {
		fmt.Fprintf(&b, "\n## Plan\n\n%s\n", plan)
	}
	if outcome != "" {
		fmt.Fprintf(&b, "\n## Outcome\n\n%s\n", outcome)
	}
	if len(stmts) > 0 {
		b.WriteString("\n## Statements\n\n")
		for _, st := range stmts {
			fmt.Fprintf(&b, "- %s\n", st)
		}
	}
	if len(seqs) > 0 {
		b.WriteString("\n## Tool sequences\n")
		for _, q := range seqs {
			status := "succeeded"
			if !q.Succeeded {
				status = "failed"
			}
			name := q.Name
			if name == "" {
				name = "unnamed"
			}
			fmt.Fprintf(&b, "\n### %s (%s)\n\n", name, status)
			for i, st := range q.Steps {
				fmt.Fprintf(&b, "%d. %s\n", i+1, oneLine(st))
			}
		}
	}
	out := b.String()
	if len(out) > MaxBodyBytes {
		out = out[:MaxBodyBytes-32]
		for !utf8.ValidString(out) {
			out = out[:len(out)-1]
		}
		out += "\n\n(truncated)\n"
	}
	return out
}
