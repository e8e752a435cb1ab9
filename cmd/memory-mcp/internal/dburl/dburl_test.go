package dburl

import (
	"errors"
	"strings"
	"testing"
)

func TestDBURLShown(t *testing.T) {
	for _, c := range []struct{ url, shown, addr string }{
		{"postgres://u:pw%2Fx@h:6543/db?password=pw2&sslmode=disable", "postgres://h:6543/db", "h:6543"},
		{"postgresql://h/db", "postgresql://h/db", "h:5432"},
		{"postgres://[::1]/db", "postgres://[::1]/db", "[::1]:5432"},
		{"postgres:///db?host=/run/postgresql", "postgres:///db", "/run/postgresql"},
		{"postgres://u:pw@h1:5432,h2:5433/db", "postgres://h1:5432,h2:5433/db", "h1:5432,h2:5433"},
		// A password holding @ and # unescaped: what parses as the host
		// is a piece of it.
		{"postgres://u:top@secret#x@h/db", "postgres://h/…", "h:5432"},
	} {
		if got := Shown(c.url); got != c.shown {
			t.Errorf("Shown(%q) = %q, want %q", c.url, got, c.shown)
		}
		if got := Addr(c.url); got != c.addr {
			t.Errorf("Addr(%q) = %q, want %q", c.url, got, c.addr)
		}
	}
	base := errors.New("connect: password authentication failed for pw/x and pw2 and pw%2Fx")
	err := Redact(base, Secrets("postgres://u:pw%2Fx@h:6543/db?password=pw2"))
	if strings.Contains(err.Error(), "pw/x") || strings.Contains(err.Error(), "pw2") || strings.Contains(err.Error(), "pw%2Fx") {
		t.Errorf("redacted: %v", err)
	}
	if !errors.Is(err, base) {
		t.Error("redacting lost the error it wraps")
	}
	if err := Redact(errors.New("host a: refused\nhost b: refused"), nil); err.Error() != "host a: refused; host b: refused" {
		t.Errorf("not on one line: %q", err)
	}
	if err := Redact(errors.New("x top@secret#x"), Secrets("postgres://u:top@secret#x@h/db")); strings.Contains(err.Error(), "secret") {
		t.Errorf("a password holding @ and # is kept: %v", err)
	}
	// A password with a bare slash does not parse: it is hidden still.
	if err := Redact(errors.New("x top/secret"), Secrets("postgres://u:top/secret@h/db")); strings.Contains(err.Error(), "secret") {
		t.Errorf("an unparsable URL's password is kept: %v", err)
	}
}
