// Package jsonl is the JSON lines formats of export and import: one
// record a line, every field present, and the identity each line's
// project field names; and the knowledge graph of the reference MCP
// memory server, an entity or a relation a line. It imports memory and scope.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// Line is one record in an export: every field, none left out when
// empty, so that a script reading the file meets the same keys on every line.
type Line struct {
	ID             string            `json:"id"`
	Project        string            `json:"project"` // identity of a project-scope record's project; "" for the others
	Scope          scope.Level       `json:"scope"`
	Type           memory.Type       `json:"type"`
	Key            string            `json:"key"`
	Description    string            `json:"description"`
	Body           string            `json:"body"`
	Tags           []string          `json:"tags"`
	Confidence     float64           `json:"confidence"`
	UseCount       int64             `json:"use_count"`
	LastAccessedAt *time.Time        `json:"last_accessed_at"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	ExpiresAt      *time.Time        `json:"expires_at"`
	SessionID      string            `json:"session_id"`
	Source         memory.Source     `json:"source"`
	Metadata       map[string]string `json:"metadata"`
}

// Of is r as a line of an export; project is the identity of a
// project-scope record's project.
func Of(project string, r memory.Record) Line {
	l := Line{
		ID: r.ID, Project: project, Scope: r.Scope, Type: r.Type, Key: r.Key, Description: r.Description, Body: r.Body,
		Tags: r.Tags, Confidence: r.Confidence, UseCount: r.UseCount, LastAccessedAt: r.LastAccessedAt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt, SessionID: r.SessionID,
		Source: r.Source, Metadata: r.Metadata,
	}
	if l.Tags == nil {
		l.Tags = []string{}
	}
	if l.Metadata == nil {
		l.Metadata = map[string]string{}
	}
	return l
}

// Record is the record l holds.
func (l Line) Record() memory.Record {
	return memory.Record{
		ID: l.ID, Scope: l.Scope, Type: l.Type, Key: l.Key, Description: l.Description, Body: l.Body,
		Tags: l.Tags, Confidence: l.Confidence, UseCount: l.UseCount, LastAccessedAt: l.LastAccessedAt,
		CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt, ExpiresAt: l.ExpiresAt, SessionID: l.SessionID,
		Source: l.Source, Metadata: l.Metadata,
	}
}

// exportedProject is what the project field of an export line may hold: a
// workspace root's identity, or a team identity or one of its levels.
var exportedProject = regexp.MustCompile(`^([0-9a-f]{32}|team:[0-9a-f]{24}(/[0-9a-f]{24}){0,2})$`)

// Identity is the identity to import an export line of level l
// through so that it lands in the bucket its project field names, or false
// when no identity puts level l there. A line with no project field goes
// to cur, as does any line of a level that lives in the global bucket.
func Identity(cur scope.Identity, project string, l scope.Level) (scope.Identity, bool) {
	if project == "" {
		if l == scope.Project || memory.Bucket(cur, l) == "" {
			return cur, true
		}
		// A team's workspace or tenant record: its own bucket, never
		// the global one a workspace root would put it in.
		return "", false
	}
	if !exportedProject.MatchString(project) {
		return "", false
	}
	id := scope.Identity(project)
	// A team's workspace or tenant bucket is an identity cut back to its
	// level: grow it again with parts no token can have (a profile or user
	// name is never empty), which only ever name that bucket.
	if rest, ok := strings.CutPrefix(project, "team:"); ok {
		for n := strings.Count(rest, "/"); n < 2; n++ {
			id += "/" + scope.Identity(strings.Repeat("0", 24))
		}
	}
	if memory.Bucket(id, l) != project {
		return "", false
	}
	return id, true
}

// MaxLine is the longest line Read reads; a record's body is at most
// 64 KiB, and JSON escaping can grow it several times over.
const MaxLine = 1 << 20

// Read calls fn with each line of r, numbered from 1 (a byte order mark
// before the first dropped), or with why a line cannot be read: longer
// than MaxLine, or not UTF-8, which decoding would turn into U+FFFD.
func Read(r io.Reader, fn func(n int, line []byte, bad string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	call := func(n int, line []byte, tooLong bool) error {
		switch {
		case tooLong:
			return fn(n, nil, fmt.Sprintf("too_large: the line is longer than %d bytes", MaxLine))
		case !utf8.Valid(line):
			return fn(n, nil, "invalid_argument: the line is not valid UTF-8")
		}
		if n == 1 { // a byte order mark, as some editors write
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		return fn(n, line, "")
	}
	for n := 1; ; n++ {
		var line []byte
		tooLong := false
		for {
			part, err := br.ReadSlice('\n')
			if len(line)+len(part) <= MaxLine {
				line = append(line, part...)
			} else {
				tooLong = true
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == io.EOF {
				if len(line) == 0 && !tooLong {
					return nil
				}
				return call(n, line, tooLong)
			}
			if err != nil {
				return err
			}
			break
		}
		if err := call(n, line, tooLong); err != nil {
			return err
		}
	}
}

// Reason says why a line is not the JSON wanted, without quoting it.
func Reason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type (want %s)", te.Field, te.Type)
	}
	return "not a JSON object of the expected shape"
}

// GraphLine is one line of the reference MCP memory server's JSONL
// knowledge graph: an entity or a relation.
type GraphLine struct {
	Type         string   `json:"type"`
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	RelationType string   `json:"relationType"`
}

// Entity is one entity of a knowledge graph, with the relations that
// have it at either end, written out.
type Entity struct {
	Line         int // where the graph names it first
	Name, Kind   string
	Observations []string
	Relations    []string
}

// Write is the record e is imported as: a project semantic record, its
// observations as the body, its type in the description and tags, and
// its relations after the observations.
func (e *Entity) Write() memory.Write {
	var b strings.Builder
	for _, o := range e.Observations {
		fmt.Fprintf(&b, "- %s\n", strings.Join(strings.Fields(o), " "))
	}
	if len(e.Relations) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## Relations\n\n")
		for _, r := range e.Relations {
			fmt.Fprintf(&b, "- %s\n", r)
		}
	}
	desc := e.Name
	var tags []string
	if k := strings.TrimSpace(e.Kind); k != "" {
		desc += " (" + k + ")"
		tag := memory.Slug(k)
		if len(tag) > memory.MaxTagLen {
			tag = tag[:memory.MaxTagLen]
		}
		tags = append(tags, tag)
	}
	tags = append(tags, "server-memory")
	meta := map[string]string{"entity": e.Name}
	if e.Kind != "" {
		meta["entity_type"] = e.Kind
	}
	return memory.Write{
		Scope: scope.Project, Type: memory.Semantic, Key: memory.Slug(e.Name),
		Description: strings.Join(strings.Fields(desc), " "), Body: b.String(), Tags: tags,
		Source: memory.FromCLI, Metadata: meta,
	}
}
