package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// RecordView is a record as tools return it.
type RecordView struct {
	ID             string            `json:"id"`
	URI            string            `json:"uri"`
	Scope          string            `json:"scope"`
	Type           string            `json:"type"`
	Key            string            `json:"key"`
	Description    string            `json:"description"`
	Body           string            `json:"body,omitempty"`
	Tags           []string          `json:"tags"`
	Confidence     float64           `json:"confidence"`
	UseCount       int64             `json:"use_count"`
	LastAccessedAt string            `json:"last_accessed_at,omitempty"`
	CreatedAt      string            `json:"created_at,omitempty"`
	UpdatedAt      string            `json:"updated_at"`
	ExpiresAt      string            `json:"expires_at,omitempty"`
	SessionID      string            `json:"session_id,omitempty"`
	Source         string            `json:"source,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return rfc3339(*t)
}

func recordURI(r memory.Record) string {
	return fmt.Sprintf("memory://%s/%s/%s", r.Scope, r.Type, r.Key)
}

func view(r memory.Record) RecordView {
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	return RecordView{
		ID: r.ID, URI: recordURI(r), Scope: r.Scope.String(), Type: string(r.Type), Key: r.Key,
		Description: r.Description, Body: r.Body, Tags: tags, Confidence: r.Confidence, UseCount: r.UseCount,
		LastAccessedAt: optTime(r.LastAccessedAt), CreatedAt: rfc3339(r.CreatedAt), UpdatedAt: rfc3339(r.UpdatedAt),
		ExpiresAt: optTime(r.ExpiresAt), SessionID: r.SessionID, Source: string(r.Source), Metadata: r.Metadata,
	}
}

// ListRow is one row of memory_list: never a body.
type ListRow struct {
	ID             string   `json:"id"`
	Key            string   `json:"key"`
	Type           string   `json:"type"`
	Scope          string   `json:"scope"`
	Description    string   `json:"description"`
	Tags           []string `json:"tags"`
	Confidence     float64  `json:"confidence"`
	UseCount       int64    `json:"use_count"`
	LastAccessedAt string   `json:"last_accessed_at,omitempty"`
	UpdatedAt      string   `json:"updated_at"`
}

func row(r memory.Record) ListRow {
	v := view(r)
	return ListRow{ID: v.ID, Key: v.Key, Type: v.Type, Scope: v.Scope, Description: v.Description, Tags: v.Tags,
		Confidence: v.Confidence, UseCount: v.UseCount, LastAccessedAt: v.LastAccessedAt, UpdatedAt: v.UpdatedAt}
}

// Problem is a markdown file the server could not accept.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func Problems(rep mirror.Report) []Problem {
	var out []Problem
	for _, p := range rep.Problems {
		out = append(out, Problem{Path: p.Path, Reason: p.Reason})
	}
	return out
}

// problemsText is appended to a tool's text when files were refused.
func problemsText(ps []Problem) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\nMarkdown files not accepted (left untouched; fix them and they are picked up on the next call):\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "- %s: %s\n", p.Path, p.Reason)
	}
	return b.String()
}

func parseScope(field, s string) (*scope.Level, error) {
	if s == "" {
		return nil, nil
	}
	l, err := scope.Parse(s)
	if err != nil {
		return nil, memory.Errorf(memory.CodeInvalidArgument, field, "is unknown (want project, workspace, tenant or system)")
	}
	return &l, nil
}

func parseType(field, s string) (memory.Type, error) {
	if s == "" {
		return "", nil
	}
	return memory.ParseType(field, s)
}

// quietNotFound keeps a protocol error from quoting back a value shaped
// like a secret: the SDK's errors for an unknown tool, prompt or resource,
// and ours for a resource not found, carry the name or URI asked for.
func quietNotFound(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var je *jsonrpc.Error
		if err == nil || !errors.As(err, &je) {
			return res, err
		}
		var d struct {
			URI string `json:"uri"`
		}
		json.Unmarshal(je.Data, &d)
		if memory.ScanKey("message", je.Message) == nil && memory.ScanKey("uri", d.URI) == nil && memory.ScanField("data", string(je.Data)) == nil {
			return res, err
		}
		msg := "invalid request: a value in it is shaped like a secret, so it is not repeated here"
		if je.Code == mcp.CodeResourceNotFound {
			msg = "Resource not found"
		}
		return res, &jsonrpc.Error{Code: je.Code, Message: msg}
	}
}

// Plural is n with noun, in the plural unless n is 1.
func Plural(n int, noun, nouns string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %s", n, nouns)
}
