package main

import (
	"encoding/json"
	"math"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// argCheck is a tool's input schema compiled for the arguments that fit
// it. The schema validator is general: a fact's write's arguments cost
// it and its defaults pass 95 allocations and 5 µs, and under a client
// the whole check took 18 of the server's 400 µs. The schemas of these tools use a
// few keywords only (type, enum, minimum, maximum, properties, required,
// additionalProperties, items), and a check of exactly those says the
// same of arguments decoded from JSON in a fraction of that. Arguments
// it refuses go to the validator, whose refusal names the field and what
// it takes (argumentError). A schema that uses anything else, or has
// defaults to apply, compiles to nil: its arguments all go the general
// way. TestArgCheckAgreesWithTheValidator holds the two to the same
// answers for every tool's schema.
type argCheck struct {
	typ      string // object, array, string, integer, number or boolean
	enum     []string
	min, max *float64
	props    map[string]*argCheck
	required []string
	closed   bool      // additionalProperties false
	extra    *argCheck // additionalProperties as a schema; nil: any
	items    *argCheck // nil: any
}

// compileArgCheck compiles s, or returns nil when it uses a keyword the
// check does not know, or a default.
func compileArgCheck(s *jsonschema.Schema) *argCheck {
	if s == nil || hasDefaults(s) {
		return nil
	}
	// The schema as it goes on the wire: every keyword set shows, each
	// under its own name, whatever field of the Go type holds it.
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return compileNode(m)
}

func compileNode(m map[string]any) *argCheck {
	c := &argCheck{}
	typ, _ := m["type"].(string)
	switch typ {
	case "object", "array", "string", "integer", "number", "boolean":
		c.typ = typ
	default:
		return nil
	}
	for k, v := range m {
		ok := true
		switch k {
		case "type", "description":
		case "enum":
			ok = c.compileEnum(v)
		case "minimum", "maximum":
			f, isNum := v.(float64)
			if ok = isNum && (typ == "integer" || typ == "number"); ok {
				if k == "minimum" {
					c.min = &f
				} else {
					c.max = &f
				}
			}
		case "properties":
			ok = c.compileProps(v)
		case "required":
			ok = c.compileRequired(v)
		case "additionalProperties":
			switch v := v.(type) {
			case bool:
				c.closed = !v
			case map[string]any:
				c.extra = compileNode(v)
				ok = c.extra != nil
			default:
				ok = false
			}
			ok = ok && typ == "object"
		case "items":
			sub, isObj := v.(map[string]any)
			if ok = isObj && typ == "array"; ok {
				c.items = compileNode(sub)
				ok = c.items != nil
			}
		default:
			ok = false
		}
		if !ok {
			return nil
		}
	}
	return c
}

func (c *argCheck) compileEnum(v any) bool {
	vals, ok := stringList(v)
	c.enum = vals // an empty enum admits nothing
	return ok && c.typ == "string"
}

// stringList returns v, a decoded JSON array, as the strings it holds; false
// if it is not an array of strings.
func stringList(v any) ([]string, bool) {
	vals, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(vals))
	for _, e := range vals {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func (c *argCheck) compileProps(v any) bool {
	props, ok := v.(map[string]any)
	if !ok || c.typ != "object" {
		return false
	}
	c.props = make(map[string]*argCheck, len(props))
	for name, p := range props {
		sub, ok := p.(map[string]any)
		if !ok {
			return false
		}
		if c.props[name] = compileNode(sub); c.props[name] == nil {
			return false
		}
	}
	return true
}

func (c *argCheck) compileRequired(v any) bool {
	names, ok := stringList(v)
	c.required = names
	return ok && c.typ == "object"
}

// fits reports whether v, a value as encoding/json decodes it into an
// any, fits the schema c was compiled from. False may also mean the
// validator is to say: it is asked then.
func (c *argCheck) fits(v any) bool {
	switch c.typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for k, e := range m {
			switch p := c.props[k]; {
			case p != nil:
				if !p.fits(e) {
					return false
				}
			case c.closed:
				return false
			case c.extra != nil:
				if !c.extra.fits(e) {
					return false
				}
			}
		}
		for _, k := range c.required {
			if _, ok := m[k]; !ok {
				return false
			}
		}
		return true
	case "array":
		a, ok := v.([]any)
		if !ok {
			return false
		}
		if c.items != nil {
			for _, e := range a {
				if !c.items.fits(e) {
					return false
				}
			}
		}
		return true
	case "string":
		s, ok := v.(string)
		return ok && (c.enum == nil || slices.Contains(c.enum, s))
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			return false
		}
		if _, frac := math.Modf(f); c.typ == "integer" && frac != 0 {
			return false
		}
		return (c.min == nil || f >= *c.min) && (c.max == nil || f <= *c.max)
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return false
}
