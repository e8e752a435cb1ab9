package memory

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
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

// Sequence is a run of tool calls. Without a name, its steps name it.
type Sequence struct {
	Name      string   `json:"name,omitempty"`
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

// MaxCaptureItems is how many statements, and how many tool sequences, one
// capture takes; the rest are refused.
const MaxCaptureItems = 200

// Lengths of the one-line texts a capture derives.
const (
	factDescriptionBytes    = 120
	episodeDescriptionBytes = 200
	keyWordsBytes           = 48
)

// strengthen is the confidence after one more confirmation.
func strengthen(c float64) float64 {
	return math.Min(maxConfidence, math.Round((c+(1-c)*confirmStep)*1e4)/1e4)
}

// Capture records a finished session for project p: its episodic record
// (replacing an earlier capture of the same session), one confirmation per
// statement, which becomes or strengthens a project fact once needed
// distinct sessions have confirmed it, and a procedure for each successful
// tool sequence. Capturing a session again changes nothing it already
// taught: no confidence, use count or description moves, and a fact or
// procedure deleted since stays deleted.
//
// Every record it writes passes the checks of Put (key, lengths, secrets),
// and each item is checked whole before anything derived from it is
// clipped. An item that fails them is refused on its own, named by its
// place in c (statements[2], tool_sequences[0]), and the rest proceeds.
// It all happens in one transaction.
//
// Errors: CodeInvalidArgument for a missing or unusable session id,
// CodeSecretRejected for a session id shaped like a secret.
func (s *Store) Capture(ctx context.Context, p Project, c Capture, needed int) (CaptureResult, error) {
	if needed < 1 {
		needed = 2
	}
	sid := c.SessionID
	if strings.TrimSpace(sid) == "" {
		return CaptureResult{}, Errorf(CodeInvalidArgument, "session_id", "is empty")
	}
	if err := ScanKey("session_id", sid); err != nil {
		return CaptureResult{}, err
	}
	if err := checkText("session_id", sid); err != nil {
		return CaptureResult{}, err
	}
	if len(sid) > 200 {
		return CaptureResult{}, Errorf(CodeInvalidArgument, "session_id", "is longer than 200 bytes")
	}
	var res CaptureResult
	refuse := func(item string, err error) {
		res.Refused = append(res.Refused, refusal(item, err))
	}
	text := func(item, v string) string {
		v = strings.TrimSpace(v)
		if err := checkText(item, v); err != nil {
			refuse(item, err)
			return ""
		}
		return v
	}
	plan := text("plan", c.Plan)
	outcome := text("outcome", c.Outcome)

	var stmts []statement
	for i, st := range c.Statements {
		item := fmt.Sprintf("statements[%d]", i)
		if i >= MaxCaptureItems {
			refuse(fmt.Sprintf("statements[%d:]", i), Errorf(CodeTooLarge, "", "are past the limit: a capture takes at most %d statements", MaxCaptureItems))
			break
		}
		st = strings.Join(strings.Fields(st), " ")
		norm := NormalizeStatement(st)
		if norm == "" {
			continue
		}
		if err := checkText(item, st); err != nil {
			refuse(item, err)
			continue
		}
		// The statement as the fact it may become, checked now so that
		// nothing memory_write would refuse is even counted.
		w := factWrite(sid, st, norm)
		if err := validate(&w); err != nil {
			refuse(item, err)
			continue
		}
		stmts = append(stmts, statement{item: item, said: st, norm: norm, key: w.Key})
	}

	var seqs []Sequence
	var procs []procedure
	for i, q := range c.Sequences {
		item := fmt.Sprintf("tool_sequences[%d]", i)
		if i >= MaxCaptureItems {
			refuse(fmt.Sprintf("tool_sequences[%d:]", i), Errorf(CodeTooLarge, "", "are past the limit: a capture takes at most %d tool sequences", MaxCaptureItems))
			break
		}
		q.Name = strings.TrimSpace(q.Name)
		if err := checkText(item+".name", q.Name); err != nil {
			refuse(item, err)
			continue
		}
		var steps []string
		var bad error
		for j, st := range q.Steps {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			if err := checkText(fmt.Sprintf("%s.steps[%d]", item, j), st); err != nil {
				bad = err
				break
			}
			steps = append(steps, st)
		}
		if bad != nil {
			refuse(item, bad)
			continue
		}
		if len(steps) == 0 {
			continue
		}
		q.Steps = steps
		if q.Succeeded {
			w := procedureWrite(sid, q)
			if err := validate(&w); err != nil {
				refuse(item, sequenceError(item, err))
				continue
			}
			procs = append(procs, procedure{item: item, w: w, named: q.Name != ""})
		}
		seqs = append(seqs, q)
	}

	ep := Write{
		Scope: scope.Project, Type: Episodic, Key: episodeKey(sid), Description: episodeDescription(plan, outcome),
		Body: episodeBody(sid, plan, outcome, stmts, seqs), SessionID: sid, Source: FromCapture,
	}
	if err := validate(&ep); err != nil {
		return CaptureResult{}, err
	}
	refused := res.Refused
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res = CaptureResult{Refused: slices.Clone(refused)}
		if err := s.recordEpisode(ctx, tx, p, ep, &res); err != nil {
			return err
		}
		for _, st := range stmts {
			if err := s.confirm(ctx, tx, p, sid, st, needed, &res); err != nil {
				return err
			}
		}
		for _, pr := range procs {
			if err := s.learnProcedure(ctx, tx, p, sid, pr, &res); err != nil {
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

// statement is one checked statement of a capture.
type statement struct {
	item string // where it was in the capture
	said string // as the session put it
	norm string // NormalizeStatement(said)
	key  string // the key of the fact it becomes
}

// procedure is one checked successful sequence, as the record it becomes.
type procedure struct {
	item  string
	w     Write
	named bool
}

// checkText refuses what no field may hold: a secret (the whole text is
// scanned, before anything is clipped from it), invalid UTF-8, NUL bytes.
func checkText(field, v string) error {
	if err := ScanField(field, v); err != nil {
		return err
	}
	if !utf8.ValidString(v) {
		return Errorf(CodeInvalidArgument, field, "is not valid UTF-8")
	}
	if strings.ContainsRune(v, 0) {
		return Errorf(CodeInvalidArgument, field, "contains NUL bytes")
	}
	return nil
}

// refusal describes err as the refusal of item: the field a check named is
// replaced by the item, which is what the caller sent.
func refusal(item string, err error) Refusal {
	var me *Error
	if !errors.As(err, &me) {
		me = Errorf(CodeInternal, "", "%v", err)
	}
	e := *me
	if e.Field == "" || !strings.HasPrefix(e.Field, item) {
		e.Field = item
	}
	return Refusal{Item: item, Code: e.Code, Reason: e.Error()}
}

// sequenceError names the part of a sequence a check of its procedure
// refused: the name is its description, the steps its body.
func sequenceError(item string, err error) error {
	var me *Error
	if !errors.As(err, &me) {
		return err
	}
	e := *me
	switch e.Field {
	case "description":
		e.Field = item + ".name"
	case "body":
		e.Field = item + ".steps"
	default:
		e.Field = item
	}
	return &e
}

// NormalizeStatement makes trivial rewordings of a statement equal: case,
// spacing and the punctuation that ends a sentence do not count. Anything
// else does: "Never use C#" and "Never use C" stay apart.
func NormalizeStatement(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRightFunc(s, func(r rune) bool { return strings.ContainsRune(".,;:!?…。．！？、", r) || unicode.IsSpace(r) })
}

// derivedKey makes a key for a record named by free text: the text's ASCII
// words, for people, then a short hash of exact, which tells apart texts
// whose words are the same ("Prefer === over ==" and "Prefer == over ===").
// Text without ASCII words gives prefix and the hash. The result always
// matches KeyRule: it holds only [a-z0-9-], never "..", and never names a
// Windows device.
func derivedKey(prefix, text, exact string) string {
	var words []string
	n := 0
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)))
	}) {
		if n+len(w) > keyWordsBytes {
			if n == 0 {
				words = append(words, w[:keyWordsBytes])
			}
			break
		}
		words = append(words, w)
		n += len(w) + 1
	}
	if len(words) == 0 {
		words = []string{prefix}
	}
	sum := sha256.Sum256([]byte(exact))
	return strings.Join(words, "-") + "-" + hex.EncodeToString(sum[:4])
}

// factKey is the key of the fact a normalised statement becomes.
func factKey(norm string) string { return derivedKey("fact", norm, norm) }

// episodeKey is the session id when that is a key as it stands, else a key
// derived from it.
func episodeKey(sid string) string {
	if k, err := NormalizeKey("session_id", sid); err == nil && k == sid {
		return k
	}
	return derivedKey("session", sid, sid)
}

// procedureKey is a named sequence's name when that is a valid key, else a
// key derived from the name or, unnamed, from the steps themselves, so that
// the same steps in another session are the same procedure.
func procedureKey(q Sequence) string {
	if q.Name != "" {
		if k, err := NormalizeKey("name", q.Name); err == nil {
			return k
		}
		return derivedKey("procedure", q.Name, q.Name)
	}
	return derivedKey("steps", strings.Join(q.Steps, " "), strings.Join(q.Steps, "\n"))
}

func factWrite(sid, said, norm string) Write {
	return Write{Scope: scope.Project, Type: Semantic, Key: factKey(norm), Description: clipBytes(said, factDescriptionBytes),
		Body: said, SessionID: sid, Source: FromCapture}
}

func procedureWrite(sid string, q Sequence) Write {
	var body strings.Builder
	for i, st := range q.Steps {
		fmt.Fprintf(&body, "%d. %s\n", i+1, oneLine(st))
	}
	desc := q.Name
	if desc == "" {
		desc = "Steps starting with " + clipBytes(oneLine(q.Steps[0]), 80)
	}
	return Write{Scope: scope.Project, Type: Procedural, Key: procedureKey(q), Description: desc, Body: body.String(),
		SessionID: sid, Source: FromCapture}
}

// clipBytes cuts s to at most n bytes, on a rune boundary, marking a cut
// with an ellipsis (counted in n).
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	k := max(n-len(more), 0)
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + more
}

// recordEpisode writes the session's episodic record. A session captured
// again with nothing new leaves it exactly as it was, expiry included.
func (s *Store) recordEpisode(ctx context.Context, tx *sql.Tx, p Project, w Write, res *CaptureResult) error {
	old, err := getOne(ctx, tx, `WHERE r.project = $1 AND r.scope = 0 AND r.type = 'episodic' AND r.key = $2`, string(p.ID), w.Key)
	switch {
	case err == nil && old.Body == w.Body && old.Description == w.Description && (old.ExpiresAt == nil || old.ExpiresAt.After(s.now())):
		res.Episode, res.Replaced = old, true
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	rec, created, err := s.put(ctx, tx, p, w, "")
	if err != nil {
		return err
	}
	res.Episode, res.Replaced = rec, !created
	return nil
}

// confirm counts one session's confirmation of a statement. A session that
// confirmed it before changes nothing; a new one strengthens the fact that
// says the same thing, or makes it once needed sessions agree.
func (s *Store) confirm(ctx context.Context, tx *sql.Tx, p Project, session string, st statement, needed int, res *CaptureResult) error {
	r, err := tx.ExecContext(ctx, `INSERT INTO statement_sessions (project, statement, session_id, said) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, string(p.ID), st.norm, session, st.said)
	if err != nil {
		return err
	}
	added, err := r.RowsAffected()
	if err != nil {
		return err
	}
	// The first session's wording is the one a fact keeps.
	var n int
	var first string
	if err := tx.QueryRowContext(ctx, `SELECT count(*), (SELECT said FROM statement_sessions WHERE project = $1 AND statement = $2 ORDER BY rowid LIMIT 1)
		FROM statement_sessions WHERE project = $1 AND statement = $2`, string(p.ID), st.norm).Scan(&n, &first); err != nil {
		return err
	}
	fact, found, err := s.factFor(ctx, tx, p.ID, st.key, st.norm)
	if err != nil {
		return err
	}
	switch {
	case added == 0:
		// This session confirmed it already. Nothing moves, and a fact
		// deleted since stays deleted.
		if found {
			res.Promoted = append(res.Promoted, fact)
		} else if n < needed {
			res.Pending = append(res.Pending, Pending{Statement: st.said, Confirmations: n, Needed: needed})
		}
		return nil
	case found:
		conf := strengthen(fact.Confidence)
		fact.Metadata = withEntries(fact.Metadata, map[string]string{"confirmations": fmt.Sprint(n)})
		rec, err := s.putWithin(ctx, tx, p, fact, &conf)
		if err != nil {
			var me *Error
			if errors.As(err, &me) && me.Code != CodeInternal {
				res.Refused = append(res.Refused, refusal(st.item, err))
				return nil
			}
			return err
		}
		res.Promoted = append(res.Promoted, rec)
		return nil
	case n < needed:
		res.Pending = append(res.Pending, Pending{Statement: st.said, Confirmations: n, Needed: needed})
		return nil
	}
	if _, err := getOne(ctx, tx, `WHERE r.project = $1 AND r.scope = 0 AND r.type = 'semantic' AND r.key = $2`, string(p.ID), st.key); err == nil {
		res.Refused = append(res.Refused, Refusal{Item: st.item, Code: CodeConflict,
			Reason: string(CodeConflict) + ": " + st.item + " would become a fact whose key a fact saying something else holds; that fact was left as it is"})
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	conf := promotedConfidence
	for i := needed; i < n; i++ {
		conf = strengthen(conf)
	}
	w := factWrite(session, first, st.norm)
	w.Key, w.Confidence, w.Metadata = st.key, &conf, map[string]string{"confirmations": fmt.Sprint(n)}
	rec, err := s.write(ctx, tx, p, w)
	if err != nil {
		var me *Error
		if errors.As(err, &me) && me.Code != CodeInternal {
			res.Refused = append(res.Refused, refusal(st.item, err))
			return nil
		}
		return err
	}
	res.Promoted = append(res.Promoted, rec)
	return nil
}

// write is Put within a transaction: validate, then the one write path.
func (s *Store) write(ctx context.Context, tx *sql.Tx, p Project, w Write) (Record, error) {
	if err := validate(&w); err != nil {
		return Record{}, err
	}
	rec, _, err := s.put(ctx, tx, p, w, "")
	return rec, err
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

// factFor finds the project fact that says what a normalised statement
// says: the one at its key, or a hand-written one, compared by what they
// say, never by key alone.
func (s *Store) factFor(ctx context.Context, tx *sql.Tx, p scope.Identity, key, norm string) (Record, bool, error) {
	says := func(r Record) bool {
		return NormalizeStatement(r.Body) == norm || NormalizeStatement(r.Description) == norm
	}
	r, err := getOne(ctx, tx, `WHERE r.project = $1 AND r.scope = 0 AND r.type = 'semantic' AND r.key = $2`, string(p), key)
	if err == nil && says(r) {
		return r, true, nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Record{}, false, err
	}
	// Only short bodies can be one statement.
	rows, err := queryRecords(ctx, tx, `SELECT `+cols+` FROM records r WHERE r.project = $1 AND r.scope = 0 AND r.type = 'semantic' AND length(r.body) <= $2`, string(p), len(norm)+64)
	if err != nil {
		return Record{}, false, err
	}
	for _, r := range rows {
		if says(r) {
			return r, true, nil
		}
	}
	return Record{}, false, nil
}

// putWithin rewrites rec with a new confidence through the one write path.
func (s *Store) putWithin(ctx context.Context, tx *sql.Tx, p Project, rec Record, conf *float64) (Record, error) {
	return s.write(ctx, tx, p, Write{Scope: rec.Scope, Type: rec.Type, Key: rec.Key, Description: rec.Description, Body: rec.Body,
		Tags: rec.Tags, Confidence: conf, SessionID: rec.SessionID, Source: rec.Source, Metadata: rec.Metadata,
		keepExpiry: true, expiresAt: rec.ExpiresAt})
}

// learnProcedure records one successful sequence. A session that taught it
// before changes nothing; a new session counts one more use of it, keeping
// what people have since made of the record (description, tags, expiry).
func (s *Store) learnProcedure(ctx context.Context, tx *sql.Tx, p Project, session string, pr procedure, res *CaptureResult) error {
	w := pr.w
	r, err := tx.ExecContext(ctx, `INSERT INTO procedure_sessions (project, key, session_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, string(p.ID), w.Key, session)
	if err != nil {
		return err
	}
	added, err := r.RowsAffected()
	if err != nil {
		return err
	}
	old, err := getOne(ctx, tx, `WHERE r.project = $1 AND r.scope = 0 AND r.type = 'procedural' AND r.key = $2`, string(p.ID), w.Key)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if added == 0 {
		if exists {
			res.Procedures = append(res.Procedures, old)
		}
		return nil
	}
	n := int64(1)
	if exists {
		n = old.UseCount + 1
		w.Description, w.Tags, w.Metadata, w.Confidence = old.Description, old.Tags, old.Metadata, &old.Confidence
		w.keepExpiry, w.expiresAt = true, old.ExpiresAt
		if !pr.named {
			// The key is the steps: the body people may have annotated
			// still describes them.
			w.Body = old.Body
		}
	}
	w.UseCount = &n
	rec, err := s.write(ctx, tx, p, w)
	if err != nil {
		var me *Error
		if errors.As(err, &me) && me.Code != CodeInternal {
			if me.Code == CodeConflict && me.Field == "key" {
				err = Errorf(CodeConflict, "", "its procedure's key is held by a project fact, whose markdown file it would replace")
			}
			res.Refused = append(res.Refused, refusal(pr.item, err))
			return nil
		}
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
	return clipBytes(strings.Join(strings.Fields(d), " "), episodeDescriptionBytes)
}

// episodeBody is the session's record in markdown. Past the size of a body
// it is cut at a line, so no item is kept in part.
func episodeBody(session, plan, outcome string, stmts []statement, seqs []Sequence) string {
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
			fmt.Fprintf(&b, "- %s\n", st.said)
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
			fmt.Fprintf(&b, "\n### %s (%s)\n\n", oneLine(name), status)
			for i, st := range q.Steps {
				fmt.Fprintf(&b, "%d. %s\n", i+1, oneLine(st))
			}
		}
	}
	out := CanonBody(b.String())
	const cut = "\n\n(truncated)"
	if len(out) > MaxBodyBytes {
		out = out[:MaxBodyBytes-len(cut)]
		if i := strings.LastIndexByte(out, '\n'); i > 0 {
			out = out[:i]
		}
		for !utf8.ValidString(out) {
			out = out[:len(out)-1]
		}
		out = CanonBody(out) + cut
	}
	return out
}

// Slug makes a valid key from free text, such as a name in an imported
// graph: the text itself when it normalises to a key, else its ASCII words
// and a short hash of it, so that two texts never share a key by accident.
func Slug(s string) string {
	if k, err := NormalizeKey("name", s); err == nil {
		return k
	}
	return derivedKey("item", s, s)
}
