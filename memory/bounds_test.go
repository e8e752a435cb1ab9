package memory

import (
	"errors"
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
