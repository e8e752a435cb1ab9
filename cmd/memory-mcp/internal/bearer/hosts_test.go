package bearer

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHostsCheck(t *testing.T) {
	h := NewHosts("memory.internal:8080", "memory.example.com, Proxy.Example.com:443")
	for _, c := range []struct {
		host, origin, local string
		ok                  bool
	}{
		{"127.0.0.1:8080", "", "127.0.0.1:8080", true},
		{"localhost", "http://localhost:6274", "127.0.0.1:8080", true},
		{"[::1]:8080", "", "[::1]:8080", true},
		{"memory.internal:8080", "", "10.0.0.5:8080", true},
		{"MEMORY.example.com", "https://proxy.example.com", "10.0.0.5:8080", true},
		{"10.0.0.5:8080", "", "10.0.0.5:8080", true},      // by the address it came in on
		{"10.0.0.6:8080", "", "10.0.0.5:8080", false},     // another address
		{"evil.example.com", "", "127.0.0.1:8080", false}, // rebound to loopback
		{"127.0.0.1:8080", "https://evil.example.com", "127.0.0.1:8080", false},
		{"127.0.0.1:8080", "null", "127.0.0.1:8080", false},
		{"", "", "127.0.0.1:8080", false},
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		addr, err := net.ResolveTCPAddr("tcp", c.local)
		if err != nil {
			t.Fatal(err)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
		if got := h.check(r) == ""; got != c.ok {
			t.Errorf("Host %q, Origin %q, at %s: allowed %v, want %v (%s)", c.host, c.origin, c.local, got, c.ok, h.check(r))
		}
	}
}
