package main

import (
	"slices"
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
