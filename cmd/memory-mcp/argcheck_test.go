package main

import (
	"encoding/json"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// schemaCatch keeps the input schema of each tool added to it.
type schemaCatch map[string]*jsonschema.Schema

func (c schemaCatch) AddTool(t *mcp.Tool, _ mcp.ToolHandler) {
	c[t.Name] = t.InputSchema.(*jsonschema.Schema)
}

// toolSchemas returns the input schema of every tool the server offers.
func toolSchemas(t testing.TB) schemaCatch {
	t.Helper()
	c := schemaCatch{}
	(&server{}).addTools(c)
	if len(c) < 7 {
		t.Fatalf("caught %d tools", len(c))
	}
	return c
}

// validatorSays is what checkArguments's general way says of args.
func validatorSays(t testing.TB, s *jsonschema.Schema, args map[string]any) bool {
	t.Helper()
	rs, _ := resolveArgs(t, s)
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var cp map[string]any
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	return rs.ApplyDefaults(&cp) == nil && rs.Validate(&cp) == nil
}

// TestArgCheckAgreesWithTheValidator: for every tool's schema, arguments
// made at random from it, each part now and then of the wrong kind, out
// of range, missing or unknown, fit the compiled check exactly when the
// validator accepts them.
func TestArgCheckAgreesWithTheValidator(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for name, s := range toolSchemas(t) {
		fast := compileArgCheck(s)
		if fast == nil {
			t.Fatalf("%s: its schema does not compile: its arguments would all take the slow way", name)
		}
		var fit, unfit int
		for range 3000 {
			args, _ := randomValue(r, s, 0).(map[string]any)
			if args == nil {
				continue
			}
			for k, v := range args {
				if v == nil {
					delete(args, k) // as checkArguments does
				}
			}
			want := validatorSays(t, s, args)
			if got := fast.fits(args); got != want {
				b, _ := json.Marshal(args)
				t.Fatalf("%s: %s: the check says %v, the validator %v", name, b, got, want)
			}
			if want {
				fit++
			} else {
				unfit++
			}
		}
		if fit < 300 || unfit < 300 {
			t.Errorf("%s: %d fitting and %d unfitting arguments: too few of one to tell", name, fit, unfit)
		}
	}
}

// randomValue makes a value for s: mostly one that fits, sometimes of
// another kind or out of its range, with properties left out or added.
func randomValue(r *rand.Rand, s *jsonschema.Schema, depth int) any {
	if depth > 4 || r.Intn(40) == 0 {
		return anyValue(r, depth)
	}
	switch s.Type {
	case "object":
		m := map[string]any{}
		for name, p := range s.Properties {
			if r.Intn(3) > 0 || slices.Contains(s.Required, name) && r.Intn(20) > 0 {
				m[name] = randomValue(r, p, depth+1)
			}
		}
		switch r.Intn(40) {
		case 0:
			m["unknown"] = "x"
		case 1:
			m["Key"] = "k" // a name differing by case only
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Type != "" {
			for range r.Intn(3) {
				m[randomString(r)] = randomValue(r, s.AdditionalProperties, depth+1)
			}
		}
		return m
	case "array":
		a := []any{}
		for range r.Intn(4) {
			a = append(a, randomValue(r, s.Items, depth+1))
		}
		return a
	case "string":
		if len(s.Enum) > 0 && r.Intn(4) > 0 {
			return s.Enum[r.Intn(len(s.Enum))]
		}
		return randomString(r)
	case "integer", "number":
		vals := []float64{0, 1, -1, 0.5, 1.5, 60, 1e300, -1e300, 3153600000, 3153600001, 500, 501, 100, 101}
		if r.Intn(2) == 0 {
			vals = []float64{1, 0.5, 60}
		}
		if s.Minimum != nil {
			vals = append(vals, *s.Minimum, *s.Minimum-1, *s.Minimum+0.25)
		}
		if s.Maximum != nil {
			vals = append(vals, *s.Maximum, *s.Maximum+1, *s.Maximum-0.25, *s.Maximum+1e-9)
		}
		return vals[r.Intn(len(vals))]
	case "boolean":
		return r.Intn(2) == 0
	}
	return anyValue(r, depth)
}

func anyValue(r *rand.Rand, depth int) any {
	switch r.Intn(7) {
	case 0:
		return nil
	case 1:
		return randomString(r)
	case 2:
		return float64(r.Intn(5)) - 1.5
	case 3:
		return r.Intn(2) == 0
	case 4:
		if depth < 4 {
			return []any{anyValue(r, depth+1)}
		}
	case 5:
		if depth < 4 {
			return map[string]any{randomString(r): anyValue(r, depth+1)}
		}
	}
	return 7.0
}

func randomString(r *rand.Rand) string {
	return []string{"", "k", "semantic", "Semantic", "project", "café ☕", "x y", "\u0000", "keyword"}[r.Intn(9)]
}

// FuzzArgCheck: whatever JSON object a call's arguments hold, the
// compiled check of memory_write's schema and the validator agree.
func FuzzArgCheck(f *testing.F) {
	for _, seed := range []string{
		`{"type":"semantic","key":"k","body":"b"}`,
		`{"type":"semantic","key":"k","body":"b","confidence":1.0000001}`,
		`{"type":"working","key":"k","body":"b","ttl_seconds":60.5,"tags":["a",1]}`,
		`{"type":"working","key":"k","body":"b","metadata":{"a":"b","c":null}}`,
		`{"type":"working","key":"k","body":"b","Body":"c"}`,
		`{"type":"episodic","key":"k","body":"b","ttl_seconds":0}`,
	} {
		f.Add(seed)
	}
	s := toolSchemas(f)["memory_write"]
	fast := compileArgCheck(s)
	f.Fuzz(func(t *testing.T, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil || args == nil {
			return
		}
		for k, v := range args {
			if v == nil {
				delete(args, k)
			}
		}
		if got, want := fast.fits(args), validatorSays(t, s, args); got != want {
			t.Fatalf("%s: the check says %v, the validator %v", raw, got, want)
		}
	})
}

// TestArgCheckLeavesOtherSchemasToTheValidator: a schema with a default,
// or a keyword the check does not know, compiles to nil.
func TestArgCheckLeavesOtherSchemasToTheValidator(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"type":"string","default":"x"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","minLength":2}}}`,
		`{"type":"object","properties":{"a":{"type":"integer","exclusiveMaximum":2}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"]}}}`,
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`,
		`{"type":"object","properties":{"a":{"type":"string","enum":["x",1]}}}`,
		`{"properties":{"a":{"type":"string"}}}`,
	} {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatal(err)
		}
		if c := compileArgCheck(&s); c != nil {
			t.Errorf("%s compiled", raw)
		}
	}
}

// TestRefusedArgumentsStillSayWhy: arguments the check refuses still get
// the validator's answer, naming the field and never its value: a field
// named as one the tool takes but for its case (which decoding into the
// tool's input would take for it), a null in a list, a number in a map
// of strings.
func TestRefusedArgumentsStillSayWhy(t *testing.T) {
	s := toolSchemas(t)["memory_write"]
	rs, fields := resolveArgs(t, s)
	fast := compileArgCheck(s)
	for raw, want := range map[string]string{
		`{"type":"semantic","key":"k","body":"b","confidence":7}`:              "confidence must be",
		`{"type":"semantic","key":"k","body":"b","ttl_seconds":1.5}`:           "ttl_seconds must be",
		`{"type":"notatype","key":"k","body":"sk-live-0123456789abcdef"}`:      "type must be",
		`{"type":"semantic","key":"k"}`:                                        "body is required",
		`{"type":"semantic","key":"k","body":"b","secret":"ghp_0123456789ab"}`: "arguments hold a field",
		`{"type":"semantic","key":"k","body":"b","Body":"ghp_0123456789ab"}`:   "arguments hold a field",
		`{"type":"semantic","key":"k","body":"b","tags":[null]}`:               "tags must be",
		`{"type":"semantic","key":"k","body":"b","metadata":{"a":1}}`:          "metadata must be",
	} {
		_, err := checkArguments(json.RawMessage(raw), rs, s, fields, fast)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "sk-live") || strings.Contains(err.Error(), "ghp_")) {
			t.Errorf("%s: the error quotes a value: %v", raw, err)
		}
	}
}

// BenchmarkCheckArguments checks a fact's write's arguments: with the
// compiled check, and the general way.
func BenchmarkCheckArguments(b *testing.B) {
	s := toolSchemas(b)["memory_write"]
	rs, fields := resolveArgs(b, s)
	raw := json.RawMessage(`{"type":"semantic","key":"fact-123","description":"fact number 123","body":"The build uses Go modules; run go test ./... before pushing. 123","tags":["a","b"]}`)
	for _, c := range []struct {
		name string
		fast *argCheck
	}{{"compiled", compileArgCheck(s)}, {"validator", nil}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkArguments(raw, rs, s, fields, c.fast); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
