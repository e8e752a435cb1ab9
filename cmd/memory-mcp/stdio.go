package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
// are not JSON-RPC are answered with an error and dropped, the rest go on.
// When in ends, it waits for answers to requests already received.
func serveStdio(ctx context.Context, s *mcp.Server, in io.Reader, out io.Writer, log *slog.Logger) error {
	pr, pw := io.Pipe()
	w := &frameWriter{w: out, pending: map[string]bool{}}
	go func() {
		err := filterLines(in, pw, w, log)
		w.drain(10 * time.Second)
		pw.CloseWithError(err)
	}()
	err := s.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: w})
	pr.Close()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return err
}

func filterLines(in io.Reader, pw io.Writer, w *frameWriter, log *slog.Logger) error {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > maxLine+1 {
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			log.Warn("dropped an input line over the size limit", "limit", maxLine)
			w.errorReply(nil, -32600, "Invalid Request: message larger than 16 MiB")
		} else if werr := forward(bytes.TrimRight(line, "\r\n"), pw, w, log); werr != nil {
			return werr
		}
		line, tooLong = line[:0], false
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func forward(line []byte, pw io.Writer, w *frameWriter, log *slog.Logger) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	if !utf8.Valid(line) || !json.Valid(line) {
		log.Warn("dropped an input line that is not JSON", "bytes", len(line))
		w.errorReply(nil, -32700, "Parse error")
		return nil
	}
	// Member names are matched exactly, as the SDK's decoder does: a struct
	// would match "ID" or "Method" too, and let through a line the SDK then
	// reads as something else.
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		log.Warn("dropped an input line that is not a JSON-RPC object", "bytes", len(line))
		w.errorReply(nil, -32600, "Invalid Request: want one JSON-RPC 2.0 object per line")
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
		w.errorReply(id, -32600, "Invalid Request")
		return nil
	}
	// The SDK's decoder is stricter than encoding/json (it caps nesting at
	// 1,000 levels and wants an error member to be an object), and a line
	// it cannot decode ends the whole session (go-sdk#1209). Decode with it
	// here, so such a line is answered and dropped instead. A plain request
	// needs no trial: it passes whatever its params hold, and a trial
	// allocates two 32 KiB buffers, most of a small call's garbage.
	if !plainRequest(obj, line) {
		if _, err := jsonrpc.DecodeMessage(line); err != nil {
			log.Warn("dropped an input line the protocol decoder refuses", "bytes", len(line))
			w.errorReply(id, -32600, "Invalid Request")
			return nil
		}
	}
	// The SDK reads a line with a method as a request, and answers it if
	// its id is not null.
	if hasMethod && hasID && string(id) != "null" {
		w.expect(id)
	}
	// line aliases the reader's buffer only until the next read; the pipe
	// write completes before that.
	if _, err := pw.Write(append(line, '\n')); err != nil {
		return err
	}
	return nil
}

// plainRequest reports whether the SDK's decoder surely takes line, a
// valid JSON-RPC 2.0 object whose members are obj and whose id is valid:
// its method is a string, it has no error member, and it nests no deeper
// than the decoder allows.
func plainRequest(obj map[string]json.RawMessage, line []byte) bool {
	m := obj["method"]
	if len(m) == 0 || m[0] != '"' {
		return false
	}
	if _, ok := obj["error"]; ok {
		return false
	}
	return depthAtMost(line, sdkMaxDepth)
}

// sdkMaxDepth is the deepest nesting the SDK's decoder accepts.
const sdkMaxDepth = 1000

// depthAtMost reports whether the objects and arrays of the valid JSON in
// b nest at most max levels deep.
func depthAtMost(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
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

// maxExactID is the largest integer id the SDK answers with unchanged: it
// reads numbers as float64.
const maxExactID = 1 << 53

// validID holds for the ids JSON-RPC allows, a string, a number or null,
// that the SDK echoes faithfully: a number must be written as a whole
// number within ±2^53, or the answer would carry another id and the caller
// would wait for ever.
func validID(raw json.RawMessage) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
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

// envelope is just enough of an outgoing JSON-RPC message to tell an
// answer from a request.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
}

// frameWriter serialises every frame written to stdout, the SDK's and the
// filter's own, and tracks which requests still await an answer.
type frameWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending map[string]bool
	idle    chan struct{}
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := answerID(p); ok {
		delete(f.pending, canonicalID(id))
		if len(f.pending) == 0 && f.idle != nil {
			close(f.idle)
			f.idle = nil
		}
	}
	return f.w.Write(p)
}

func (f *frameWriter) Close() error { return nil }

// answerPrefix is how the SDK starts every message it writes: its members
// come in a fixed order, jsonrpc then id.
const answerPrefix = `{"jsonrpc":"2.0","id":`

// answerID returns the id of p if p is an answer (a result or an error)
// with one. The SDK's own frames are told apart by their first members,
// without reading the result that follows; any other frame is decoded.
func answerID(p []byte) (json.RawMessage, bool) {
	if rest, ok := bytes.CutPrefix(p, []byte(answerPrefix)); ok {
		if n := idLen(rest); n > 0 {
			next := rest[n:]
			switch {
			case bytes.HasPrefix(next, []byte(`,"result":`)), bytes.HasPrefix(next, []byte(`,"error":`)):
				return json.RawMessage(rest[:n]), true
			case bytes.HasPrefix(next, []byte(`,"method":`)):
				return nil, false
			}
		}
	}
	var env envelope
	if json.Unmarshal(bytes.TrimSpace(p), &env) == nil && env.Method == nil && len(env.ID) > 0 {
		return env.ID, true
	}
	return nil, false
}

// idLen is the length of the plain string or number id at the start of p,
// or 0 if it is neither (escapes and other forms take the slow path).
func idLen(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	if p[0] == '"' {
		for i := 1; i < len(p); i++ {
			switch p[i] {
			case '"':
				return i + 1
			case '\\':
				return 0
			}
			if p[i] < 0x20 {
				return 0
			}
		}
		return 0
	}
	i := 0
	for i < len(p) && (p[i] == '-' || p[i] >= '0' && p[i] <= '9') {
		i++
	}
	return i
}

func (f *frameWriter) expect(id json.RawMessage) {
	f.mu.Lock()
	f.pending[canonicalID(id)] = true
	f.mu.Unlock()
}

// drain waits until every request received has been answered, or timeout.
func (f *frameWriter) drain(timeout time.Duration) {
	f.mu.Lock()
	if len(f.pending) == 0 {
		f.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	f.idle = ch
	f.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
	}
}

func canonicalID(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (f *frameWriter) errorReply(id json.RawMessage, code int, msg string) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.Write(append(b, '\n'))
}
