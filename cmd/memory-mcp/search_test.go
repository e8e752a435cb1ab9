package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSearchWhyAndLanguages drives two servers on one database: what one
// writes the other finds, whatever the case, accents or script of the
// query, and each hit says which words matched where.
func TestSearchWhyAndLanguages(t *testing.T) {
	e := newEnv(t)
	writer := connect(t, e, nil)
	reader := connect(t, e, nil)
	// The reader's index is loaded before the writes.
	ok(t, reader, "memory_write", map[string]any{"type": "semantic", "key": "seed", "body": "nothing to see"})
	ok(t, reader, "memory_search", map[string]any{"query": "nothing"})
	ok(t, writer, "memory_write", map[string]any{"type": "semantic", "key": "uber-config", "description": "Über-Konfiguration", "body": "Die Über-Konfiguration liegt in config/über.toml."})
	ok(t, writer, "memory_write", map[string]any{"type": "semantic", "key": "ecole", "body": "L'école partenaire reçoit les exports."})
	ok(t, writer, "memory_write", map[string]any{"type": "semantic", "key": "zh-search", "body": "搜索服务使用二元分词处理中文文本。"})
	ok(t, writer, "memory_write", map[string]any{"type": "procedural", "key": "push-safely", "body": "Never git push --force to main; use --force-with-lease."})
	for _, c := range []struct{ query, key string }{
		{"ÜBER", "uber-config"}, {"uber konfiguration", "uber-config"}, {"ecole", "ecole"}, {"ÉCOLE", "ecole"},
		{"中文文本", "zh-search"}, {"--force-with-lease", "push-safely"},
	} {
		out := ok(t, reader, "memory_search", map[string]any{"query": c.query})
		results := out["results"].([]any)
		if len(results) == 0 {
			t.Errorf("%q: no results", c.query)
			continue
		}
		top := results[0].(map[string]any)
		if top["key"] != c.key {
			t.Errorf("%q: top %v, want %s", c.query, top["key"], c.key)
		}
		why := top["why"].(map[string]any)
		if len(why["terms"].([]any)) == 0 || len(why["fields"].([]any)) == 0 {
			t.Errorf("%q: why = %v", c.query, why)
		}
	}
	out := ok(t, reader, "memory_search", map[string]any{"query": "uber konfiguration"})
	why := out["results"].([]any)[0].(map[string]any)["why"].(map[string]any)
	var terms, fields []string
	for _, v := range why["terms"].([]any) {
		terms = append(terms, v.(string))
	}
	for _, v := range why["fields"].([]any) {
		fields = append(fields, v.(string))
	}
	if !slices.Equal(terms, []string{"uber", "konfiguration"}) || !slices.Contains(fields, "description") || !slices.Contains(fields, "key") {
		t.Errorf("why = %q in %q", terms, fields)
	}
	ok(t, writer, "memory_delete", map[string]any{"key": "ecole"})
	if n := len(ok(t, reader, "memory_search", map[string]any{"query": "ecole"})["results"].([]any)); n != 0 {
		t.Errorf("deleted record still found by the other server (%d results)", n)
	}
}

// TestSearchText checks the readable text of a search beside its
// structured results: a line per hit with its key, type, scope, score and
// preview, in the same order.
func TestSearchText(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy-target", "body": "We deploy the api to the staging cluster first."})
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "scope": "system", "key": "deploy-steps", "body": "Run make release, then deploy."})
	res := call(t, cs, "memory_search", map[string]any{"query": "deploy staging cluster"})
	out := ok(t, cs, "memory_search", map[string]any{"query": "deploy staging cluster"})
	lines := strings.Split(strings.TrimSpace(text(res)), "\n")
	results := out["results"].([]any)
	if len(results) != 2 || len(lines) != 3 || lines[0] != `2 results for "deploy staging cluster" (keyword)` {
		t.Fatalf("text %q for %d results", lines, len(results))
	}
	for i, r := range results {
		h := r.(map[string]any)
		want := fmt.Sprintf("- %s [%s, %s] score %.2f: %s", h["key"], h["type"], h["scope"], h["score"], h["preview"])
		if lines[i+1] != want {
			t.Errorf("line %d: %q, want %q", i+1, lines[i+1], want)
		}
	}
}

// TestSearchDoesNotEchoSecretQuery: a query that holds a secret (pasted by
// mistake) is searched, but the answer, text and structured content alike,
// never carries it back; a plain query is echoed.
func TestSearchDoesNotEchoSecretQuery(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy-key", "body": "The deploy key lives in the vault."})
	secret := "ghp_" + strings.Repeat("aB3dE5fG7h", 4)[:36]
	for _, q := range []string{"deploy key " + secret, "ÜBER 中文 " + secret} {
		res := call(t, cs, "memory_search", map[string]any{"query": q})
		if res.IsError {
			t.Fatalf("%q: %s", q, text(res))
		}
		raw, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), secret) {
			t.Errorf("the answer to a query holding a secret carries it: %s", raw)
		}
	}
	if res := call(t, cs, "memory_search", map[string]any{"query": "vault"}); !strings.Contains(text(res), `"vault"`) {
		t.Errorf("a plain query is not echoed: %s", text(res))
	}
}
