package semantic

import (
	"strings"
	"testing"
)

// An unknown search mode is refused without repeating what was given: the
// value is never scanned, so it could be a secret pasted in the wrong place.
func TestParseModeDoesNotEchoTheValue(t *testing.T) {
	const token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
	_, err := ParseMode("mode", token)
	if err == nil {
		t.Fatal("ParseMode accepted an unknown mode")
	}
	msg := err.Error()
	if !strings.Contains(msg, "mode") || !strings.Contains(msg, "keyword, semantic or hybrid") {
		t.Errorf("error %q does not say what is allowed", msg)
	}
	for i := 0; i+8 <= len(token); i++ {
		if strings.Contains(msg, token[i:i+8]) {
			t.Fatalf("error %q repeats part of the value", msg)
		}
	}
	for _, ok := range []string{"", "keyword", " Hybrid ", "SEMANTIC"} {
		if _, err := ParseMode("mode", ok); err != nil {
			t.Errorf("ParseMode(%q) = %v", ok, err)
		}
	}
}
