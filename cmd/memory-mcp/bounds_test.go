package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadTypesFilter weaves only the types asked for.
func TestReadTypesFilter(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "fact-one", "body": "A durable fact."})
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "key": "how-to", "body": "1. make release"})
	out := ok(t, cs, "memory_read", map[string]any{"types": []string{"procedural"}})
	block, _ := out["block"].(string)
	if !strings.Contains(block, "how-to") || strings.Contains(block, "fact-one") {
		t.Errorf("types [procedural] gave block:\n%s", block)
	}
	msg := fails(t, cs, "memory_read", map[string]any{"types": []string{"nonsense"}})
	if !strings.HasPrefix(msg, "invalid_argument") || !strings.Contains(msg, "types") {
		t.Errorf("bad type in types: %q", msg)
	}
}

// TestInputSchemasHaveNoTypeUnions walks every tool's input schema: some
// clients refuse a "type" that is an array or names "null", so optional
// fields are simply left out of "required".
func TestInputSchemasHaveNoTypeUnions(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		walkSchema(t, tool.Name, s)
	}
}

// walkSchema checks one schema and the schemas nested in it.
func walkSchema(t *testing.T, path string, v any) {
	t.Helper()
	s, isMap := v.(map[string]any)
	if !isMap {
		return
	}
	if typ, has := s["type"]; has {
		if name, isString := typ.(string); !isString || name == "null" {
			t.Errorf("%s: type %v", path, typ)
		}
	}
	if props, isMap := s["properties"].(map[string]any); isMap {
		for k, c := range props {
			walkSchema(t, path+"."+k, c)
		}
	}
	walkSchema(t, path+"[]", s["items"])
	walkSchema(t, path+"{}", s["additionalProperties"])
}

// TestTTLBounded refuses a ttl_seconds that is not positive or longer than
// a hundred years: a huge one used to overflow into a past expiry that
// deleted the record and its file.
func TestTTLBounded(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "keep-me", "body": "Still here."})
	const century = 100 * 365 * 24 * 60 * 60
	for _, sec := range []any{0, -5, century + 1, int64(1) << 62, uint64(1<<63 - 1)} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"memory_write", map[string]any{"type": "semantic", "key": "keep-me", "body": "Replaced.", "ttl_seconds": sec}},
			{"memory_update", map[string]any{"key": "keep-me", "ttl_seconds": sec}},
		} {
			msg := fails(t, cs, c.tool, c.args)
			if !strings.HasPrefix(msg, "invalid_argument") || !strings.Contains(msg, "ttl_seconds") {
				t.Errorf("%s ttl_seconds %v: %q", c.tool, sec, msg)
			}
		}
	}
	if got := bodyOf(t, cs, "keep-me"); got != "Still here." {
		t.Errorf("body after refused writes: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "keep-me.md")); err != nil {
		t.Errorf("mirrored file: %v", err)
	}
	out := ok(t, cs, "memory_update", map[string]any{"key": "keep-me", "ttl_seconds": century})
	exp, err := time.Parse(time.RFC3339, out["record"].(map[string]any)["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if exp.Year() < time.Now().Year()+99 {
		t.Errorf("a century's ttl expires at %v", exp)
	}
}
