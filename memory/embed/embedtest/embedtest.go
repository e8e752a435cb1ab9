// Package embedtest is an OpenAI-compatible embeddings server for tests,
// on loopback, as httptest is for HTTP. Its model is a toy: each word of a
// small vocabulary of synonyms adds to the dimension of its meaning, so
// "ship the release" and "deploy to production" point the same way while
// sharing no word; any other word adds a little to a dimension picked by
// its hash. The dimensions are rotated by the model's name, so vectors of
// two models compared by mistake are nonsense.
//
// It imports only the standard library.
package embedtest

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"unicode"
)

// Dims is the length of every vector the server gives.
const Dims = 40

// concepts are the synonyms that share a dimension.
var concepts = [][]string{
	{"deploy", "deploys", "deploying", "deployment", "release", "releases", "ship", "shipping", "ships", "rollout", "production", "publish"},
	{"database", "databases", "postgres", "postgresql", "sql", "sqlite", "db", "datastore"},
	{"test", "tests", "testing", "suite", "verify", "verification"},
	{"car", "cars", "automobile", "vehicle", "vehicles", "sedan", "truck"},
	{"cat", "cats", "kitten", "kittens", "feline", "felines"},
	{"money", "cost", "costs", "price", "prices", "budget", "billing", "invoice"},
	{"bug", "bugs", "error", "errors", "crash", "crashes", "failure", "fault", "exception"},
	{"fruit", "apple", "apples", "banana", "bananas", "pear"},
}

var conceptOf = func() map[string]int {
	m := map[string]int{}
	for i, ws := range concepts {
		for _, w := range ws {
			m[w] = i
		}
	}
	return m
}()

// Embed is the toy model's vector for text under model.
func Embed(model, text string) []float32 {
	h := fnv.New32a()
	h.Write([]byte(model))
	rot := int(h.Sum32() % Dims)
	v := make([]float32, Dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if c, ok := conceptOf[w]; ok {
			v[(c+rot)%Dims] += 1
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		d := len(concepts) + int(h.Sum32()%uint32(Dims-len(concepts)))
		v[(d+rot)%Dims] += 0.2
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		v[rot] = 1e-3 // no word at all: a vector still, as real models give
		return v
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

// Server is a running stand-in endpoint. Its base URL, for
// PROMETHEUS_MEMORY_EMBEDDINGS_URL, is URL.
type Server struct {
	URL  string
	addr string

	mu       sync.Mutex
	key      string
	maxInput int
	srv      *http.Server
	ln       net.Listener
	hold     chan struct{} // while not nil, answers wait for it to close
	holdAll  bool          // all answers wait, not only those of several inputs
	reqs     int
	inputs   []string
	models   map[string]int
	badAuth  int
}

// Start starts a server on a free loopback port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{addr: ln.Addr().String(), models: map[string]int{}}
	s.URL = "http://" + s.addr + "/v1"
	s.serve(ln)
	return s, nil
}

// Unstarted reserves a loopback address and returns a server that does
// not listen on it until Up: an endpoint that is down.
func Unstarted() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{addr: ln.Addr().String(), models: map[string]int{}}
	s.URL = "http://" + s.addr + "/v1"
	ln.Close()
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle)}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go srv.Serve(ln)
}

// Down stops answering: connections are refused until Up.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Up answers again, on the same address.
func (s *Server) Up() error {
	s.mu.Lock()
	up := s.srv != nil
	s.mu.Unlock()
	if up {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.serve(ln)
	return nil
}

// Close stops the server for good.
func (s *Server) Close() {
	s.Release()
	s.Down()
}

// SetKey makes the server refuse (HTTP 401) a request that does not come
// with Authorization: Bearer key.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	s.key = key
	s.mu.Unlock()
}

// Key is the key set by SetKey.
func (s *Server) Key() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// SetMaxInput makes the server refuse (HTTP 400) a request holding an
// input longer than n bytes, as a model with a short context does; 0 lifts
// the limit.
func (s *Server) SetMaxInput(n int) {
	s.mu.Lock()
	s.maxInput = n
	s.mu.Unlock()
}

// Hold makes answers wait until Release.
func (s *Server) Hold() {
	s.mu.Lock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	s.holdAll = true
	s.mu.Unlock()
}

// HoldBatches makes answers to requests of more than one input wait
// until Release: records being embedded wait, a query does not.
func (s *Server) HoldBatches() {
	s.mu.Lock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	s.holdAll = false
	s.mu.Unlock()
}

// Release lets held answers go.
func (s *Server) Release() {
	s.mu.Lock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
	s.mu.Unlock()
}

// Requests is how many embedding requests arrived, answered or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs
}

// Inputs are every input text received, in order.
func (s *Server) Inputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// Models counts the inputs received per model.
func (s *Server) Models() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for k, v := range s.models {
		m[k] = v
	}
	return m
}

// BadAuth is how many requests came without the right key.
func (s *Server) BadAuth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.badAuth
}

type request struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/embeddings") {
		writeError(w, http.StatusNotFound, "no route "+r.URL.Path)
		return
	}
	s.mu.Lock()
	s.reqs++
	key := s.key
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		s.mu.Lock()
		s.badAuth++
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "invalid api key")
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		writeError(w, http.StatusBadRequest, "want {model, input}")
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "input must be a string or a list of strings")
			return
		}
		inputs = []string{one}
	}
	s.mu.Lock()
	hold := s.hold
	if !s.holdAll && len(inputs) < 2 {
		hold = nil
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	s.inputs = append(s.inputs, inputs...)
	s.models[req.Model] += len(inputs)
	limit := s.maxInput
	s.mu.Unlock()
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: req.Model}
	for i, in := range inputs {
		if limit > 0 && len(in) > limit {
			writeError(w, http.StatusBadRequest, "input is too large to process")
			return
		}
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: Embed(req.Model, in)})
		out.Usage.PromptTokens += len(strings.Fields(in))
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}
