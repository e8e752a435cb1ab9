package memory

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

var keyRule = regexp.MustCompile(`^` + KeyRule + `$`)

// FuzzNormalizeKey checks that whatever NormalizeKey accepts is a safe file
// stem: it matches the key rule, holds no "..", no path separator and no
// drive colon, and normalising it again changes nothing.
func FuzzNormalizeKey(f *testing.F) {
	for _, s := range []string{
		"foo", "Foo", "  Run  The\tTests \n", "a.b_c-d", "..", "../etc/passwd", `..\evil`, "a/b", "c:", "con",
		"a\x00b", "\u212Aelvin", "İstanbul", "ǅ", "a\u0085b", "\u00a0a\u00a0", "a..b", ".", "-x", strings.Repeat("a", 100),
		strings.Repeat("a", 101), "a\xffb", "ﬀ", "Ⅻ", "ß",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := NormalizeKey("key", s)
		if err != nil {
			if k != "" {
				t.Fatalf("NormalizeKey(%q) returned %q with error %v", s, k, err)
			}
			var e *Error
			if !errors.As(err, &e) || (e.Code != CodeInvalidArgument && e.Code != CodeSecretRejected) || e.Field != "key" {
				t.Fatalf("NormalizeKey(%q) error %#v, want an invalid_argument or secret_rejected *Error naming key", s, err)
			}
			if len(s) >= 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("NormalizeKey(%q) error %q holds the input", s, err)
			}
			return
		}
		if !keyRule.MatchString(k) {
			t.Fatalf("NormalizeKey(%q) = %q, which does not match %s", s, k, KeyRule)
		}
		if strings.Contains(k, "..") || strings.ContainsAny(k, `/\:`) || k == "." {
			t.Fatalf("NormalizeKey(%q) = %q, which could leave the directory", s, k)
		}
		k2, err := NormalizeKey("key", k)
		if err != nil || k2 != k {
			t.Fatalf("NormalizeKey(NormalizeKey(%q)) = %q, %v; want %q", s, k2, err, k)
		}
		// Case is folded: any case variant of an accepted key is the same key.
		if k3, err := NormalizeKey("key", strings.ToUpper(k)); err != nil || k3 != k {
			t.Fatalf("NormalizeKey(%q) = %q, %v; want %q", strings.ToUpper(k), k3, err, k)
		}
	})
}
