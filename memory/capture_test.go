package memory

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"prom.codes/memory-mcp/scope"
)

func capture(t *testing.T, s *Store, c Capture) CaptureResult {
	t.Helper()
	res, err := s.Capture(ctx, projA, c, 2)
	if err != nil {
		t.Fatalf("capture %s: %v", c.SessionID, err)
	}
	return res
}

func facts(t *testing.T, s *Store) []Record {
	t.Helper()
	rs, _, err := s.List(ctx, projA.ID, ListOptions{Type: Semantic, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, r := range rs {
		full, err := s.Peek(ctx, projA.ID, Selector{ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full)
	}
	return out
}

func factSaying(t *testing.T, s *Store, body string) (Record, bool) {
	t.Helper()
	for _, r := range facts(t, s) {
		if r.Body == body {
			return r, true
		}
	}
	return Record{}, false
}

func TestCaptureContradictionsNeverStrengthen(t *testing.T) {
	for i, pair := range [][2]string{
		{"Prefer === over ==", "Prefer == over ==="},
		{"Never use C#.", "Never use C."},
		{"Always answer in 日本語.", "Always answer in 中文."},
		{"Always write ü as ue.", "Always write é as e."},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			s, _ := mustOpen(t)
			capture(t, s, Capture{SessionID: "s1", Statements: []string{pair[0]}})
			capture(t, s, Capture{SessionID: "s2", Statements: []string{pair[0]}})
			first, ok := factSaying(t, s, pair[0])
			if !ok {
				t.Fatalf("%q was not promoted after two sessions: %+v", pair[0], facts(t, s))
			}
			res := capture(t, s, Capture{SessionID: "s3", Statements: []string{pair[1]}})
			if len(res.Promoted) != 0 || len(res.Pending) != 1 || res.Pending[0].Confirmations != 1 {
				t.Errorf("the contradicting statement = promoted %+v, pending %+v; want it pending with one confirmation", res.Promoted, res.Pending)
			}
			after, _ := factSaying(t, s, pair[0])
			if after.Confidence != first.Confidence || !after.UpdatedAt.Equal(first.UpdatedAt) {
				t.Errorf("%q moved from confidence %v to %v after %q", pair[0], first.Confidence, after.Confidence, pair[1])
			}
			capture(t, s, Capture{SessionID: "s4", Statements: []string{pair[1]}})
			second, ok := factSaying(t, s, pair[1])
			if !ok || second.ID == first.ID || second.Key == first.Key {
				t.Errorf("the second statement did not become a fact of its own: %+v", facts(t, s))
			}
			if after, _ := factSaying(t, s, pair[0]); after.Confidence != first.Confidence {
				t.Errorf("%q moved to confidence %v", pair[0], after.Confidence)
			}
		})
	}
}

var validKey = regexp.MustCompile(`^` + KeyRule + `$`)

func TestCaptureKeysAreAlwaysValid(t *testing.T) {
	s, _ := mustOpen(t)
	seqs := []Sequence{
		{Steps: []string{"go test ./...", "go vet ./..."}, Succeeded: true},
		{Steps: []string{"cd ..", "ls ../.."}, Succeeded: true},
		{Steps: []string{"&&", "||"}, Succeeded: true},
		{Name: "aux.go", Steps: []string{"go generate", "go build"}, Succeeded: true},
		{Name: "..", Steps: []string{"make a", "make b"}, Succeeded: true},
		{Name: "テストを実行", Steps: []string{"npm test", "npm run lint"}, Succeeded: true},
		{Name: "run tests", Steps: []string{"make test"}, Succeeded: true},
		{Name: strings.Repeat("very long name ", 20), Steps: []string{"make c"}, Succeeded: true},
	}
	stmts := []string{"Remember: aux.c is generated.", "Never edit ../vendor by hand.", "常に日本語で答えてください。", "🚀 Always ship on Fridays."}
	for _, session := range []string{"s1", "s2"} {
		res := capture(t, s, Capture{SessionID: session, Statements: stmts, Sequences: seqs})
		if len(res.Refused) != 0 {
			t.Fatalf("refused %+v", res.Refused)
		}
		if len(res.Procedures) != len(seqs) {
			t.Errorf("%s: %d procedures, want %d", session, len(res.Procedures), len(seqs))
		}
	}
	res := capture(t, s, Capture{SessionID: "s3", Statements: stmts})
	if len(res.Promoted) != len(stmts) {
		t.Errorf("promoted %d facts, want %d", len(res.Promoted), len(stmts))
	}
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Limit: 500})
	for _, r := range rs {
		if !validKey.MatchString(r.Key) || strings.Contains(r.Key, "..") || windowsDevice.MatchString(r.Key) {
			t.Errorf("key %q is not a valid key", r.Key)
		}
	}
	if r, err := s.Peek(ctx, projA.ID, Selector{Key: "run-tests", Type: Procedural}); err != nil || r.UseCount != 2 {
		t.Errorf("a named sequence keeps its name as its key: %+v %v", r, err)
	}
}

func TestCaptureAgainChangesNothing(t *testing.T) {
	s, clk := mustOpen(t)
	c := func(session string) Capture {
		return Capture{SessionID: session, Plan: "Fix the flaky test", Outcome: "Fixed",
			Statements: []string{"Always run make lint.", "Never push to main."},
			Sequences:  []Sequence{{Steps: []string{"make lint", "make test"}, Succeeded: true}, {Name: "release", Steps: []string{"make dist", "make publish"}, Succeeded: true}}}
	}
	capture(t, s, c("s1"))
	capture(t, s, c("s2"))
	// Use and edit what was learned, as a person and an agent would.
	lint, _ := factSaying(t, s, "Always run make lint.")
	push, _ := factSaying(t, s, "Never push to main.")
	conf := 0.9
	if _, err := s.Update(ctx, projA, Selector{ID: lint.ID}, Patch{Confidence: &conf}); err != nil {
		t.Fatal(err)
	}
	desc := "Cut a release"
	rel, err := s.Update(ctx, projA, Selector{Key: "release", Type: Procedural}, Patch{Description: &desc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, projA.ID, Selector{ID: rel.ID}); err != nil { // counts a use
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, projA, Selector{ID: push.ID}); err != nil {
		t.Fatal(err)
	}
	clk.Add(48 * 3600e9)
	snapshot := func() map[string]Record {
		rs, _, err := s.List(ctx, projA.ID, ListOptions{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Record{}
		for _, r := range rs {
			full, _ := s.Peek(ctx, projA.ID, Selector{ID: r.ID})
			out[string(r.Type)+"/"+r.Key] = full
		}
		return out
	}
	before := snapshot()
	for _, session := range []string{"s2", "s1", "s2"} {
		res := capture(t, s, c(session))
		if !res.Replaced {
			t.Errorf("re-capture of %s not reported as such", session)
		}
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Errorf("records %d → %d: a deleted fact came back or a new one appeared", len(before), len(after))
	}
	for k, b := range before {
		a, ok := after[k]
		if !ok {
			t.Errorf("%s disappeared", k)
			continue
		}
		if a.Confidence != b.Confidence || a.UseCount != b.UseCount || a.Description != b.Description || a.Body != b.Body ||
			!a.UpdatedAt.Equal(b.UpdatedAt) || !timesEqual(a.ExpiresAt, b.ExpiresAt) {
			t.Errorf("%s moved:\nbefore %+v\nafter  %+v", k, b, a)
		}
	}
}

func timesEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func TestCaptureValidatesLikeWrite(t *testing.T) {
	s, _ := mustOpen(t)
	huge := "Always " + strings.Repeat("lint ", MaxBodyBytes/5) + "."
	nul := "Always use \x00 separators."
	longName := strings.Repeat("n", MaxDescriptionLen+1)
	c := func(session string) Capture {
		return Capture{SessionID: session, Statements: []string{huge, nul, "Prefer small PRs."},
			Sequences: []Sequence{{Name: longName, Steps: []string{"make a", "make b"}, Succeeded: true}, {Steps: []string{"make c", "make d"}, Succeeded: true}}}
	}
	for _, session := range []string{"s1", "s2"} {
		res := capture(t, s, c(session))
		want := map[string]Code{"statements[0]": CodeTooLarge, "statements[1]": CodeInvalidArgument, "tool_sequences[0]": CodeTooLarge}
		got := map[string]Code{}
		for _, r := range res.Refused {
			got[r.Item] = r.Code
			if !strings.HasPrefix(r.Reason, string(r.Code)+": "+r.Item) {
				t.Errorf("reason %q does not name %s", r.Reason, r.Item)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s refused %+v, want %v", session, res.Refused, want)
		}
		for item, code := range want {
			if got[item] != code {
				t.Errorf("%s: %s refused with %q, want %q (%+v)", session, item, got[item], code, res.Refused)
			}
		}
	}
	for _, f := range facts(t, s) {
		if f.Body != "Prefer small PRs." {
			t.Errorf("stored a fact memory_write would refuse: %d bytes", len(f.Body))
		}
	}
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Type: Procedural})
	if len(rs) != 1 {
		t.Errorf("procedures = %+v, want only the valid one", rs)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM statement_sessions WHERE length(said) > ? OR instr(said, char(0)) > 0`, MaxBodyBytes).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused statements were kept as confirmations: %d %v", n, err)
	}

	_, err := s.Capture(ctx, projA, Capture{SessionID: strings.Repeat("s", 201), Plan: "p"}, 2)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "session_id") {
		t.Errorf("a 201-byte session id: %v", err)
	}
}

func TestCaptureClipsOnRuneBoundaries(t *testing.T) {
	s, _ := mustOpen(t)
	cjk := "常に" + strings.Repeat("日本語", 200) + "で答えてください"
	stmt := "Always answer in " + strings.Repeat("日本語", 100) + "."
	plan := strings.Repeat("計画", 50000) // larger than a body
	for _, session := range []string{"s1", "s2"} {
		res := capture(t, s, Capture{SessionID: session, Plan: plan, Outcome: cjk, Statements: []string{stmt},
			Sequences: []Sequence{{Steps: []string{"echo " + cjk, "echo 🚀🚀"}, Succeeded: true}}})
		if len(res.Refused) != 0 {
			t.Fatalf("refused %+v", res.Refused)
		}
	}
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Limit: 500})
	if len(rs) != 4 {
		t.Errorf("records = %d, want 2 episodes, a fact and a procedure", len(rs))
	}
	for _, r := range rs {
		full, _ := s.Peek(ctx, projA.ID, Selector{ID: r.ID})
		if !utf8.ValidString(full.Description) || !utf8.ValidString(full.Body) {
			t.Errorf("%s %s holds invalid UTF-8", r.Type, r.Key)
		}
		if len(full.Description) > MaxDescriptionLen || len(full.Body) > MaxBodyBytes {
			t.Errorf("%s %s is larger than a write may be: description %d, body %d", r.Type, r.Key, len(full.Description), len(full.Body))
		}
	}
}

func TestCaptureRefusesDerivedSecrets(t *testing.T) {
	s, _ := mustOpen(t)
	// A statement clean as a whole must still pass the scan as the fact it
	// becomes; and an item with a secret is refused on its own.
	tok := "gh" + "p_" + "Q7x9Lm2Kd8Rt4Vb6Np1Zc3Hw5Jy0Fs7Ga9Ue"
	res := capture(t, s, Capture{SessionID: "s1", Plan: "x " + tok, Statements: []string{"Remember " + tok, "Prefer tabs."},
		Sequences: []Sequence{{Name: tok, Steps: []string{"a", "b"}, Succeeded: true}}})
	if len(res.Refused) != 3 {
		t.Fatalf("refused %+v", res.Refused)
	}
	for _, r := range res.Refused {
		if r.Code != CodeSecretRejected || strings.Contains(r.Reason, tok[4:12]) {
			t.Errorf("refusal %+v", r)
		}
	}
	if strings.Contains(res.Episode.Body, tok[4:12]) {
		t.Error("the episode holds the secret")
	}
}

func TestCaptureBoundsItems(t *testing.T) {
	s, _ := mustOpen(t)
	var stmts []string
	var seqs []Sequence
	for i := range MaxCaptureItems + 5 {
		stmts = append(stmts, fmt.Sprintf("Always check item %d.", i))
		seqs = append(seqs, Sequence{Steps: []string{fmt.Sprint("make ", i), "make test"}, Succeeded: true})
	}
	res := capture(t, s, Capture{SessionID: "s1", Statements: stmts, Sequences: seqs})
	if len(res.Pending) != MaxCaptureItems || len(res.Procedures) != MaxCaptureItems {
		t.Errorf("pending %d, procedures %d; want %d each", len(res.Pending), len(res.Procedures), MaxCaptureItems)
	}
	want := []Refusal{
		{Item: "statements[200:]", Code: CodeTooLarge, Reason: "too_large: statements[200:] are past the limit: a capture takes at most 200 statements"},
		{Item: "tool_sequences[200:]", Code: CodeTooLarge, Reason: "too_large: tool_sequences[200:] are past the limit: a capture takes at most 200 tool sequences"},
	}
	if !slices.Equal(res.Refused, want) {
		t.Errorf("refused %+v", res.Refused)
	}
}

// BenchmarkCapture captures a session of 20 statements and 10 sequences
// into a project that already holds 500 facts.
func BenchmarkCapture(b *testing.B) {
	s, _ := mustOpen(b)
	for i := range 500 {
		put(b, s, projA, Write{Type: Semantic, Key: fmt.Sprint("fact-", i), Body: fmt.Sprintf("Always keep rule %d.", i)})
	}
	c := Capture{Plan: "Fix the build", Outcome: "Fixed"}
	for i := range 20 {
		c.Statements = append(c.Statements, fmt.Sprintf("Always check rule %d.", i%30))
	}
	for i := range 10 {
		c.Sequences = append(c.Sequences, Sequence{Steps: []string{fmt.Sprint("make ", i), "go test ./..."}, Succeeded: true})
	}
	b.ResetTimer()
	for i := range b.N {
		c.SessionID = fmt.Sprint("s", i)
		if _, err := s.Capture(ctx, projA, c, 2); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCapture: whatever a session says, a capture never fails for it,
// stores only what a write would accept, under keys that are valid, and
// taking the same session again changes nothing.
func FuzzCapture(f *testing.F) {
	f.Add("Prefer === over ==", "", "go test ./...")
	f.Add("Always answer in 日本語。", "テスト", "echo 🚀")
	f.Add("Never use C#", "aux.go", "cd ../..")
	f.Add("..", "con", "\x00")
	s, _ := mustOpen(f)
	n := 0
	f.Fuzz(func(t *testing.T, stmt, name, step string) {
		n++
		p := Project{ID: scope.IdentityOf(fmt.Sprint("/fuzz/", n))}
		c := Capture{Plan: stmt, Statements: []string{stmt, stmt + " " + step}, Sequences: []Sequence{
			{Name: name, Steps: []string{step, "make test"}, Succeeded: true},
			{Steps: []string{name, step}, Succeeded: true},
		}}
		for _, sid := range []string{"a", "b"} {
			c.SessionID = sid
			if _, err := s.Capture(ctx, p, c, 2); err != nil {
				t.Fatalf("capture: %v", err)
			}
		}
		snapshot := func() []Record {
			rs, _, err := s.List(ctx, p.ID, ListOptions{Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			var out []Record
			for _, r := range rs {
				full, err := s.Peek(ctx, p.ID, Selector{ID: r.ID})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, full)
			}
			return out
		}
		before := snapshot()
		for _, r := range before {
			if !validKey.MatchString(r.Key) || strings.Contains(r.Key, "..") || windowsDevice.MatchString(r.Key) {
				t.Errorf("key %q", r.Key)
			}
			w := Write{Scope: r.Scope, Type: r.Type, Key: r.Key, Description: r.Description, Body: r.Body, Tags: r.Tags, SessionID: r.SessionID, Metadata: r.Metadata}
			if err := validate(&w); err != nil {
				t.Errorf("stored %s %s that a write refuses: %v", r.Type, r.Key, err)
			}
		}
		if _, err := s.Capture(ctx, p, c, 2); err != nil {
			t.Fatal(err)
		}
		after := snapshot()
		if len(after) != len(before) {
			t.Fatalf("records %d → %d on a repeated capture", len(before), len(after))
		}
		for i := range before {
			a, b := after[i], before[i]
			if a.Body != b.Body || a.Description != b.Description || a.Confidence != b.Confidence || a.UseCount != b.UseCount || !a.UpdatedAt.Equal(b.UpdatedAt) {
				t.Errorf("%s %s moved on a repeated capture", a.Type, a.Key)
			}
		}
	})
}

func TestCaptureLeavesAnEditedFactAlone(t *testing.T) {
	s, _ := mustOpen(t)
	capture(t, s, Capture{SessionID: "s1", Statements: []string{"Always run make lint."}})
	capture(t, s, Capture{SessionID: "s2", Statements: []string{"Always run make lint."}})
	fact, ok := factSaying(t, s, "Always run make lint.")
	if !ok {
		t.Fatal("not promoted")
	}
	edited := "Run make lint only before a release."
	desc := "Lint before releases"
	if _, err := s.Update(ctx, projA, Selector{ID: fact.ID}, Patch{Body: &edited, Description: &desc}); err != nil {
		t.Fatal(err)
	}
	res := capture(t, s, Capture{SessionID: "s3", Statements: []string{"Always run make lint."}})
	if len(res.Promoted) != 0 || len(res.Refused) != 1 || res.Refused[0].Code != CodeConflict || res.Refused[0].Item != "statements[0]" {
		t.Errorf("capture = promoted %+v, refused %+v; want a conflict", res.Promoted, res.Refused)
	}
	after, err := s.Peek(ctx, projA.ID, Selector{ID: fact.ID})
	if err != nil || after.Body != edited || after.Confidence != fact.Confidence {
		t.Errorf("the edited fact moved: %+v %v", after, err)
	}
}
