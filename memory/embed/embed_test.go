package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/embed/embedtest"
)

var ctx = context.Background()

func newClient(t *testing.T, cfg embed.Config) *embed.Client {
	t.Helper()
	c, err := embed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEmbedBatchesInOrder(t *testing.T) {
	srv, err := embedtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetKey("k-123")
	c := newClient(t, embed.Config{URL: srv.URL + "/", Model: "toy", Key: "k-123", Batch: 3})
	texts := []string{"ship it", "a kitten", "the database", "bananas", "a crash", "cars", "tests"}
	vs, err := c.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("%d vectors", len(vs))
	}
	for i, v := range vs {
		want := embedtest.Embed("toy", texts[i])
		for j := range v {
			if v[j] != want[j] {
				t.Fatalf("vector %d out of order", i)
			}
		}
	}
	if n := srv.Requests(); n != 3 {
		t.Fatalf("%d requests for 7 inputs in batches of 3", n)
	}
	if srv.BadAuth() != 0 {
		t.Fatal("the key was not sent")
	}
	if c.Endpoint() != srv.URL+"/embeddings" {
		t.Fatalf("endpoint %s", c.Endpoint())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []embed.Config{
		{URL: "", Model: "m"},
		{URL: "localhost:11434/v1", Model: "m"},
		{URL: "ftp://host/v1", Model: "m"},
		{URL: "http://localhost:11434/v1", Model: " "},
	} {
		if _, err := embed.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// answer serves one fixed answer to every request.
func answer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestErrorsNeverHoldInputsOrKey(t *testing.T) {
	const input = "private-words-of-the-record\n\n  and  more"
	const key = "sk-live-keyvalue-0000"
	echo := `{"error":{"message":"cannot embed private-words-of-the-record and more with key ` + key + `"}}`
	cases := []struct {
		name        string
		url         string
		want        string
		unreachable bool
		rejected    bool
	}{
		{"refused input", answer(t, 400, echo), "HTTP 400", false, true},
		{"too large", answer(t, 413, echo), "HTTP 413", false, true},
		{"bad key", answer(t, 401, echo), "the key was refused", false, false},
		{"unknown model", answer(t, 404, `{"error":"model \"nomic\" not found, try pulling it first"}`), `model "nomic" not found`, false, false},
		{"server failed", answer(t, 500, echo), "HTTP 500", true, false},
		{"overloaded", answer(t, 429, `{}`), "too many requests", true, false},
		{"not json", answer(t, 200, "<html>"), "not an embeddings response", false, false},
		{"short answer", answer(t, 200, `{"data":[]}`), "0 vectors for 1 inputs", false, false},
		{"bad index", answer(t, 200, `{"data":[{"index":5,"embedding":[1]}]}`), "index 5", false, false},
		{"empty vector", answer(t, 200, `{"data":[{"index":0,"embedding":[]}]}`), "0 dimensions", false, false},
		{"huge vector", answer(t, 200, `{"data":[{"index":0,"embedding":[`+strings.Repeat("0,", embed.MaxDims)+`0]}]}`), "16385 dimensions", false, false},
		{"not finite", answer(t, 200, `{"data":[{"index":0,"embedding":[1e999]}]}`), "not an embeddings response", false, false},
		{"zero vector", answer(t, 200, `{"data":[{"index":0,"embedding":[0,1e-60,0]}]}`), "all zeros", false, false},
		{"down", "http://127.0.0.1:1/v1", "cannot connect", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, embed.Config{URL: tc.url, Model: "m", Key: key, Timeout: 5 * time.Second})
			_, err := c.Embed(ctx, []string{input})
			var e *embed.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *embed.Error", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("%q does not say %q", msg, tc.want)
			}
			if strings.Contains(msg, "private-words") || strings.Contains(msg, key) {
				t.Errorf("the error holds the input or the key: %q", msg)
			}
			if e.Unreachable != tc.unreachable || e.Rejected() != tc.rejected {
				t.Errorf("unreachable %v rejected %v, want %v %v", e.Unreachable, e.Rejected(), tc.unreachable, tc.rejected)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer once.Do(func() { close(release) })
	c := newClient(t, embed.Config{URL: srv.URL, Model: "m", Timeout: 50 * time.Millisecond})
	_, err := c.Embed(ctx, []string{"x"})
	var e *embed.Error
	if !errors.As(err, &e) || !e.Unreachable || !e.Timeout || !strings.Contains(err.Error(), "no answer in time") {
		t.Fatalf("%v", err)
	}
}

func TestWireFormat(t *testing.T) {
	var got map[string]any
	var auth, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, ctype = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		json.NewDecoder(r.Body).Decode(&got)
		if r.URL.Path != "/api/v1/embeddings" || r.Method != http.MethodPost {
			w.WriteHeader(404)
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,1]},{"object":"embedding","index":0,"embedding":[1,0]}],"model":"m"}`)
	}))
	defer srv.Close()
	c := newClient(t, embed.Config{URL: srv.URL + "/api/v1", Model: "m"})
	vs, err := c.Embed(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if vs[0][0] != 1 || vs[1][1] != 1 {
		t.Fatalf("vectors not placed by index: %v", vs)
	}
	if got["model"] != "m" || len(got["input"].([]any)) != 2 || auth != "" || ctype != "application/json" {
		t.Fatalf("request %v, auth %q, type %q", got, auth, ctype)
	}
}

// An endpoint that redirects elsewhere must not pass the texts, or the
// key, on to a host the user did not name.
func TestRedirectIsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		var mu sync.Mutex
		var got []string
		elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, string(b)+r.Header.Get("Authorization"))
			mu.Unlock()
			io.WriteString(w, `{"data":[{"index":0,"embedding":[1,0]}]}`)
		}))
		t.Cleanup(elsewhere.Close)
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, elsewhere.URL+"/v1/embeddings", status)
		}))
		t.Cleanup(origin.Close)
		c := newClient(t, embed.Config{URL: origin.URL + "/v1", Model: "m", Key: "sk-redirected-key"})
		_, err := c.Embed(ctx, []string{"text of a record"})
		if err == nil {
			t.Errorf("HTTP %d: a redirect was followed without error", status)
		} else if !strings.Contains(err.Error(), "redirect") {
			t.Errorf("HTTP %d: the error %q does not say the endpoint redirects", status, err)
		}
		mu.Lock()
		if len(got) > 0 {
			t.Errorf("HTTP %d: the redirect's target received %q", status, got)
		}
		mu.Unlock()
	}
}

// A number JSON holds but float32 cannot must not become an infinite
// vector, which would make every similarity NaN.
func TestVectorBeyondFloat32IsRefused(t *testing.T) {
	for _, body := range []string{
		`{"data":[{"index":0,"embedding":[1e39,0]}]}`,
		`{"data":[{"index":0,"embedding":[0,-3.5e38]}]}`,
	} {
		c := newClient(t, embed.Config{URL: answer(t, 200, body), Model: "m"})
		vs, err := c.Embed(ctx, []string{"x"})
		if err == nil {
			t.Errorf("%s: accepted as %v", body, vs)
		} else if !strings.Contains(err.Error(), "not finite") {
			t.Errorf("%s: error %q does not say the vector is not finite", body, err)
		}
	}
}

// Credentials in the URL, as user:password or in the query, are sent
// but never shown: not by Endpoint, not in an error.
func TestURLCredentialsNeverShown(t *testing.T) {
	for _, base := range []string{answer(t, 500, `{"error":"down for maintenance"}`), "http://127.0.0.1:1/v1"} {
		u := strings.Replace(base, "http://", "http://url-user:url-password@", 1) + "?api-key=url-query-key"
		c := newClient(t, embed.Config{URL: u, Model: "m", Timeout: 5 * time.Second})
		_, err := c.Embed(ctx, []string{"x"})
		if err == nil {
			t.Fatal("no error")
		}
		for _, s := range []string{c.Endpoint(), err.Error()} {
			for _, secret := range []string{"url-user", "url-password", "url-query-key"} {
				if strings.Contains(s, secret) {
					t.Errorf("%q shows %s", s, secret)
				}
			}
		}
	}
}
