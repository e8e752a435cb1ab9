package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
	"prom.codes/memory-mcp/memory"
)

// CaptureIn is memory_capture's arguments.
type CaptureIn struct {
	SessionID     string            `json:"session_id"`
	Plan          string            `json:"plan,omitempty"`
	Outcome       string            `json:"outcome,omitempty"`
	Statements    []string          `json:"statements,omitempty"`
	ToolSequences []memory.Sequence `json:"tool_sequences,omitempty"`
}

type factRow struct {
	Key        string  `json:"key"`
	Confidence float64 `json:"confidence"`
}

type procRow struct {
	Key      string `json:"key"`
	UseCount int64  `json:"use_count"`
}

// CaptureOut is what memory_capture returns.
type CaptureOut struct {
	Episode       RecordView       `json:"episode"`
	Replaced      bool             `json:"replaced"`
	FactsPromoted []factRow        `json:"facts_promoted"`
	FactsPending  []memory.Pending `json:"facts_pending"`
	Procedures    []procRow        `json:"procedures"`
	Refused       []memory.Refusal `json:"refused"`
}

func (srv *Server) addCaptureTool(s toolAdder) {
	addTool(s, &mcp.Tool{
		Name:  "memory_capture",
		Title: "Learn from a finished session",
		Description: `Call once at the end of a session to turn it into memory. plan and outcome become the session's episodic record (capturing the same session again replaces it). Each statement — a rule or preference the user stated, like "always run make lint before committing" — counts as one confirmation; once confirmed in 2 sessions it becomes a project fact, and further confirmations raise its confidence. Each successful tool sequence becomes a procedure; repeating one raises its use count. Items holding secrets are refused one by one; the rest is kept.
Example: {"session_id":"2026-05-01-fix-login","plan":"Fix the login redirect","outcome":"Fixed; added a test","statements":["Always run make lint before committing"],"tool_sequences":[{"name":"run tests","steps":["make build","make test"],"succeeded":true}]}`,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolp(false), OpenWorldHint: boolp(false)},
		InputSchema: schema.For[CaptureIn](func(p map[string]*jsonschema.Schema) {
			p["session_id"].Description = "the session's id; capturing it again replaces the earlier capture"
			p["plan"].Description = "what the session set out to do"
			p["outcome"].Description = "what came of it"
			p["statements"].Description = "durable rules or preferences stated in the session, one sentence each"
			p["tool_sequences"].Description = "tool calls run in order; steps are commands or tool names; only successful ones are learned"
		}),
	}, wrap(srv.capture))
}

func (srv *Server) capture(ctx context.Context, in CaptureIn) (string, CaptureOut, error) {
	if _, err := srv.sync(ctx); err != nil {
		return "", CaptureOut{}, err
	}
	res, err := srv.app.Capture(ctx, in.Capture())
	if err != nil {
		return "", CaptureOut{}, err
	}
	recs := append([]memory.Record{res.Episode}, res.Promoted...)
	srv.changed(ctx, append(recs, res.Procedures...)...)
	out := CaptureView(res)
	return CaptureText(out), out, nil
}

// Capture is the capture the tool's arguments describe.
func (in CaptureIn) Capture() memory.Capture {
	return memory.Capture{SessionID: in.SessionID, Plan: in.Plan, Outcome: in.Outcome, Statements: in.Statements, Sequences: in.ToolSequences}
}

// CaptureView is res as memory_capture returns it.
func CaptureView(res memory.CaptureResult) CaptureOut {
	out := CaptureOut{Episode: view(res.Episode), Replaced: res.Replaced, FactsPromoted: []factRow{},
		FactsPending: res.Pending, Procedures: []procRow{}, Refused: res.Refused}
	out.Episode.Body = ""
	if out.FactsPending == nil {
		out.FactsPending = []memory.Pending{}
	}
	if out.Refused == nil {
		out.Refused = []memory.Refusal{}
	}
	for _, r := range res.Promoted {
		out.FactsPromoted = append(out.FactsPromoted, factRow{Key: r.Key, Confidence: r.Confidence})
	}
	for _, r := range res.Procedures {
		out.Procedures = append(out.Procedures, procRow{Key: r.Key, UseCount: r.UseCount})
	}
	return out
}

// CaptureText is out as memory_capture's text says it.
func CaptureText(out CaptureOut) string {
	var b strings.Builder
	verb := "Captured"
	if out.Replaced {
		verb = "Re-captured"
	}
	fmt.Fprintf(&b, "%s session %q as episodic %q.\n", verb, out.Episode.SessionID, out.Episode.Key)
	for _, f := range out.FactsPromoted {
		fmt.Fprintf(&b, "- fact %s (confidence %.2f)\n", f.Key, f.Confidence)
	}
	for _, p := range out.FactsPending {
		fmt.Fprintf(&b, "- pending: %q (%d of %d sessions)\n", p.Statement, p.Confirmations, p.Needed)
	}
	for _, p := range out.Procedures {
		fmt.Fprintf(&b, "- procedure %s (used %s)\n", p.Key, Plural(int(p.UseCount), "time", "times"))
	}
	for _, r := range out.Refused {
		fmt.Fprintf(&b, "- refused %s: %s\n", r.Item, r.Reason)
	}
	return b.String()
}
