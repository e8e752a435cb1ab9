package memory

import "testing"

// TestUnixNewlines checks that line ends become bare LFs in one pass, so a
// body saved, written to a file and read back is the body that was saved.
func TestUnixNewlines(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"a\nb":            "a\nb",
		"a\r\nb":          "a\nb",
		"a\r\r\nb":        "a\nb",
		"0\r\r\r\n0":      "0\n0",
		"a\rb":            "a\rb",
		"a\r":             "a\r",
		"\r\n\r\n":        "\n\n",
		"x\r\ry\r\n":      "x\r\ry\n",
		"é\r\n中\r\r\n🚀\r": "é\n中\n🚀\r",
	} {
		got := UnixNewlines(in)
		if got != want {
			t.Errorf("UnixNewlines(%q) = %q, want %q", in, got, want)
		}
		if again := UnixNewlines(got); again != got {
			t.Errorf("UnixNewlines is not stable on %q: %q then %q", in, got, again)
		}
		if c := CanonBody(in); CanonBody(c) != c {
			t.Errorf("CanonBody is not stable on %q: %q then %q", in, c, CanonBody(c))
		}
	}
}
