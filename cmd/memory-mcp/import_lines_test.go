package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file some editor began with a byte order mark loses no line to it, and
// a line that is not UTF-8 is refused by number, not stored with U+FFFD in
// place of its bytes; the lines around it come in.
func TestImportLinesWithAMarkOrBadBytes(t *testing.T) {
	e := newEnv(t)
	lines := "\ufeff" + `{"scope":"workspace","type":"semantic","key":"first","body":"after the mark"}` + "\n" +
		`{"scope":"workspace","type":"semantic","key":"latin1","body":"caf` + "\xe9" + `"}` + "\n" +
		`{"scope":"workspace","type":"semantic","key":"last","body":"after the bad line"}` + "\n"
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, e, "", "import", p)
	if err == nil || !strings.Contains(out, "imported 2 new") || !strings.Contains(stderr, "line 2 refused: invalid_argument: the line is not valid UTF-8") {
		t.Fatalf("import: %v\n%s%s", err, out, stderr)
	}
	for key, want := range map[string]string{"first": "after the mark", "last": "after the bad line"} {
		if out, _, err := runCLI(t, e, "", "show", key, "--scope", "workspace"); err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s", key, err, out)
		}
	}
	if _, _, err := runCLI(t, e, "", "show", "latin1", "--scope", "workspace"); err == nil {
		t.Error("the line that is not UTF-8 was stored")
	}
}
