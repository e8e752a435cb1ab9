package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestProgressCommandsOnTerminal runs export, backup and restore of the
// real binary with a terminal for stderr: each draws its bar there, and
// clears it before its summary.
func TestProgressCommandsOnTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to make a terminal")
	}
	e := newEnv(t)
	var b bytes.Buffer
	for i := range 300 {
		fmt.Fprintf(&b, `{"scope":"project","type":"semantic","key":"p-%03d","body":"n"}`+"\n", i)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "many.jsonl")
	must(t, os.WriteFile(file, b.Bytes(), 0o600))
	if out, err := e.command("import", file).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, c := range []struct{ args, bar, summary string }{
		{"export --out " + filepath.Join(dir, "out.jsonl"), "\rexporting ", "exported 300 records"},
		{"backup " + filepath.Join(dir, "b.db"), "\rbacking up [", "backed up 300 records"},
		{"restore " + filepath.Join(dir, "b.db"), "\rrestoring [", "restored 300 records"},
	} {
		sh := exec.Command("script", "-qfec", binary+" "+c.args, os.DevNull)
		sh.Env = e.vars()
		sh.Dir = e.root
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Skipf("script: %v: %s", err, out)
		}
		bar := bytes.Index(out, []byte(c.bar))
		clear := bytes.LastIndex(out, []byte("\r\033[K"))
		summary := bytes.Index(out, []byte(c.summary))
		if bar < 0 || clear < bar || summary < clear {
			t.Errorf("%s: want the bar, cleared, then the summary: %q", c.args, out)
		}
	}
}
