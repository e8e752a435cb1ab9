// Package schema infers the JSON schemas of the tools' arguments and
// results, and checks a call's arguments against its tool's schema, with
// errors that name the field and what it takes, never the value sent (a
// value may be a secret). It imports github.com/google/jsonschema-go and
// memory, for the errors' codes.
package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"prom.codes/memory-mcp/memory"
)

// For infers T's schema and lets edit add enums, bounds and
// descriptions that struct tags cannot carry.
func For[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // a programming error in a type below
	}
	DropNull(s)
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

// DropNull turns the ["null", T] unions inferred for pointers, slices and
// maps into plain T: several clients reject a type array, and an optional
// field is one that is not required. Args.Check drops a null argument
// before validation, so a client sending one gets the field's default; a
// result never holds a null, as its optional fields are omitempty and its
// other slices are made non-nil.
func DropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		var rest []string
		for _, t := range s.Types {
			if t != "null" {
				rest = append(rest, t)
			}
		}
		if len(rest) == 1 {
			s.Type, s.Types = rest[0], nil
		} else {
			s.Types = rest
		}
	}
	for _, p := range s.Properties {
		DropNull(p)
	}
	DropNull(s.Items)
	DropNull(s.AdditionalProperties)
}

// Args checks the arguments of calls to one tool.
type Args struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	fields   map[string]*jsonschema.Resolved
	defaults bool
}

// NewArgs resolves s, a tool's input schema, for checking arguments. It
// fails only on a schema that does not resolve: a programming error.
func NewArgs(s *jsonschema.Schema) (*Args, error) {
	resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	fields := make(map[string]*jsonschema.Resolved, len(s.Properties))
	for name, p := range s.Properties {
		if fields[name], err = p.Resolve(nil); err != nil {
			return nil, fmt.Errorf("input schema of %s: %w", name, err)
		}
	}
	return &Args{schema: s, resolved: resolved, fields: fields, defaults: hasDefaults(s)}, nil
}

// Defaults reports whether the schema gives any field a default.
func (a *Args) Defaults() bool { return a.defaults }

// Check validates a call's arguments, after applying the schema's
// defaults, and returns them decoded. Its errors are memory.Errors with
// the code invalid_argument.
func (a *Args) Check(raw json.RawMessage) (map[string]any, error) {
	return checkArguments(raw, a.resolved, a.schema, a.fields)
}

// hasDefaults reports whether s or any schema inside it has a default.
func hasDefaults(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Default != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(p) {
			return true
		}
	}
	return hasDefaults(s.Items) || hasDefaults(s.AdditionalProperties)
}

// ExactNumbers reports whether every number in the JSON b has at most 15
// characters, so that a float64 holds its value exactly and decoding it
// into a field gives what decoding its re-encoding would.
func ExactNumbers(b []byte) bool {
	run := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = stringEnd(b, i)
			run = 0
		case c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E':
			if run++; run > 15 {
				return false
			}
		default:
			run = 0
		}
	}
	return true
}

// stringEnd returns the index of the quote that closes the JSON string
// opening at b[i], or len(b) if none does.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}

// checkArguments validates a call's arguments against the tool's input
// schema after applying its defaults, and returns them decoded. A failure
// names the field and what it takes, never the value sent: the validator's
// own messages quote values, and a value may be a secret.
func checkArguments(raw json.RawMessage, resolved *jsonschema.Resolved, schema *jsonschema.Schema, fields map[string]*jsonschema.Resolved) (map[string]any, error) {
	args := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, memory.Errorf(memory.CodeInvalidArgument, "arguments", "must be a JSON object")
		}
	}
	for k, v := range args {
		if v == nil {
			delete(args, k)
		}
	}
	if err := resolved.ApplyDefaults(&args); err != nil {
		return nil, memory.Errorf(memory.CodeInvalidArgument, "arguments", "do not fit the input schema")
	}
	if err := resolved.Validate(&args); err != nil {
		return nil, argumentError(args, schema, fields)
	}
	return args, nil
}

// argumentError finds the first field of args that schema refuses and says
// what it takes.
func argumentError(args map[string]any, schema *jsonschema.Schema, fields map[string]*jsonschema.Resolved) error {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	known := make([]string, 0, len(schema.Properties))
	for k := range schema.Properties {
		known = append(known, k)
	}
	slices.Sort(known)
	for _, k := range names {
		if _, ok := schema.Properties[k]; !ok {
			// The name is the caller's, and may be a secret (clip).
			return memory.Errorf(memory.CodeInvalidArgument, "arguments", "hold a field this tool does not take: %q; it takes %s", Clip(k), strings.Join(known, ", "))
		}
	}
	for _, k := range schema.Required {
		if _, ok := args[k]; !ok {
			return memory.Errorf(memory.CodeInvalidArgument, k, "is required")
		}
	}
	for _, k := range names {
		v := args[k]
		if fields[k].Validate(&v) != nil {
			return memory.Errorf(memory.CodeInvalidArgument, k, "must be %s", takes(schema.Properties[k]))
		}
	}
	return memory.Errorf(memory.CodeInvalidArgument, "arguments", "do not fit the input schema")
}

// takes says in words what values s accepts.
func takes(s *jsonschema.Schema) string {
	if s == nil {
		return "a valid value"
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	switch s.Type {
	case "string":
		return "a string"
	case "boolean":
		return "true or false"
	case "integer", "number":
		kind := "a number"
		if s.Type == "integer" {
			kind = "a whole number"
		}
		switch {
		case s.Minimum != nil && s.Maximum != nil:
			return fmt.Sprintf("%s from %s to %s", kind, num(s.Minimum), num(s.Maximum))
		case s.Minimum != nil:
			return fmt.Sprintf("%s of at least %s", kind, num(s.Minimum))
		}
		return kind
	case "array":
		return "a list whose items are each " + takes(s.Items)
	case "object":
		if len(s.Properties) > 0 {
			ks := make([]string, 0, len(s.Properties))
			for k := range s.Properties {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			d := "an object with the fields " + strings.Join(ks, ", ")
			if len(s.Required) > 0 {
				d += " (" + strings.Join(s.Required, ", ") + " required)"
			}
			return d
		}
		if s.AdditionalProperties != nil {
			return "an object whose values are each " + takes(s.AdditionalProperties)
		}
		return "an object"
	}
	return "a valid value"
}

// Clip is a name or argument fit to quote in an error: scanned whole
// first, so that neither a secret nor the start of one is ever shown, then
// cut to 40 bytes on a rune boundary.
func Clip(s string) string {
	if memory.ScanKey("argument", s) != nil {
		return "(a value shaped like a secret)"
	}
	if len(s) > 40 {
		n := 40
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}
