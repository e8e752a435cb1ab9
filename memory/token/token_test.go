package token

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/sqlite"
)

var ctx = context.Background()

// clock is an injected, settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustOpen(t *testing.T) (*memory.Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	b, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memory.db"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := memory.New(ctx, b, &memory.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

func isCode(err error, c memory.Code) bool {
	var e *memory.Error
	return errors.As(err, &e) && e.Code == c
}

func TestTokens(t *testing.T) {
	s, clk := mustOpen(t)
	tk := Of(s)
	secret, tok, err := tk.Create(ctx, Spec{Tenant: "acme", User: "ann", Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, memory.TokenPrefix) || len(secret) != 68 || tok.Profile != memory.DefaultProfile {
		t.Fatalf("token %d bytes, profile %q", len(secret), tok.Profile)
	}
	// Only the hash is kept.
	var n int
	s.DB().QueryRow(`SELECT count(*) FROM tokens WHERE hash = ? OR id = ? AND hash LIKE ?`, secret, tok.ID, "%"+secret[4:20]+"%").Scan(&n)
	if n != 0 {
		t.Error("the token's value is in the database")
	}
	got, err := tk.Authenticate(ctx, secret)
	if err != nil || got.ID != tok.ID || got.LastUsedAt == nil {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	clk.Add(time.Second)
	if got2, _ := tk.Authenticate(ctx, secret); !got2.LastUsedAt.Equal(*got.LastUsedAt) {
		t.Error("last use noted again within a minute")
	}
	for _, bad := range []string{"", "mem_", secret[:len(secret)-1] + "0", strings.ToUpper(secret), tok.ID, secret + " "} {
		if bad == secret {
			continue
		}
		if _, err := tk.Authenticate(ctx, bad); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("authenticate %q: %v", bad, err)
		}
	}
	for _, nt := range []Spec{{User: "ann"}, {Tenant: "acme"}, {Tenant: "a b", User: "ann"}, {Tenant: "acme", User: "ann", Profile: "../x"}, {Tenant: "acme", User: "ann", Name: "two\nlines"}} {
		if _, _, err := tk.Create(ctx, nt); !isCode(err, memory.CodeInvalidArgument) {
			t.Errorf("create %+v: %v", nt, err)
		}
	}
	secret2, tok2, _ := tk.Create(ctx, Spec{Tenant: "acme", User: "bob", Profile: "ci", Admin: true})
	list, err := tk.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != tok.ID || list[1].ID != tok2.ID || !list[1].Admin {
		t.Fatalf("tokens: %+v %v", list, err)
	}
	// Revoke by id and by value.
	if _, err := tk.Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := tk.Revoke(ctx, secret2); err != nil || r.ID != tok2.ID {
		t.Fatalf("revoke by value: %+v %v", r, err)
	}
	if _, err := tk.Revoke(ctx, tok.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("revoke twice: %v", err)
	}
	for _, sec := range []string{secret, secret2} {
		if _, err := tk.Authenticate(ctx, sec); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("revoked token authenticates: %v", err)
		}
	}
}
