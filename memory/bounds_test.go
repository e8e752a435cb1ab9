package memory

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTTLBoundedInStore refuses a time to live the expiry arithmetic could
// overflow with, whatever the caller: a negative expiry would purge the
// record at once.
func TestTTLBoundedInStore(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "keep", Body: "Still here."})
	for _, d := range []time.Duration{-time.Second, 0, MaxTTL + time.Second, time.Duration(1<<63 - 1)} {
		_, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "keep", Body: "Replaced.", TTL: &d})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("put ttl %v: %v", d, err)
		}
		if _, err := s.Update(ctx, projA, Selector{Key: "keep"}, Patch{TTL: &d}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("update ttl %v: %v", d, err)
		}
	}
	d := MaxTTL
	r, err := s.Update(ctx, projA, Selector{Key: "keep"}, Patch{TTL: &d})
	if err != nil {
		t.Fatal(err)
	}
	if r.Body != "Still here." || r.ExpiresAt == nil || r.ExpiresAt.Before(r.UpdatedAt.Add(99*365*24*time.Hour)) {
		t.Errorf("after a century's ttl: body %q, expires %v", r.Body, r.ExpiresAt)
	}
}

// TestNormalizeKeyRefusesWhatItUsedToRewrite refuses keys holding control
// characters, and keys holding a secret in any case or glued to words,
// with an error that never holds the key.
func TestNormalizeKeyRefusesWhatItUsedToRewrite(t *testing.T) {
	aws := "AKIA" + "Q7WZ3MNB5XRT2PLK"
	for _, c := range []struct {
		in   string
		code Code
	}{
		{"deploy\nsteps", CodeInvalidArgument},
		{"deploy\tsteps", CodeInvalidArgument},
		{"trailing\n", CodeInvalidArgument},
		{"esc\x1b[0m", CodeInvalidArgument},
		{"nel\u0085x", CodeInvalidArgument},
		{aws, CodeSecretRejected},
		{"prod-" + aws, CodeSecretRejected},
		{"prod-" + strings.ToLower(aws), CodeSecretRejected},
		{"prod." + strings.ToLower(aws) + "-east", CodeSecretRejected},
		{"Prod " + aws + " east", CodeSecretRejected},
		{"prod-" + strings.ToLower(aws) + "x-long", CodeInvalidArgument + "?"},
	} {
		k, err := NormalizeKey("key", c.in)
		if c.code == CodeInvalidArgument+"?" {
			if err != nil {
				t.Errorf("NormalizeKey(%q): %v; a longer run is no key id", c.in, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || e.Field != "key" {
			t.Errorf("NormalizeKey(%q) = %q, %v; want %s", c.in, k, err, c.code)
			continue
		}
		if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(aws[4:])) || strings.Contains(err.Error(), "steps") {
			t.Errorf("NormalizeKey(%q): the error holds the key: %v", c.in, err)
		}
	}
	if k, err := NormalizeKey("key", "  Run  The Tests "); err != nil || k != "run-the-tests" {
		t.Errorf("spaces: %q, %v", k, err)
	}
}
