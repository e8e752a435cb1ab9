package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

var (
	typeEnum  = []any{"working", "episodic", "semantic", "procedural"}
	scopeEnum = []any{"project", "workspace", "tenant", "system"}
)

func describe(props map[string]*jsonschema.Schema, descs map[string]string) {
	for k, d := range descs {
		if p, ok := props[k]; ok {
			p.Description = d
		}
	}
}

func enum(p *jsonschema.Schema, vals []any) {
	if p.Type == "array" && p.Items != nil {
		p.Items.Enum = vals
		return
	}
	p.Enum = vals
}

var fieldDocs = map[string]string{
	"type":        "working (scratch for this task, expires in 24h), episodic (what happened in a session, 30 days), semantic (a durable fact), procedural (a repeatable how-to)",
	"key":         "slug naming the record: lower-case letters, digits, '.', '_', '-'; spaces become '-'",
	"id":          "the record's id, instead of key",
	"body":        "markdown; at most 64 KiB",
	"description": "one line shown in lists and the index",
	"scope":       "project (this workspace only; the default), workspace, tenant or system (every project on this machine); the narrowest wins for the same type and key",
	"tags":        "short labels",
	"confidence":  "0..1, how sure this fact is; default 0.5",
	"ttl_seconds": "expire after this many seconds; default by type",
	"session_id":  "the agent session this came from",
	"metadata":    "string to string map",
}

type WriteIn struct {
	Type        string            `json:"type"`
	Key         string            `json:"key"`
	Body        string            `json:"body"`
	Description string            `json:"description,omitempty"`
	Scope       string            `json:"scope,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Confidence  *float64          `json:"confidence,omitempty"`
	TTLSeconds  *int64            `json:"ttl_seconds,omitempty"`
	SessionID   string            `json:"session_id,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

type WriteOut struct {
	Record   RecordView `json:"record"`
	Created  bool       `json:"created"`
	Problems []Problem  `json:"problems,omitempty"`
}

type updateIn struct {
	Key         string             `json:"key,omitempty"`
	ID          string             `json:"id,omitempty"`
	Type        string             `json:"type,omitempty"`
	Scope       string             `json:"scope,omitempty"`
	Body        *string            `json:"body,omitempty"`
	Description *string            `json:"description,omitempty"`
	Tags        *[]string          `json:"tags,omitempty"`
	Confidence  *float64           `json:"confidence,omitempty"`
	TTLSeconds  *int64             `json:"ttl_seconds,omitempty"`
	Metadata    *map[string]string `json:"metadata,omitempty"`
}

type recordOut struct {
	Record   RecordView `json:"record"`
	Problems []Problem  `json:"problems,omitempty"`
}

type SelectIn struct {
	Key   string `json:"key,omitempty"`
	ID    string `json:"id,omitempty"`
	Type  string `json:"type,omitempty"`
	Scope string `json:"scope,omitempty"`
}

type DeleteOut struct {
	Deleted  RecordView `json:"deleted"`
	Problems []Problem  `json:"problems,omitempty"`
}

type ReadIn struct {
	Key       string   `json:"key,omitempty"`
	ID        string   `json:"id,omitempty"`
	Type      string   `json:"type,omitempty"`
	Scope     string   `json:"scope,omitempty"`
	Query     string   `json:"query,omitempty"`
	Types     []string `json:"types,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
}

type ReadOut struct {
	Record   *RecordView `json:"record,omitempty"`
	Block    string      `json:"block,omitempty"`
	Tokens   int         `json:"tokens"`
	Included []string    `json:"included,omitempty"`
	Omitted  int         `json:"omitted"`
	Problems []Problem   `json:"problems,omitempty"`
}

type ListIn struct {
	Type   string `json:"type,omitempty"`
	Scope  string `json:"scope,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

type ListOut struct {
	Records    []ListRow `json:"records"`
	NextCursor string    `json:"next_cursor,omitempty"`
	Problems   []Problem `json:"problems,omitempty"`
}

type SearchIn struct {
	Query    string   `json:"query"`
	Type     string   `json:"type,omitempty"`
	Scope    string   `json:"scope,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Since    string   `json:"since,omitempty"`
	Limit    int      `json:"limit,omitempty"`
	MinScore float64  `json:"min_score,omitempty"`
	Mode     string   `json:"mode,omitempty"`
}

type SearchHit struct {
	ID          string  `json:"id"`
	Key         string  `json:"key"`
	Type        string  `json:"type"`
	Scope       string  `json:"scope"`
	Description string  `json:"description"`
	Score       float64 `json:"score"`
	Preview     string  `json:"preview"`
	Why         Why     `json:"why"`
}

// Why is what a hit matched: the query's words it holds and the fields
// holding them.
type Why struct {
	Terms  []string `json:"terms"`
	Fields []string `json:"fields"`
}

type SearchOut struct {
	Results  []SearchHit `json:"results"`
	Mode     string      `json:"mode"`           // how it was answered
	Note     string      `json:"note,omitempty"` // why not as asked, or what is not found yet
	Problems []Problem   `json:"problems,omitempty"`
}

func boolp(b bool) *bool { return &b }

// addTools registers every tool on s.
func (srv *Server) addTools(s toolAdder) {
	selDocs := func(p map[string]*jsonschema.Schema) {
		describe(p, fieldDocs)
		enum(p["type"], typeEnum)
		enum(p["scope"], scopeEnum)
	}
	addTool(s, &mcp.Tool{
		Name:  "memory_write",
		Title: "Remember something",
		Description: `Store a memory, or replace the one with the same scope, type and key. Use it when you learn something worth keeping past this conversation.
Pick the type: semantic for a durable fact or decision ("we deploy with make release"), procedural for a repeatable how-to (numbered steps or commands), working for scratch notes about the current task (gone in 24h), episodic for what happened in a session.
Pick the scope: project (default) for this repository only; system for something true on every project of this machine (a personal preference); workspace and tenant sit between. Project facts are mirrored to .prometheus/memories/<key>.md for review.
Never store secrets: values that look like API keys, tokens or passwords are refused.
Example: {"type":"semantic","key":"test-runner","description":"How tests are run","body":"Run make test; it sets up the fixtures.","tags":["testing"]}`,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		InputSchema: schema.For[WriteIn](func(p map[string]*jsonschema.Schema) {
			selDocs(p)
			p["confidence"].Minimum, p["confidence"].Maximum = ptr(0.0), ptr(1.0)
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = ptr(1.0), ptr(float64(memory.MaxTTL/time.Second))
		}),
	}, wrap(srv.Write))
	addTool(s, &mcp.Tool{
		Name:  "memory_update",
		Title: "Change a memory",
		Description: `Change some fields of an existing memory, found by key (resolved through the scope chain: the narrowest scope wins) or by id. Fields you leave out stay as they are. Fails with not_found if there is no such memory; use memory_write to create one.
Example: {"key":"test-runner","body":"Run make test-all; make test skips the slow suite.","confidence":0.9}`,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		InputSchema: schema.For[updateIn](func(p map[string]*jsonschema.Schema) {
			selDocs(p)
			p["confidence"].Minimum, p["confidence"].Maximum = ptr(0.0), ptr(1.0)
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = ptr(1.0), ptr(float64(memory.MaxTTL/time.Second))
		}),
	}, wrap(srv.update))
	addTool(s, &mcp.Tool{
		Name:  "memory_delete",
		Title: "Forget a memory",
		Description: `Delete a memory by key or id. Without a scope it deletes the effective one (the narrowest), so a broader memory with the same key shows again. Use it when a memory is wrong or obsolete.
Example: {"key":"test-runner","type":"semantic"}`,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(false)},
		InputSchema: schema.For[SelectIn](selDocs),
	}, wrap(srv.Delete))
	addTool(s, &mcp.Tool{
		Name:  "memory_read",
		Title: "Read memory",
		Description: `Two uses. With a key or id: that memory in full, resolved through the scope chain (project beats workspace beats tenant beats system). Without: a compact markdown recall block of the most useful facts and procedures for this project, within a token budget — call it at the start of a task; pass query to put what is relevant to the task first.
Examples: {"key":"test-runner"}  ·  {"query":"database migrations","max_tokens":800}`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
		InputSchema: schema.For[ReadIn](func(p map[string]*jsonschema.Schema) {
			selDocs(p)
			enum(p["types"], typeEnum)
			p["types"].Description = "types woven into the recall block: semantic and procedural (the default)"
			p["query"].Description = "what the current task is about; relevant memories come first in the block"
			p["max_tokens"].Description = "token budget of the recall block (default 1500)"
			p["max_tokens"].Minimum = ptr(0.0)
		}),
	}, wrap(srv.Read))
	addTool(s, &mcp.Tool{
		Name:  "memory_list",
		Title: "List memories",
		Description: `List the effective memories (narrowest scope wins) with their key, type, scope, description and tags — never bodies. Page with cursor. Use it to see what is known before writing a duplicate.
Example: {"type":"semantic","limit":20}`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
		InputSchema: schema.For[ListIn](func(p map[string]*jsonschema.Schema) {
			selDocs(p)
			p["tag"].Description = "only memories carrying this tag"
			p["limit"].Description = "rows per page, default 50, at most 500"
			p["limit"].Minimum, p["limit"].Maximum = ptr(0.0), ptr(500.0)
			p["cursor"].Description = "next_cursor from the previous page"
		}),
	}, wrap(srv.List))
	addTool(s, &mcp.Tool{
		Name:  "memory_search",
		Title: "Search memories",
		Description: `Full-text search over key, description, body and tags, in plain words: any word can match, stemmed, and memories sharing the most rare words with the query rank first (BM25; score 0..1). With an embeddings model configured it also finds memories by meaning (mode). Returns previews; read one in full with memory_read.
Example: {"query":"how do we run the integration tests","type":"procedural","limit":5}`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
		InputSchema: schema.For[SearchIn](func(p map[string]*jsonschema.Schema) {
			selDocs(p)
			p["query"].Description = "natural-language query"
			p["tags"].Description = "only memories carrying all these tags"
			p["since"].Description = "only memories updated at or after this RFC 3339 time"
			p["limit"].Description = "results, default 10, at most 100"
			p["limit"].Minimum, p["limit"].Maximum = ptr(0.0), ptr(100.0)
			p["min_score"].Description = "drop results scoring below this (0..1)"
			p["min_score"].Minimum, p["min_score"].Maximum = ptr(0.0), ptr(1.0)
			p["mode"].Description = "keyword (words), semantic (meaning, through the configured embeddings model) or hybrid (both fused; exact keyword hits first); default hybrid when embeddings are configured, else keyword"
			enum(p["mode"], []any{"keyword", "semantic", "hybrid"})
		}),
	}, wrap(srv.Search))
	srv.addCaptureTool(s)
}

func ptr[T any](v T) *T { return &v }

// ttl turns ttl_seconds into a duration, refusing what is not positive or
// longer than memory.MaxTTL before the multiplication could overflow.
func ttl(sec *int64) (*time.Duration, error) {
	if sec == nil {
		return nil, nil
	}
	if *sec <= 0 || *sec > int64(memory.MaxTTL/time.Second) {
		return nil, memory.Errorf(memory.CodeInvalidArgument, "ttl_seconds", "must be between 1 and %d (100 years)", int64(memory.MaxTTL/time.Second))
	}
	d := time.Duration(*sec) * time.Second
	return &d, nil
}

func (srv *Server) Write(ctx context.Context, in WriteIn) (string, WriteOut, error) {
	sc := scope.Project
	if in.Scope != "" {
		l, err := parseScope("scope", in.Scope)
		if err != nil {
			return "", WriteOut{}, err
		}
		sc = *l
	}
	t, err := memory.ParseType("type", in.Type)
	if err != nil {
		return "", WriteOut{}, err
	}
	life, err := ttl(in.TTLSeconds)
	if err != nil {
		return "", WriteOut{}, err
	}
	// Only a record the mirror holds can meet a file edited by hand; the
	// write of any other (a note, an episode, a fact of a wider scope)
	// leaves the markdown for the next call that reads it.
	var rep mirror.Report
	if (memory.Record{Scope: sc, Type: t}).Mirrored() {
		if rep, err = srv.sync(ctx); err != nil {
			return "", WriteOut{}, err
		}
	}
	var rec memory.Record
	var created bool
	err = srv.again(ctx, &rep, func() (err error) {
		rec, created, err = srv.app.Store.Put(ctx, srv.app.Proj, memory.Write{
			Scope: sc, Type: t, Key: in.Key, Description: in.Description, Body: in.Body, Tags: in.Tags,
			Confidence: in.Confidence, TTL: life, SessionID: in.SessionID, Source: memory.FromTool, Metadata: in.Metadata,
		})
		return err
	})
	if err != nil {
		return "", WriteOut{}, err
	}
	srv.changed(ctx, rec)
	v := view(rec)
	v.Body = ""
	verb := "Updated"
	if created {
		verb = "Stored"
	}
	ps := Problems(rep)
	return fmt.Sprintf("%s %s %s %q (id %s).%s", verb, rec.Scope, rec.Type, rec.Key, rec.ID, problemsText(ps)), WriteOut{Record: v, Created: created, Problems: ps}, nil
}

func selector(in SelectIn) (memory.Selector, error) {
	if in.ID == "" && in.Key == "" {
		return memory.Selector{}, memory.Errorf(memory.CodeInvalidArgument, "key", "or id is required")
	}
	if in.ID != "" && in.Key != "" {
		return memory.Selector{}, memory.Errorf(memory.CodeInvalidArgument, "id", "and key are exclusive; give one")
	}
	t, err := parseType("type", in.Type)
	if err != nil {
		return memory.Selector{}, err
	}
	sc, err := parseScope("scope", in.Scope)
	if err != nil {
		return memory.Selector{}, err
	}
	return memory.Selector{ID: in.ID, Key: in.Key, Type: t, Scope: sc}, nil
}

func (srv *Server) update(ctx context.Context, in updateIn) (string, recordOut, error) {
	rep, err := srv.sync(ctx)
	if err != nil {
		return "", recordOut{}, err
	}
	sel, err := selector(SelectIn{Key: in.Key, ID: in.ID, Type: in.Type, Scope: in.Scope})
	if err != nil {
		return "", recordOut{}, err
	}
	life, err := ttl(in.TTLSeconds)
	if err != nil {
		return "", recordOut{}, err
	}
	var rec memory.Record
	err = srv.again(ctx, &rep, func() (err error) {
		rec, err = srv.app.Store.Update(ctx, srv.app.Proj, sel, memory.Patch{
			Body: in.Body, Description: in.Description, Tags: in.Tags, Confidence: in.Confidence,
			TTL: life, Metadata: in.Metadata,
		})
		return err
	})
	if err != nil {
		return "", recordOut{}, err
	}
	srv.changed(ctx, rec)
	ps := Problems(rep)
	return fmt.Sprintf("Updated %s %s %q.%s", rec.Scope, rec.Type, rec.Key, problemsText(ps)), recordOut{Record: view(rec), Problems: ps}, nil
}

func (srv *Server) Delete(ctx context.Context, in SelectIn) (string, DeleteOut, error) {
	rep, err := srv.sync(ctx)
	if err != nil {
		return "", DeleteOut{}, err
	}
	sel, err := selector(in)
	if err != nil {
		return "", DeleteOut{}, err
	}
	var rec memory.Record
	err = srv.again(ctx, &rep, func() (err error) {
		rec, err = srv.app.Store.Delete(ctx, srv.app.Proj, sel)
		return err
	})
	if err != nil {
		return "", DeleteOut{}, err
	}
	srv.changed(ctx, rec)
	ps := Problems(rep)
	return fmt.Sprintf("Deleted %s %s %q.%s", rec.Scope, rec.Type, rec.Key, problemsText(ps)), DeleteOut{Deleted: view(rec), Problems: ps}, nil
}

func (srv *Server) Read(ctx context.Context, in ReadIn) (string, ReadOut, error) {
	rep, err := srv.sync(ctx)
	if err != nil {
		return "", ReadOut{}, err
	}
	ps := Problems(rep)
	if in.Key != "" || in.ID != "" {
		if in.Query != "" || len(in.Types) > 0 || in.MaxTokens != 0 {
			return "", ReadOut{}, memory.Errorf(memory.CodeInvalidArgument, "query", "types and max_tokens are for the recall block; leave them out when reading by key or id")
		}
		sel, err := selector(SelectIn{Key: in.Key, ID: in.ID, Type: in.Type, Scope: in.Scope})
		if err != nil {
			return "", ReadOut{}, err
		}
		rec, err := srv.app.Store.Get(ctx, srv.app.Project, sel)
		if err != nil {
			return "", ReadOut{}, err
		}
		v := view(rec)
		return recordText(rec) + problemsText(ps), ReadOut{Record: &v, Problems: ps}, nil
	}
	if in.Type != "" || in.Scope != "" {
		return "", ReadOut{}, memory.Errorf(memory.CodeInvalidArgument, "key", "or id is required with type or scope; for the recall block use types")
	}
	if in.MaxTokens < 0 {
		return "", ReadOut{}, memory.Errorf(memory.CodeInvalidArgument, "max_tokens", "must not be negative")
	}
	var types []memory.Type
	for i, s := range in.Types {
		t, err := memory.ParseType(fmt.Sprintf("types[%d]", i), s)
		if err != nil {
			return "", ReadOut{}, err
		}
		types = append(types, t)
	}
	b, err := srv.app.Recall(ctx, in.Query, types, in.MaxTokens)
	if err != nil {
		return "", ReadOut{}, err
	}
	// The text is the block, within the budget asked for: even a note that
	// nothing fit would overrun a budget of a few tokens.
	return b.Markdown + problemsText(ps), ReadOut{Block: b.Markdown, Tokens: b.Tokens, Included: b.Included, Omitted: b.Omitted, Problems: ps}, nil
}

func recordText(r memory.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s", r.Key)
	if r.Description != "" {
		fmt.Fprintf(&b, " — %s", r.Description)
	}
	fmt.Fprintf(&b, "\n\n%s %s · confidence %.2g · id %s", r.Scope, r.Type, r.Confidence, r.ID)
	if len(r.Tags) > 0 {
		fmt.Fprintf(&b, " · tags: %s", strings.Join(r.Tags, ", "))
	}
	fmt.Fprintf(&b, "\n\n%s", strings.TrimRight(r.Body, "\n"))
	return b.String()
}

func (srv *Server) List(ctx context.Context, in ListIn) (string, ListOut, error) {
	rep, err := srv.sync(ctx)
	if err != nil {
		return "", ListOut{}, err
	}
	t, err := parseType("type", in.Type)
	if err != nil {
		return "", ListOut{}, err
	}
	sc, err := parseScope("scope", in.Scope)
	if err != nil {
		return "", ListOut{}, err
	}
	if in.Limit < 0 || in.Limit > 500 {
		return "", ListOut{}, memory.Errorf(memory.CodeInvalidArgument, "limit", "must be between 0 and 500")
	}
	rs, next, err := srv.app.Store.List(ctx, srv.app.Project, memory.ListOptions{Type: t, Scope: sc, Tag: in.Tag, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return "", ListOut{}, err
	}
	out := ListOut{Records: make([]ListRow, 0, len(rs)), NextCursor: next, Problems: Problems(rep)}
	var b strings.Builder
	b.WriteString(Plural(len(rs), "memory", "memories"))
	if next != "" {
		fmt.Fprintf(&b, " (more: pass cursor %q for the next page)", next)
	}
	b.WriteString("\n")
	for _, r := range rs {
		out.Records = append(out.Records, row(r))
		fmt.Fprintf(&b, "- %s [%s, %s]", r.Key, r.Type, r.Scope)
		if r.Description != "" {
			fmt.Fprintf(&b, ": %s", r.Description)
		}
		b.WriteString("\n")
	}
	return b.String() + problemsText(out.Problems), out, nil
}

func (srv *Server) Search(ctx context.Context, in SearchIn) (string, SearchOut, error) {
	rep, err := srv.sync(ctx)
	if err != nil {
		return "", SearchOut{}, err
	}
	t, err := parseType("type", in.Type)
	if err != nil {
		return "", SearchOut{}, err
	}
	sc, err := parseScope("scope", in.Scope)
	if err != nil {
		return "", SearchOut{}, err
	}
	if strings.TrimSpace(in.Query) == "" {
		return "", SearchOut{}, memory.Errorf(memory.CodeInvalidArgument, "query", "is empty")
	}
	if in.Limit < 0 || in.Limit > 100 {
		return "", SearchOut{}, memory.Errorf(memory.CodeInvalidArgument, "limit", "must be between 0 and 100")
	}
	if in.MinScore < 0 || in.MinScore > 1 {
		return "", SearchOut{}, memory.Errorf(memory.CodeInvalidArgument, "min_score", "must be between 0 and 1")
	}
	var since time.Time
	if in.Since != "" {
		if since, err = time.Parse(time.RFC3339, in.Since); err != nil {
			return "", SearchOut{}, memory.Errorf(memory.CodeInvalidArgument, "since", "is not an RFC 3339 time (like 2026-01-02T15:04:05Z)")
		}
	}
	mode, err := semantic.ParseMode("mode", in.Mode)
	if err != nil {
		return "", SearchOut{}, err
	}
	hits, mode, note, err := srv.app.Search(ctx, srv.app.Project, mode, memory.SearchOptions{
		Query: in.Query, Type: t, Scope: sc, Tags: in.Tags, Since: since, Limit: in.Limit, MinScore: in.MinScore,
	})
	if err != nil {
		return "", SearchOut{}, err
	}
	out := SearchOut{Results: make([]SearchHit, 0, len(hits)), Mode: string(mode), Note: note, Problems: Problems(rep)}
	var b strings.Builder
	size := 64 + len(in.Query) + len(note)
	for _, h := range hits {
		size += 40 + len(h.Record.Key) + len(h.Preview)
	}
	b.Grow(size)
	b.WriteString(Plural(len(hits), "result", "results"))
	if memory.ScanField("query", in.Query) == nil {
		fmt.Fprintf(&b, " for %q", in.Query)
	}
	fmt.Fprintf(&b, " (%s)\n", mode)
	if note != "" {
		fmt.Fprintf(&b, "Note: %s\n", note)
	}
	for _, h := range hits {
		r := h.Record
		out.Results = append(out.Results, SearchHit{ID: r.ID, Key: r.Key, Type: string(r.Type), Scope: r.Scope.String(),
			Description: r.Description, Score: h.Score, Preview: h.Preview,
			Why: Why{Terms: nonNilStrings(h.Why.Terms), Fields: nonNilStrings(h.Why.Fields)}})
		// "- key [type, scope] score 0.00: preview", without fmt's
		// reflection.
		b.WriteString("- ")
		b.WriteString(r.Key)
		b.WriteString(" [")
		b.WriteString(string(r.Type))
		b.WriteString(", ")
		b.WriteString(r.Scope.String())
		b.WriteString("] score ")
		b.WriteString(strconv.FormatFloat(h.Score, 'f', 2, 64))
		b.WriteString(": ")
		b.WriteString(h.Preview)
		b.WriteByte('\n')
	}
	return b.String() + problemsText(out.Problems), out, nil
}

// addTool registers a typed tool as mcp.AddTool does: the output schema
// inferred from Out, the arguments validated against the input schema with
// its defaults applied, the result's structured content marshalled from
// Out. Unlike mcp.AddTool it does not validate every result against the
// output schema: results are values of Out itself, the type the schema was
// made from, and validating a page of a list cost a third of the call.
func addTool[In, Out any](s toolAdder, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	out, err := jsonschema.For[Out](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", t.Name, err))
	}
	schema.DropNull(out)
	t.OutputSchema = out
	args, err := schema.NewArgs(t.InputSchema.(*jsonschema.Schema))
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", t.Name, err))
	}
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		checked, err := args.Check(req.Params.Arguments)
		if err != nil {
			return errorResult(err), nil
		}
		var v In
		// Valid arguments with no defaults to apply decode straight from
		// the request, as they would from args re-encoded, unless a number
		// too long for a float64 would come out otherwise (or a number
		// fails to fit its field: the slow way says which).
		if !args.Defaults() && len(req.Params.Arguments) > 0 && schema.ExactNumbers(req.Params.Arguments) && json.Unmarshal(req.Params.Arguments, &v) == nil {
			return runTool(ctx, t.Name, h, req, v)
		}
		v = *new(In)
		b, err := json.Marshal(checked)
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return errorResult(memory.Errorf(memory.CodeInvalidArgument, te.Field, "is out of range")), nil
			}
			return errorResult(memory.Errorf(memory.CodeInvalidArgument, "arguments", "do not fit the input schema")), nil
		}
		return runTool(ctx, t.Name, h, req, v)
	})
}

// runTool runs a tool's handler on its decoded arguments and makes its result.
func runTool[In, Out any](ctx context.Context, name string, h mcp.ToolHandlerFor[In, Out], req *mcp.CallToolRequest, v In) (*mcp.CallToolResult, error) {
	res, o, err := h(ctx, req, v)
	if err != nil {
		return errorResult(err), nil
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("marshal %s result: %w", name, err)
	}
	res.StructuredContent = json.RawMessage(b)
	if res.Content == nil {
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
	}
	return res, nil
}

func errorResult(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

// wrap adapts a handler returning (text, out, err) to the SDK: the text
// becomes the readable content, out the structured content, and a domain
// error a tool error whose text starts with its stable code.
func wrap[In, Out any](h func(context.Context, In) (string, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		text, out, err := h(ctx, in)
		if err != nil {
			var zero Out
			return nil, zero, toolError(err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	}
}

// toolError gives every failure a stable code at the start of its text.
func toolError(err error) error {
	var me *memory.Error
	if errors.As(err, &me) {
		return me
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("internal: cancelled: %v", err)
	}
	return fmt.Errorf("internal: %v", err)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// again runs a write once more, after another sync, when the first try was
// refused only because a markdown file changed after the sync before it
// looked (memory.Error.Unsynced): the change is imported first, as the
// refusal asks, and what the sync reports replaces rep.
func (srv *Server) again(ctx context.Context, rep *mirror.Report, write func() error) error {
	err := write()
	var me *memory.Error
	if !errors.As(err, &me) || !me.Unsynced {
		return err
	}
	r, serr := srv.sync(ctx)
	if serr != nil {
		return err
	}
	*rep = r
	return write()
}
