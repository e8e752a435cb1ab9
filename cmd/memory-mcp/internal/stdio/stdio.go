// Package stdio serves an MCP server over a process's standard input and
// output, one JSON-RPC message a line. It reads the lines itself, so that
// one the SDK cannot decode is answered with an error rather than ending
// the session. It imports the MCP SDK only.
package stdio

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

// maxLine is the longest input line passed on; longer ones are answered
// with an error and skipped.
const maxLine = 16 << 20

// drainTimeout bounds the wait, once the input has ended, for answers to
// the requests it brought.
const drainTimeout = 10 * time.Second

// Serve serves s over in and out until in ends.
//
// The SDK would read in itself, but one line it cannot decode ends its
// session without an answer (go-sdk#1209). So the lines are read here: one
// that is not a JSON-RPC message the SDK takes is answered with an error
// and dropped, and the rest go on through a pipe to mcp.IOTransport. The
// SDK cancels the requests still running when its input ends, so the pipe
// is closed only once every request passed on has been answered.
func Serve(ctx context.Context, s *mcp.Server, in io.Reader, out io.Writer, log *slog.Logger) error {
	w := &frameWriter{out: out}
	pr, pw := io.Pipe()
	go func() {
		err := filterLines(in, pw, w, log)
		w.drain(drainTimeout)
		pw.CloseWithError(err)
	}()
	err := s.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: -1})
	pr.Close() // if the SDK stopped first, the filter stops at its next line
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // stopped by a signal, which is no error
	}
	return err
}

// filterLines passes the lines of in that the SDK can take on to pw, and
// answers the others, until in ends or pw is closed.
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
			w.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: message larger than 16 MiB")
		} else if werr := forward(line, pw, w, log); werr != nil {
			return werr
		}
		line, tooLong = line[:0], false
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// forward passes one line on to pw if the SDK's decoder takes it, and
// answers it with an error otherwise. It fails only if pw does.
func forward(line []byte, pw io.Writer, w *frameWriter, log *slog.Logger) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	// A map, not a struct: member names match exactly, as in the SDK's
	// decoder.
	var obj map[string]json.RawMessage
	err := json.Unmarshal(line, &obj)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) || !utf8.Valid(line) {
		log.Warn("dropped an input line that is not JSON", "bytes", len(line))
		w.reply(nil, jsonrpc.CodeParseError, "Parse error")
		return nil
	}
	if err != nil || obj == nil {
		log.Warn("dropped an input line that is not a JSON-RPC object", "bytes", len(line))
		w.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: want one JSON-RPC 2.0 object per line")
		return nil
	}
	id, hasID := obj["id"]
	if hasID && !validID(id) {
		log.Warn("dropped a request with an id it could not be answered by", "bytes", len(line))
		w.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an id must be a string, or a whole number within ±2^53")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		log.Warn("dropped an input line the protocol decoder refuses", "bytes", len(line))
		w.reply(id, jsonrpc.CodeInvalidRequest, "Invalid Request")
		return nil
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		w.expect()
	}
	_, err = pw.Write(append(line, '\n'))
	return err
}

// maxExactID is the largest integer id the SDK answers with unchanged: it
// reads numbers as float64.
const maxExactID = 1 << 53

// validID holds for the ids the SDK echoes faithfully: a string, null, or
// a number written as a whole number within ±2^53. Any other would come
// back as another id, and its caller would wait for ever.
func validID(raw json.RawMessage) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
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

// frameWriter writes the frames of stdout, the SDK's and the filter's own
// answers, one at a time, and counts the requests passed to the SDK that
// it has yet to answer.
type frameWriter struct {
	mu      sync.Mutex
	out     io.Writer
	pending int           // requests passed on and not yet answered
	idle    chan struct{} // closed when pending reaches 0, while drain waits
}

// Write writes one frame of the SDK's.
//
// JSON-RPC has no error code 0, which is what the SDK sends for an error
// that carries none, such as its refusal of a request before initialize
// or of a second initialize. Such an error goes out as Invalid Request.
func (w *frameWriter) Write(frame []byte) (int, error) {
	n := len(frame)
	var head struct {
		Method json.RawMessage `json:"method"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(frame, &head)
	answer := head.Method == nil
	if head.Error != nil && head.Error.Code == 0 {
		if r, ok := decodeResponse(frame); ok {
			r.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: r.Error.Error()}
			if b, err := jsonrpc.EncodeMessage(r); err == nil {
				frame = append(b, '\n')
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.out.Write(frame)
	if answer {
		w.pending--
		if w.pending <= 0 && w.idle != nil {
			close(w.idle)
			w.idle = nil
		}
	}
	return n, err
}

func decodeResponse(frame []byte) (*jsonrpc.Response, bool) {
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(frame))
	r, ok := msg.(*jsonrpc.Response)
	return r, err == nil && ok && r.Error != nil
}

// Close leaves stdout open: the process's, not the session's.
func (w *frameWriter) Close() error { return nil }

// expect counts one more request passed on.
func (w *frameWriter) expect() {
	w.mu.Lock()
	w.pending++
	w.mu.Unlock()
}

// drain waits until every request passed on has been answered, or timeout.
func (w *frameWriter) drain(timeout time.Duration) {
	w.mu.Lock()
	if w.pending <= 0 {
		w.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	w.idle = idle
	w.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(timeout):
	}
}

// reply writes the filter's own error answer to a line, with id (null if
// none).
func (w *frameWriter) reply(id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(append(b, '\n'))
}
