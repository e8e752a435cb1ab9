package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine is the longest input line accepted; longer ones are answered
// with an error and skipped.
const maxLine = 16 << 20

// serveStdio runs s over in and out. Input is read line by line here, not by
// the SDK, because one malformed line would end the SDK's session: lines that
// are not JSON-RPC are answered with an error and dropped, the rest go on,
// decoded already, so the SDK does not parse them again. When in ends, it
// waits for answers to requests already received. Plain calls of our
// tools are answered here, without the SDK (see directCalls).
func serveStdio(ctx context.Context, srv *server, in io.Reader, out io.Writer, log *slog.Logger) error {
	c := newStdioConn(out)
	c.direct = newDirectCalls(ctx, srv)
	err := serveConn(ctx, srv.mcp, c, in, log)
	// The SDK's Run waits for its own handlers; calls answered here are
	// waited for too, past the drain if one outlived it.
	if !c.direct.wait(5 * time.Second) {
		log.Warn("stopping with tool calls still running")
		if err == nil {
			err = errors.New("stopped with tool calls still running after 5 s")
		}
	}
	return err
}

// serveConn is serveStdio on c, whose direct calls, if any, are set.
func serveConn(ctx context.Context, s *mcp.Server, c *stdioConn, in io.Reader, log *slog.Logger) error {
	go filterLines(in, c, log, func(err error) {
		c.drain(10 * time.Second)
		c.end(err)
	})
	err := s.Run(ctx, c)
	c.Close()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // stopped by a signal, which is no error
	}
	return err
}

// filterLines reads in line by line and forwards each line (see forward),
// then calls done once, when in ends, with why (nil at its end).
func filterLines(in io.Reader, c *stdioConn, log *slog.Logger, done func(error)) {
	f := &lineFilter{r: bufio.NewReaderSize(in, 64<<10), c: c, log: log, done: done}
	f.run()
}

// lineFilter is the reading of one input. One goroutine at a time reads.
type lineFilter struct {
	r    *bufio.Reader
	line []byte
	c    *stdioConn
	log  *slog.Logger
	done func(error)
}

// run reads and forwards lines until the input ends, or until a line
// brings a tool call to answer here: then it hands the reading on to a
// worker and answers the call itself, at once. Handing the call to a
// worker instead made every call wait for that worker to be scheduled.
func (f *lineFilter) run() {
	tooLong := false
	for {
		if f.r.Buffered() == 0 {
			// What the last line readied runs before a read that may
			// block, and keep the one processor while it waits, where
			// the input is not polled (see pollable).
			runtime.Gosched()
		}
		chunk, err := f.r.ReadSlice('\n')
		if !tooLong && len(f.line)+len(chunk) > maxLine+1 {
			tooLong, f.line = true, nil
		}
		if !tooLong {
			f.line = append(f.line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			f.log.Warn("dropped an input line over the size limit", "limit", maxLine)
			f.c.errorReply(nil, -32600, "Invalid Request: message larger than 16 MiB")
		} else if werr := forward(bytes.TrimRight(f.line, "\r\n"), f.c, f.log); werr != nil {
			f.c.runTaken()
			f.done(werr)
			return
		}
		f.line, tooLong = f.line[:0], false
		if err != nil {
			f.c.runTaken()
			if errors.Is(err, io.EOF) {
				err = nil
			}
			f.done(err)
			return
		}
		if call := f.c.taken; call != nil {
			f.c.taken = nil
			f.c.direct.dispatch(f.run)
			call()
			return
		}
	}
}

// forward checks one line and hands the message in it to the SDK. Nothing
// handed on aliases line, which the next read overwrites.
func forward(line []byte, c *stdioConn, log *slog.Logger) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	// Member names are matched exactly, as the SDK's decoder does: a struct
	// would match "ID" or "Method" too, and let through a line the SDK then
	// reads as something else. Unmarshal checks the whole line is JSON
	// before it decodes any of it, and says so with a SyntaxError.
	var obj map[string]json.RawMessage
	err := json.Unmarshal(line, &obj)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) || !utf8.Valid(line) {
		log.Warn("dropped an input line that is not JSON", "bytes", len(line))
		c.errorReply(nil, -32700, "Parse error")
		return nil
	}
	if err != nil || obj == nil {
		log.Warn("dropped an input line that is not a JSON-RPC object", "bytes", len(line))
		c.errorReply(nil, -32600, "Invalid Request: want one JSON-RPC 2.0 object per line")
		return nil
	}
	var version string
	json.Unmarshal(obj["jsonrpc"], &version)
	rawID, hasID := obj["id"]
	id := rawID
	if hasID && !validID(rawID) {
		id = nil
	}
	_, hasMethod := obj["method"]
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	if version != "2.0" || !(hasMethod || hasResult || hasError) || (hasID && id == nil) {
		log.Warn("dropped an input line that is not JSON-RPC 2.0", "bytes", len(line))
		c.errorReply(id, -32600, "Invalid Request")
		return nil
	}
	var msg jsonrpc.Message
	if req, ok := plainMessage(obj, line); ok {
		if c.direct != nil {
			if c.direct.take(c, req, id) {
				return nil
			}
			if req.Method == "notifications/cancelled" {
				c.direct.cancelled(req.Params)
			}
		}
		msg = req
	} else {
		// The SDK's decoder is stricter than encoding/json (it caps nesting
		// at 1,000 levels and wants an error member to be an object), and a
		// message it cannot decode ends the whole session (go-sdk#1209).
		// Anything but a plain request is decoded with it here, so such a
		// line is answered and dropped instead.
		var err error
		if msg, err = jsonrpc.DecodeMessage(bytes.Clone(line)); err != nil {
			log.Warn("dropped an input line the protocol decoder refuses", "bytes", len(line))
			c.errorReply(id, -32600, "Invalid Request")
			return nil
		}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		if c.direct != nil && c.direct.duplicate(req, id) {
			log.Warn("dropped a request whose id a call still running uses", "method", req.Method)
			return nil
		}
		c.expect(id)
	}
	return c.deliver(msg)
}

// plainMessage builds the request in line, whose members are obj, when the
// SDK's decoder surely reads it the same way: a JSON-RPC 2.0 object with a
// valid id (both checked already), a method that is a string without
// escapes, params that are absent or an object, no error member, and no
// nesting deeper than the decoder allows.
func plainMessage(obj map[string]json.RawMessage, line []byte) (*jsonrpc.Request, bool) {
	m := obj["method"]
	if len(m) < 2 || m[0] != '"' || bytes.IndexByte(m, '\\') >= 0 {
		return nil, false
	}
	if _, ok := obj["error"]; ok {
		return nil, false
	}
	params, hasParams := obj["params"]
	if hasParams && (len(params) == 0 || params[0] != '{') {
		return nil, false
	}
	if !depthAtMost(line, sdkMaxDepth) {
		return nil, false
	}
	req := &jsonrpc.Request{Method: string(m[1 : len(m)-1]), Params: params}
	if raw, ok := obj["id"]; ok && string(raw) != "null" {
		v, ok := decodeID(raw)
		if !ok {
			return nil, false
		}
		// As the SDK does: a number as a float64 (validID allows only
		// those it holds exactly), then an integer.
		var err error
		switch v := v.(type) {
		case string:
			req.ID, err = jsonrpc.MakeID(v)
		case json.Number:
			var n int64
			if n, err = strconv.ParseInt(string(v), 10, 64); err == nil {
				req.ID, err = jsonrpc.MakeID(float64(n))
			}
		default:
			return nil, false
		}
		if err != nil {
			return nil, false
		}
	}
	return req, true
}

// sdkMaxDepth is the deepest nesting the SDK's decoder accepts.
const sdkMaxDepth = 1000

// depthAtMost reports whether the objects and arrays of the valid JSON in
// b nest at most max levels deep.
func depthAtMost(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
		case '{', '[':
			if depth++; depth > max {
				return false
			}
		case '}', ']':
			depth--
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

// maxExactID is the largest integer id the SDK answers with unchanged: it
// reads numbers as float64.
const maxExactID = 1 << 53

// validID holds for the ids JSON-RPC allows, a string, a number or null,
// that the SDK echoes faithfully: a number must be written as a whole
// number within ±2^53, or the answer would carry another id and the caller
// would wait for ever.
func validID(raw json.RawMessage) bool {
	v, ok := decodeID(raw)
	if !ok {
		return false
	}
	switch v := v.(type) {
	case string, nil:
		return true
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return err == nil && n <= maxExactID && n >= -maxExactID
	}
	return false
}

// stdioConn is the SDK's connection over stdin and stdout: messages come
// from the line filter, decoded; every frame written to stdout, the SDK's
// and the filter's own, goes through it one at a time, and it tracks which
// requests still await an answer.
type stdioConn struct {
	mu      sync.Mutex
	out     io.Writer
	pending map[string]bool
	idle    chan struct{}

	direct *directCalls // answers plain tool calls; nil to leave all to the SDK
	taken  func()       // the call the line just read brought, for the reader to answer

	in     chan jsonrpc.Message
	ended  chan struct{} // closed when the input is over
	endErr error         // why, nil at its end
	closed chan struct{}
	once   sync.Once
}

func newStdioConn(out io.Writer) *stdioConn {
	return &stdioConn{out: out, pending: map[string]bool{}, in: make(chan jsonrpc.Message),
		ended: make(chan struct{}), closed: make(chan struct{})}
}

// Connect makes c its own transport: a stdio server has one session.
func (c *stdioConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// deliver hands msg to the SDK's reader.
func (c *stdioConn) deliver(msg jsonrpc.Message) error {
	select {
	case c.in <- msg:
		return nil
	case <-c.closed:
		return io.ErrClosedPipe
	}
}

// end tells the reader that no more messages come, and why: err, or the
// end of the input if nil.
func (c *stdioConn) end(err error) {
	if err == nil {
		err = io.EOF
	}
	c.endErr = err
	close(c.ended)
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msg := <-c.in:
		return msg, nil
	case <-c.ended:
		return nil, c.endErr
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := msg.(*jsonrpc.Response); ok && r.ID.IsValid() {
		c.settle(r.ID)
		if c.direct != nil {
			c.direct.answered(r.ID, r.Error == nil)
		}
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

// runTaken answers on a worker the call the line just read brought, if
// any: the reader has more to do first.
func (c *stdioConn) runTaken() {
	if c.taken != nil {
		c.direct.dispatch(c.taken)
		c.taken = nil
	}
}

// writeAnswer writes frame, the answer to the request with id, and
// settles that request.
func (c *stdioConn) writeAnswer(id jsonrpc.ID, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id.IsValid() {
		c.settle(id)
	}
	c.out.Write(append(frame, '\n'))
}

func (c *stdioConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *stdioConn) SessionID() string { return "" }

// settle marks the request with id answered. c.mu must be held.
func (c *stdioConn) settle(id jsonrpc.ID) {
	delete(c.pending, idKey(id))
	if len(c.pending) == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

func (c *stdioConn) expect(id json.RawMessage) {
	c.mu.Lock()
	c.pending[canonicalID(id)] = true
	c.mu.Unlock()
}

// drain waits until every request received has been answered, or timeout.
func (c *stdioConn) drain(timeout time.Duration) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	c.idle = ch
	c.mu.Unlock()
	select {
	case <-ch:
		// The last answer settled its request before writing itself, with
		// c.mu held: it is written once c.mu is free, and not before, or
		// the output could be closed under it.
		c.mu.Lock()
		c.mu.Unlock()
	case <-time.After(timeout):
	}
}

// decodeID decodes raw, a member's value from a line that is valid JSON,
// as a json.Decoder using numbers would, when it is a string, a number or
// null (a number is its own text); anything else, no id JSON-RPC allows,
// it refuses. A Decoder cost a call 4 KiB of buffers.
func decodeID(raw json.RawMessage) (any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return s, true
	case c == '-' || c >= '0' && c <= '9':
		if !json.Valid(raw) {
			return nil, false
		}
		return json.Number(raw), true
	case string(raw) == "null":
		return nil, true
	}
	return nil, false
}

// canonicalID is the key by which the request with the raw id is known:
// the id decoded as the SDK decodes it and encoded again, so that 1, 1.0
// and 1e0 are one id.
func canonicalID(raw json.RawMessage) string {
	if plainID(raw) {
		return string(raw)
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// idKey is canonicalID of the id the SDK answers with.
func idKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case int64:
		if v >= 0 && v <= maxExactID {
			return strconv.FormatInt(v, 10)
		}
	case string:
		if b, _ := json.Marshal(v); plainID(b) {
			return string(b)
		}
	}
	b, _ := json.Marshal(id.Raw())
	return canonicalID(b)
}

// plainID reports whether raw is its own canonicalID: a whole number of
// at most 15 digits without leading zeros, which a float64 holds exactly
// and encodes the same, or a string of printable ASCII that encoding/json
// writes unescaped.
func plainID(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		if len(raw) < 2 || raw[len(raw)-1] != '"' {
			return false
		}
		for _, c := range raw[1 : len(raw)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	if len(raw) > 15 || raw[0] == '0' && len(raw) > 1 {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (c *stdioConn) errorReply(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Write(append(b, '\n'))
}
