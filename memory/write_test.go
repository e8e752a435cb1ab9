package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"prom.codes/memory-mcp/scope"
)

// TestUnixNewlines checks that line ends become bare LFs in one pass, so a
// body saved, written to a file and read back is the body that was saved.
func TestUnixNewlines(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"a\nb":            "a\nb",
		"a\r\nb":          "a\nb",
		"a\r\r\nb":        "a\nb",
		"0\r\r\r\n0":      "0\n0",
		"a\rb":            "a\rb",
		"a\r":             "a\r",
		"\r\n\r\n":        "\n\n",
		"x\r\ry\r\n":      "x\r\ry\n",
		"é\r\n中\r\r\n🚀\r": "é\n中\n🚀\r",
	} {
		got := UnixNewlines(in)
		if got != want {
			t.Errorf("UnixNewlines(%q) = %q, want %q", in, got, want)
		}
		if again := UnixNewlines(got); again != got {
			t.Errorf("UnixNewlines is not stable on %q: %q then %q", in, got, again)
		}
		if c := CanonBody(in); CanonBody(c) != c {
			t.Errorf("CanonBody is not stable on %q: %q then %q", in, c, CanonBody(c))
		}
	}
}

// TestFactAndProcedureShareAKey checks the one lookup a project fact or
// procedure's write makes: the record it replaces is found and updated,
// and a record of the other type under the key (whose markdown file would
// be the same) is a conflict that changes nothing, whichever came first.
// Other scopes and types keep a key to themselves.
func TestFactAndProcedureShareAKey(t *testing.T) {
	s, _ := mustOpen(t)
	projectScope := scope.Project
	put := func(sc scope.Level, typ Type, key, body string) (Record, bool, error) {
		return s.Put(ctx, projA, Write{Scope: sc, Type: typ, Key: key, Body: body})
	}
	if _, created, err := put(scope.Project, Semantic, "deploy", "Deploys go through the release branch."); err != nil || !created {
		t.Fatalf("first write: created %v, %v", created, err)
	}
	if _, created, err := put(scope.Project, Procedural, "release", "Tag, push, wait for CI."); err != nil || !created {
		t.Fatalf("procedure: created %v, %v", created, err)
	}
	for _, c := range []struct {
		typ       Type
		key, was  string
		otherType Type
	}{
		{Procedural, "deploy", "Deploys go through the release branch.", Semantic},
		{Semantic, "release", "Tag, push, wait for CI.", Procedural},
	} {
		_, _, err := put(scope.Project, c.typ, c.key, "Something else entirely.")
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), string(c.otherType)) {
			t.Errorf("project %s %q over a %s: %v, want a conflict naming it", c.typ, c.key, c.otherType, err)
		}
		got, err := s.Peek(ctx, projA.ID, Selector{Key: c.key, Type: c.otherType, Scope: &projectScope})
		if err != nil || got.Body != c.was {
			t.Errorf("the %s %q moved: %+v, %v", c.otherType, c.key, got, err)
		}
		if _, err := s.Peek(ctx, projA.ID, Selector{Key: c.key, Type: c.typ, Scope: &projectScope}); !errors.Is(err, ErrNotFound) {
			t.Errorf("a project %s %q was stored beside the %s: %v", c.typ, c.key, c.otherType, err)
		}
	}
	rec, created, err := put(scope.Project, Semantic, "deploy", "Deploys go through the release branch, signed.")
	if err != nil || created || rec.Body != "Deploys go through the release branch, signed." {
		t.Errorf("rewrite of the fact: created %v, body %q, %v", created, rec.Body, err)
	}
	for _, c := range []struct {
		sc  scope.Level
		typ Type
	}{{scope.Workspace, Procedural}, {scope.Project, Episodic}, {scope.Project, Working}} {
		if _, created, err := put(c.sc, c.typ, "deploy", "Another record under the key."); err != nil || !created {
			t.Errorf("%s %s \"deploy\": created %v, %v", c.sc, c.typ, created, err)
		}
	}
}

// TestPutThatChangesNoRowFails: a write under an existing name whose
// update changes no row (here a trigger drops it, as a row gone from
// under the transaction would) fails and changes nothing, where a
// statement without RETURNING would otherwise report no error at all.
func TestPutThatChangesNoRowFails(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "kept", Body: "First body."})
	if _, err := s.db.ExecContext(ctx, `CREATE TRIGGER drop_updates BEFORE UPDATE ON records BEGIN SELECT RAISE(IGNORE); END`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "kept", Body: "Second body."}); err == nil {
		t.Error("a write whose update changed no row succeeded")
	}
	if _, err := s.db.ExecContext(ctx, `DROP TRIGGER drop_updates`); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "kept"); got.Body != "First body." {
		t.Errorf("body after the failed write: %q", got.Body)
	}
}

// TestRewriteUnderItsName: a fact rewritten under its own name, which
// updates its content and leaves the columns of its name alone, is found
// by its new words and not its old ones, keeps its id and creation time,
// and stays one record; a rewrite holding a secret is refused without
// quoting it, and the fact stays as it was.
func TestRewriteUnderItsName(t *testing.T) {
	s, c := mustOpen(t)
	first := put(t, s, projA, Write{Type: Semantic, Key: "deploy", Body: "Deploys run kubectl rollout."})
	c.Add(time.Minute)
	second, created, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "deploy", Body: "Deploys run helm upgrade — Größe 日本語.", Tags: []string{"ops"}})
	if err != nil || created {
		t.Fatalf("rewrite: created %v, %v", created, err)
	}
	if second.ID != first.ID || !second.CreatedAt.Equal(first.CreatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
		t.Errorf("rewritten: %+v after %+v", second, first)
	}
	found := func(word string) bool {
		hits, err := s.Search(ctx, projA.ID, SearchOptions{Query: word})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits) == 1 && hits[0].Record.ID == first.ID
	}
	if found("kubectl") || !found("helm") || !found("日本語") {
		t.Errorf("search after the rewrite: kubectl %v, helm %v, 日本語 %v; want false, true, true", found("kubectl"), found("helm"), found("日本語"))
	}
	token := "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
	_, _, err = s.Put(ctx, projA, Write{Type: Semantic, Key: "deploy", Body: "export GITHUB_TOKEN=" + token})
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("a rewrite holding a token: %v", err)
	}
	if got := get(t, s, "deploy"); got.Body != second.Body || got.ID != first.ID {
		t.Errorf("after the refused rewrite: %+v", got)
	}
	if !found("helm") {
		t.Error("the fact is no longer found after the refused rewrite")
	}
	if recs, err := s.Effective(ctx, projA.ID, []Type{Semantic}, 0); err != nil || len(recs) != 1 {
		t.Errorf("records: %d, %v; want 1", len(recs), err)
	}
}

// Metadata keys are one line of text and values hold no NUL: a key with
// escape codes and a newline (which would forge lines in a log or a
// terminal) and a NUL value, which a markdown file cannot carry, are
// refused, and the error holds no control character.
func TestMetadataControlCharactersRefused(t *testing.T) {
	s, _ := mustOpen(t)
	for _, m := range []map[string]string{
		{"\x1b[2J\x1b]0;pwned\a\nline 99 refused: fake": "v"},
		{"k\x00x": "v"},
		{"k": "a\x00b"},
	} {
		_, _, err := s.Put(context.Background(), projA, Write{Type: Working, Key: "meta", Body: "b", Metadata: m})
		var me *Error
		if !errors.As(err, &me) || me.Code != CodeInvalidArgument || strings.IndexFunc(err.Error(), unicode.IsControl) >= 0 {
			t.Errorf("metadata %q: %v", m, err)
		}
	}
}
