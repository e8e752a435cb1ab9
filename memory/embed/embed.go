// Package embed is a client for an OpenAI-compatible embeddings API: the
// one a user runs (Ollama, a llama.cpp server, LM Studio) or a hosted one.
// It POSTs {"model", "input": [...]} to <base URL>/embeddings and returns
// one vector per input, in order.
//
// Its errors name the endpoint and what went wrong, never the text sent
// or the key. A Worker embeds the records of a store's queue in the
// background with a Client; the store is a Queue to it, so this package
// imports only the standard library.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config says where the endpoint is and how to call it.
type Config struct {
	URL   string // base URL, like http://localhost:11434/v1
	Model string
	Key   string // sent as Authorization: Bearer when not empty

	// Batch is the most inputs sent in one request; default 32.
	Batch int
	// Timeout bounds one request; default 60 seconds (a local model may
	// take a while to load on its first call).
	Timeout time.Duration
	// HTTP is the client requests go through; nil means a client of its own.
	HTTP *http.Client
}

// Client calls one endpoint with one model. It is safe for concurrent use.
type Client struct {
	endpoint *url.URL
	shown    string // the endpoint as errors show it: no credentials, no query
	model    string
	key      string
	batch    int
	timeout  time.Duration
	http     *http.Client
}

// New checks cfg and returns a client. It makes no request. Errors: the
// URL is not an absolute http or https URL, or the model is empty.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("embeddings URL must be an absolute http or https URL, like http://localhost:11434/v1")
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("embeddings model is empty")
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/embeddings"
	u.RawPath = ""
	u.Fragment = ""
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	c := &Client{endpoint: u, shown: shown.String(), model: strings.TrimSpace(cfg.Model), key: cfg.Key,
		batch: cfg.Batch, timeout: cfg.Timeout, http: cfg.HTTP}
	if c.batch <= 0 {
		c.batch = 32
	}
	if c.timeout <= 0 {
		c.timeout = 60 * time.Second
	}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// A redirect is never followed: it would carry the texts, and the key
	// when the host looks alike, to an address the user did not name.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// Model is the model the client asks for.
func (c *Client) Model() string { return c.model }

// Endpoint is the URL requests go to, without credentials or query.
func (c *Client) Endpoint() string { return c.shown }

// Error is a failed call. Its text names the endpoint, the HTTP status and
// what the server said where that cannot hold the inputs; never the inputs
// or the key.
type Error struct {
	Endpoint string
	Status   int    // 0 when no HTTP answer came
	Detail   string // what went wrong
	// Unreachable is true when the endpoint did not answer, timed out,
	// was overloaded or failed on its side: trying again later may work.
	Unreachable bool
	// Timeout is true when no answer came in time.
	Timeout bool
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("embeddings endpoint %s: HTTP %d: %s", e.Endpoint, e.Status, e.Detail)
	}
	return fmt.Sprintf("embeddings endpoint %s: %s", e.Endpoint, e.Detail)
}

// Rejected reports whether the server refused the inputs themselves
// (HTTP 400, 413 or 422: too long for the model, say); the same request
// will fail again, a shorter one may not.
func (e *Error) Rejected() bool {
	return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusUnprocessableEntity
}

// InputFailure reports whether the server answered, but with a failure of
// its own (HTTP 500) or an answer that is not usable vectors: one input
// of the request may cause it, and the others sent alone may succeed.
func (e *Error) InputFailure() bool {
	return e.Status == http.StatusInternalServerError || e.Status == http.StatusOK
}

// Embed returns one vector per input, in the inputs' order, sending at most
// Config.Batch inputs per request. Every vector has the same length.
// Errors: *Error.
func (c *Client) Embed(ctx context.Context, inputs []string) ([][]float32, error) {
	out := make([][]float32, 0, len(inputs))
	for start := 0; start < len(inputs); start += c.batch {
		part := inputs[start:min(start+c.batch, len(inputs))]
		vs, err := c.call(ctx, part)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(vs[0]) != len(out[0]) {
			return nil, c.fail(0, false, "vectors of %d and %d dimensions for one model", len(out[0]), len(vs[0]))
		}
		out = append(out, vs...)
	}
	return out, nil
}

type request struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// MaxDims is the longest vector accepted; embedding models give from a
// few hundred to a few thousand dimensions.
const MaxDims = 16384

// maxResponse bounds what is read of an answer: 32 inputs of 4,096
// dimensions as JSON take about 3 MB.
const maxResponse = 64 << 20

func (c *Client) call(ctx context.Context, inputs []string) ([][]float32, error) {
	body, err := json.Marshal(request{Model: c.model, Input: inputs})
	if err != nil {
		return nil, c.fail(0, false, "encode request: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return nil, c.fail(0, false, "build request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		e := c.fail(0, true, "%s", describeTransport(ctx, err))
		e.Timeout = ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
		return nil, e
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, c.fail(resp.StatusCode, true, "read answer: %s", describeTransport(ctx, err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp.StatusCode, resp.Header, raw, inputs)
	}
	if len(raw) > maxResponse {
		return nil, c.fail(resp.StatusCode, false, "answer larger than %d MiB", maxResponse>>20)
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, c.fail(resp.StatusCode, false, "answer is not an embeddings response (%s); is the URL the API's base, like http://localhost:11434/v1?", jsonProblem(err))
	}
	if len(r.Data) != len(inputs) {
		return nil, c.fail(resp.StatusCode, false, "answer holds %d vectors for %d inputs", len(r.Data), len(inputs))
	}
	out := make([][]float32, len(inputs))
	for i, d := range r.Data {
		at := d.Index
		if at < 0 || at >= len(inputs) || out[at] != nil {
			return nil, c.fail(resp.StatusCode, false, "answer's vector %d has index %d", i, d.Index)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) > MaxDims {
			return nil, c.fail(resp.StatusCode, false, "answer's vector %d has %d dimensions (want 1 to %d)", i, len(d.Embedding), MaxDims)
		}
		v := make([]float32, len(d.Embedding))
		zero := true
		for j, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, c.fail(resp.StatusCode, false, "answer's vector %d is not finite", i)
			}
			v[j] = float32(x)
			if math.IsInf(float64(v[j]), 0) { // finite in JSON, too large for float32
				return nil, c.fail(resp.StatusCode, false, "answer's vector %d is not finite", i)
			}
			zero = zero && v[j] == 0
		}
		if zero { // no direction: similar to nothing, a query finds nothing
			return nil, c.fail(resp.StatusCode, false, "answer's vector %d is all zeros", i)
		}
		out[at] = v
	}
	for _, v := range out[1:] {
		if len(v) != len(out[0]) {
			return nil, c.fail(resp.StatusCode, false, "vectors of different dimensions in one answer")
		}
	}
	return out, nil
}

func (c *Client) fail(status int, unreachable bool, format string, args ...any) *Error {
	return &Error{Endpoint: c.shown, Status: status, Detail: c.scrub(fmt.Sprintf(format, args...)), Unreachable: unreachable}
}

// scrub removes the key from text a server or the network stack made.
func (c *Client) scrub(s string) string {
	if c.key != "" {
		s = strings.ReplaceAll(s, c.key, "[key]")
	}
	return s
}

// statusError describes an answer other than 200. What the server says is
// kept only when it repeats no part of the inputs; a refusal of the inputs
// is described by its status alone.
func (c *Client) statusError(status int, header http.Header, raw []byte, inputs []string) *Error {
	msg := serverMessage(raw)
	if echoes(msg, inputs) {
		msg = ""
	}
	switch {
	case status >= 300 && status < 400:
		return c.fail(status, false, "the endpoint redirects%s, and redirects are not followed; set PROMETHEUS_MEMORY_EMBEDDINGS_URL to the address it points to", redirectTarget(header))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return c.fail(status, false, "the key was refused%s; set PROMETHEUS_MEMORY_EMBEDDINGS_KEY", said(msg))
	case status == http.StatusNotFound:
		return c.fail(status, false, "not found%s; check the URL (the API's base, like http://localhost:11434/v1) and the model name %q", said(msg), c.model)
	case status == http.StatusTooManyRequests:
		return c.fail(status, true, "too many requests%s", said(msg))
	case status >= 500:
		return c.fail(status, true, "the server failed%s", said(msg))
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
		return c.fail(status, false, "the server refused the request (an input may be too long for the model, or the model name %q is unknown to it)", c.model)
	}
	return c.fail(status, false, "unexpected answer")
}

// serverMessage is the error message of an OpenAI-style or Ollama-style
// error body, clipped, or "".
func serverMessage(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || len(e.Error) == 0 {
		return ""
	}
	var msg string
	if json.Unmarshal(e.Error, &msg) != nil {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) != nil {
			return ""
		}
		msg = obj.Message
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// echoes reports whether msg holds 16 bytes in a row of any input, or
// the whole of a shorter one, white space aside.
func echoes(msg string, inputs []string) bool {
	const window = 16
	for _, in := range inputs {
		in = strings.Join(strings.Fields(in), " ") // as serverMessage spaces msg
		if len(in) < window {
			if len(strings.TrimSpace(in)) >= 4 && strings.Contains(msg, in) {
				return true
			}
			continue
		}
		for i := 0; i+window <= len(msg); i++ {
			if strings.Contains(in, msg[i:i+window]) {
				return true
			}
		}
	}
	return false
}

// redirectTarget names where a redirect points, without credentials or
// query, or "".
func redirectTarget(h http.Header) string {
	u, err := url.Parse(h.Get("Location"))
	if err != nil || u.Host == "" {
		return ""
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return " to " + shown.String()
}

func said(msg string) string {
	if msg == "" {
		return ""
	}
	return " (the server said: " + msg + ")"
}

// describeTransport says why no answer came, without the URL (errors show
// their own) or anything the request carried.
func describeTransport(ctx context.Context, err error) string {
	if ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return "cannot connect (is the server running?): " + op.Err.Error()
		}
		return op.Op + ": " + op.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "not JSON"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "field " + te.Field + " has the wrong type"
	}
	return "unreadable"
}
