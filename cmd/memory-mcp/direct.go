package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// directCalls answers the plain tools/call requests of a stdio session
// itself, through the same middleware and tool handlers the SDK would call,
// and writes the same answer the SDK would write. The SDK's own path
// decodes each request again, checks its _meta, and encodes the answer
// twice: for a read by key that was half the server's CPU.
//
// Only a call the SDK would surely handle the same way is taken: a request
// with an id, method tools/call, params holding a name that is one of our
// tools, arguments that are absent or an object, and either no _meta, in
// a session the SDK has initialized, or a _meta byte for byte the same as
// one on an earlier call the SDK answered with a result. Whether the SDK
// accepts a _meta depends on nothing else (it validates the client's
// information and capabilities in it and the protocol version it names),
// and a client sends the same one on every call; one carrying anything
// that changes per call, like a progress token, always goes to the SDK.
type directCalls struct {
	srv     *mcp.Server
	impl    *mcp.Implementation
	handler mcp.MethodHandler // our receiving middleware around the tools
	tools   map[string]mcp.ToolHandler
	ctx     context.Context // the session's; ends when the server stops

	session atomic.Pointer[mcp.ServerSession]

	taken atomic.Int64 // calls answered here

	work  chan func()  // to a worker waiting for a call
	idle  atomic.Int32 // workers waiting
	calls atomic.Int64 // calls running (see wait)

	mu       sync.Mutex
	running  map[string]context.CancelCauseFunc // by canonical id
	metas    map[string]bool                    // accepted _meta values: whether each selects the newer protocol
	watching map[string]string                  // _meta of calls left to the SDK, by canonical id
}

// multiRoundTripVersion is the first protocol version whose results the
// SDK marks as complete, and which a call can select in its _meta.
const multiRoundTripVersion = "2026-07-28"

// maxWatched bounds the calls whose _meta is remembered until answered,
// and maxMetas the accepted _meta values kept: a client that puts
// something new in every call's _meta (a progress token) gains nothing
// from them and must not grow them.
const (
	maxWatched = 64
	maxMetas   = 16
)

func newDirectCalls(ctx context.Context, srv *server) *directCalls {
	return &directCalls{srv: srv.mcp, impl: srv.impl, handler: srv.toolHandler(), tools: srv.tools, ctx: ctx,
		work: make(chan func()), running: map[string]context.CancelCauseFunc{}, metas: map[string]bool{}, watching: map[string]string{}}
}

// sessionVersion is the protocol version of the session the SDK has
// initialized, or "" before then.
func (d *directCalls) sessionVersion() (*mcp.ServerSession, string) {
	ss := d.session.Load()
	if ss == nil {
		for s := range d.srv.Sessions() {
			ss = s
			break
		}
		if ss == nil {
			return nil, ""
		}
		d.session.Store(ss)
	}
	if p := ss.InitializeParams(); p != nil {
		return ss, p.ProtocolVersion
	}
	return ss, ""
}

// callParams are the members of a plain tools/call's params.
func callParams(params json.RawMessage) (name string, args, meta json.RawMessage, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return "", nil, nil, false
	}
	for k := range m {
		if k != "name" && k != "arguments" && k != "_meta" {
			return "", nil, nil, false
		}
	}
	raw, ok := m["name"]
	if !ok || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &name) != nil {
		return "", nil, nil, false
	}
	if a, has := m["arguments"]; has {
		if len(a) == 0 || a[0] != '{' {
			return "", nil, nil, false
		}
		args = a
	}
	if mt, has := m["_meta"]; has {
		if len(mt) == 0 || mt[0] != '{' {
			return "", nil, nil, false
		}
		meta = mt
	}
	return name, args, meta, true
}

// take takes req, a plain request whose raw id is id, if it is a call it
// handles, and sets c.taken to answer it; it reports false to leave req to
// the SDK.
func (d *directCalls) take(c *stdioConn, req *jsonrpc.Request, id json.RawMessage) bool {
	if req.Method != "tools/call" || !req.ID.IsValid() {
		return false
	}
	name, args, meta, ok := callParams(req.Params)
	if !ok || d.tools[name] == nil {
		return false
	}
	ss, version := d.sessionVersion()
	if ss == nil || version == "" {
		return false
	}
	key := canonicalID(id)
	newer := false
	if meta != nil {
		d.mu.Lock()
		newer, ok = d.metas[string(meta)]
		// A call already watched under this id may still be running: a
		// duplicate of it, which the SDK drops, must not take its place
		// and be vouched for by the first call's answer.
		if _, busy := d.watching[key]; !ok && !busy && len(d.watching) < maxWatched {
			d.watching[key] = string(meta)
		}
		d.mu.Unlock()
		if !ok {
			return false
		}
	}
	c.mu.Lock()
	if c.pending[key] {
		// An id still in use: the SDK refuses the call if the earlier one
		// is its own, and duplicate does if it is ours.
		c.mu.Unlock()
		return false
	}
	c.pending[key] = true
	c.mu.Unlock()
	d.taken.Add(1)
	ctx, cancel := context.WithCancelCause(d.ctx)
	d.mu.Lock()
	d.running[key] = cancel
	d.mu.Unlock()
	r := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args}}
	// In a session of the newer protocol, the SDK marks the result a tool
	// returned complete; a call selecting that protocol gets the server's
	// name in the _meta of its result.
	var mark resultMark
	if version >= multiRoundTripVersion {
		ctx = context.WithValue(ctx, resultMark{}, &mark)
	}
	c.taken = d.counted(func() {
		res, err := d.handler(ctx, "tools/call", r)
		// As the SDK does, the call stops being cancellable before its
		// answer goes out, so the id may be used again at once.
		d.mu.Lock()
		delete(d.running, key)
		d.mu.Unlock()
		cancel(nil)
		tr, _ := res.(*mcp.CallToolResult)
		if tr != nil && err == nil && newer {
			if tr.Meta == nil {
				tr.Meta = mcp.Meta{}
			}
			if _, ok := tr.Meta[mcp.MetaKeyServerInfo]; !ok {
				tr.Meta[mcp.MetaKeyServerInfo] = d.impl
			}
		}
		frame, ferr := answerFrame(req.ID, res, err, tr != nil && tr == mark.res)
		if ferr != nil {
			frame, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID,
				Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("internal error: %v", ferr)}})
		}
		c.writeAnswer(req.ID, frame)
	})
	return true
}

// maxIdle is how many workers wait for calls at most.
const maxIdle = 4

// counted returns call counted among the calls running (see wait) from
// now until it returns.
func (d *directCalls) counted(call func()) func() {
	d.calls.Add(1)
	return func() {
		defer d.calls.Add(-1)
		call()
	}
}

// dispatch runs f on a worker: one waiting for work if there is one, else
// a new one. A worker keeps its stack from call to call, where a goroutine
// per call grew a new one each time, step by step, to the depth of the
// argument's schema validation. The reading of the input goes from worker
// to worker too (see lineFilter.run).
func (d *directCalls) dispatch(f func()) {
	select {
	case d.work <- f:
	default:
		go d.worker(f)
	}
}

// worker runs f, then the calls it is handed, until more than maxIdle
// workers are waiting or the session ends.
func (d *directCalls) worker(f func()) {
	for {
		f()
		if d.idle.Add(1) > maxIdle {
			d.idle.Add(-1)
			return
		}
		select {
		case f = <-d.work:
			d.idle.Add(-1)
		case <-d.ctx.Done():
			d.idle.Add(-1)
			return
		}
	}
}

// wait waits up to timeout for the calls still running, so that the store
// is not closed under one; it reports whether they all ended.
func (d *directCalls) wait(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); d.calls.Load() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// answered notes that the SDK answered the call with id, with a result or
// not: a _meta the SDK took once it takes always.
func (d *directCalls) answered(id jsonrpc.ID, result bool) {
	key := idKey(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	meta, ok := d.watching[key]
	if !ok {
		return
	}
	delete(d.watching, key)
	if !result {
		return
	}
	var m map[string]any
	if json.Unmarshal([]byte(meta), &m) != nil {
		return
	}
	if len(d.metas) >= maxMetas {
		return
	}
	v, _ := m[mcp.MetaKeyProtocolVersion].(string)
	d.metas[meta] = v >= multiRoundTripVersion
}

// duplicate drops a request whose id a call of ours still uses, as the
// SDK drops, unanswered, one whose id one of its own calls still uses; it
// reports false if no call of ours uses the id.
func (d *directCalls) duplicate(req *jsonrpc.Request, id json.RawMessage) bool {
	if !req.ID.IsValid() {
		return false
	}
	d.mu.Lock()
	_, busy := d.running[canonicalID(id)]
	d.mu.Unlock()
	return busy
}

// cancelled cancels the call of ours that a notifications/cancelled names.
// The notification goes on to the SDK too, which ignores ids it does not
// know.
func (d *directCalls) cancelled(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	raw, err := json.Marshal(id.Raw())
	if err != nil {
		return
	}
	d.mu.Lock()
	cancel := d.running[canonicalID(raw)]
	d.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
}

// answerFrame is the frame the SDK writes for a call with id answered by
// res or err: the result encoded as its connection encodes results
// (encoding/json, no HTML escaping), inside the JSON-RPC envelope.
//
// A result marked complete ends with its result type, as the SDK's
// encoding of a CallToolResult puts it after every other member.
func answerFrame(id jsonrpc.ID, res mcp.Result, err error, complete bool) ([]byte, error) {
	if err != nil || res == nil {
		if err == nil {
			err = fmt.Errorf("tools/call returned no result")
		}
		return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: err})
	}
	var b bytes.Buffer
	if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil {
		// Room for the answer and the line's end: growing to it step by
		// step cost a read a kilobyte of copies.
		n := 128
		if sc, ok := tr.StructuredContent.(compactJSON); ok {
			n += len(sc)
		}
		for _, c := range tr.Content {
			if t, ok := c.(*mcp.TextContent); ok && t != nil {
				n += len(t.Text) + len(t.Text)/8
			}
		}
		b.Grow(n)
	}
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(id.Raw()); err != nil {
		return nil, err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	b.WriteString(`,"result":`)
	if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil && appendToolResult(&b, tr) {
		// written as the SDK would
	} else if ok && tr != nil {
		// What the encoder writes for a json.Marshaler is its output,
		// compacted: json.Marshal's output is compact already.
		data, err := tr.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b.Write(data)
	} else {
		if err := enc.Encode(res); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1)
	}
	if complete && b.Len() > 0 && b.Bytes()[b.Len()-1] == '}' {
		b.Truncate(b.Len() - 1)
		if b.Bytes()[b.Len()-1] != '{' {
			b.WriteByte(',')
		}
		b.WriteString(`"resultType":"complete"}`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// resultMark holds the result a tool returned, which the SDK marks
// complete in a session of the newer protocol; a result that a middleware
// made instead, like the recoverer's, is not.
type resultMark struct{ res *mcp.CallToolResult }

// compactJSON is structured content that json.Marshal made: compact, with
// HTML's characters escaped, so it goes out as it is. The SDK compacts and
// escapes what a json.Marshaler returns, which leaves it unchanged, but it
// scans it byte by byte to do so; answerFrame copies it.
type compactJSON []byte

// MarshalJSON returns c itself.
func (c compactJSON) MarshalJSON() ([]byte, error) { return c, nil }

// appendToolResult writes the plain tool result tr to b as the SDK's
// MarshalJSON would, and reports whether it did: tr has text content
// only, no input requests, request state or result type, and structured content
// (if any) that is compactJSON. The text is escaped as json.Marshal
// escapes it in the SDK.
func appendToolResult(b *bytes.Buffer, tr *mcp.CallToolResult) bool {
	sc, ok := tr.StructuredContent.(compactJSON)
	if !ok && tr.StructuredContent != nil || tr.InputRequests != nil || tr.RequestState != "" || tr.Content == nil {
		return false
	}
	if reflect.ValueOf(tr).Elem().FieldByName("resultType").String() != "" {
		return false
	}
	for _, c := range tr.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t == nil || t.Meta != nil || t.Annotations != nil {
			return false
		}
	}
	start := b.Len()
	b.WriteByte('{')
	if len(tr.Meta) > 0 {
		meta, err := json.Marshal(tr.Meta)
		if err != nil {
			b.Truncate(start)
			return false
		}
		b.WriteString(`"_meta":`)
		b.Write(meta)
		b.WriteByte(',')
	}
	b.WriteString(`"content":[`)
	// An Encoder escapes as json.Marshal does, straight into b.
	enc := json.NewEncoder(b)
	for i, c := range tr.Content {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":`)
		if err := enc.Encode(c.(*mcp.TextContent).Text); err != nil {
			b.Truncate(start) // not reached: a string always encodes
			return false
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if sc != nil {
		b.WriteString(`,"structuredContent":`)
		b.Write(sc)
	}
	if tr.IsError {
		b.WriteString(`,"isError":true`)
	}
	b.WriteByte('}')
	return true
}

// toolHandler is what the SDK runs for a tools/call of one of our tools:
// the receiving middleware around the SDK's own step, which finds the
// tool, calls it, and turns a result without content into one with an
// empty list.
func (srv *server) toolHandler() mcp.MethodHandler {
	var h mcp.MethodHandler = func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		r := req.(*mcp.CallToolRequest)
		res, err := srv.tools[r.Params.Name](ctx, r)
		if err == nil && res != nil && res.Content == nil {
			res2 := *res
			res2.Content = []mcp.Content{}
			res = &res2
		}
		if m, ok := ctx.Value(resultMark{}).(*resultMark); ok && err == nil && res != nil {
			m.res = res
		}
		return res, err
	}
	for i := len(srv.middleware) - 1; i >= 0; i-- {
		h = srv.middleware[i](h)
	}
	return h
}
