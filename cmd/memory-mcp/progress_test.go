package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tty is a buffer that says it is a terminal.
type tty struct{ bytes.Buffer }

func (*tty) IsTerminal() bool { return true }

// frames splits what a bar wrote into the lines it drew, in order; a clear
// of the line is an empty frame.
func frames(s string) []string {
	var out []string
	for _, f := range strings.Split(s, "\r")[1:] {
		out = append(out, strings.TrimSuffix(f, "\033[K"))
	}
	return out
}

func TestProgressDrawsOnATerminal(t *testing.T) {
	var w tty
	c := &cli{stderr: &w}
	clock := time.Unix(0, 0)
	p := c.progress("importing", 200, "records")
	p.now = func() time.Time { return clock }
	for range 200 {
		p.add(1)
	}
	got := frames(w.String())
	// One frame per whole percent, however fast the work goes.
	if len(got) != 101 {
		t.Fatalf("%d frames, want 101: %q", len(got), got)
	}
	if want := "importing [" + strings.Repeat(" ", 30) + "]   0% 1/200"; got[0] != want {
		t.Errorf("first frame %q, want %q", got[0], want)
	}
	if want := "importing [" + strings.Repeat("=", 15) + strings.Repeat(" ", 15) + "]  50% 100/200"; !contains(got, want) {
		t.Errorf("no half-way frame %q in %q", want, got)
	}
	if want := "importing [" + strings.Repeat("=", 30) + "] 100% 200/200"; got[len(got)-1] != want {
		t.Errorf("last frame %q, want %q", got[len(got)-1], want)
	}
	// Past the total the bar stays full.
	p.add(5)
	if strings.Contains(w.String(), "205") {
		t.Error("the bar counted past its total")
	}
	p.finish()
	if !strings.HasSuffix(w.String(), "\r\033[K") {
		t.Errorf("finish did not clear the line: %q", w.String()[max(0, w.Len()-20):])
	}
	n := w.Len()
	p.finish()
	if w.Len() != n {
		t.Error("a second finish wrote again")
	}
}

func TestProgressWithoutTotalIsThrottled(t *testing.T) {
	var w tty
	clock := time.Unix(0, 0)
	p := newProgress(&w, "exporting", 0, "records")
	p.now = func() time.Time { return clock }
	for range 1000 {
		p.add(1) // all at one instant: only the first is drawn
	}
	clock = clock.Add(redrawEvery)
	p.add(1)
	if got := frames(w.String()); len(got) != 2 || got[0] != "exporting 1 records" || got[1] != "exporting 1001 records" {
		t.Errorf("frames %q", got)
	}
}

func TestProgressInBytes(t *testing.T) {
	var w tty
	p := newProgress(&w, "backing up", 4<<20, "bytes")
	p.set(1<<20, 0)
	p.set(3<<20, 8<<20) // the total may be learnt late
	got := frames(w.String())
	if len(got) != 2 || !strings.HasSuffix(got[0], " 25% 1.0 MiB/4.0 MiB") || !strings.HasSuffix(got[1], " 37% 3.0 MiB/8.0 MiB") {
		t.Errorf("frames %q", got)
	}
}

// Anything not a terminal (a pipe, a file, a buffer) never sees a bar.
func TestProgressQuietWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	for _, w := range []interface{ Write([]byte) (int, error) }{&buf, f, pw} {
		p := newProgress(w, "importing", 10, "records")
		for range 10 {
			p.add(1)
		}
		p.finish()
		if err := p.watchFile(f.Name(), func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	pw.Close()
	fi, _ := f.Stat()
	var piped bytes.Buffer
	piped.ReadFrom(r)
	if buf.Len() != 0 || fi.Size() != 0 || piped.Len() != 0 {
		t.Errorf("drawn where no terminal is: buffer %q, file %d bytes, pipe %q", buf.String(), fi.Size(), piped.String())
	}
}

// watchFile follows a file growing while the work runs.
func TestProgressWatchFile(t *testing.T) {
	var w tty
	path := filepath.Join(t.TempDir(), "copy")
	p := newProgress(&w, "backing up", 1000, "bytes")
	err := p.watchFile(path, func() error {
		for i := 1; i <= 4; i++ {
			if err := os.WriteFile(path, make([]byte, i*250), 0o600); err != nil {
				return err
			}
			time.Sleep(2 * redrawEvery)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := frames(w.String())
	if len(got) < 2 || !strings.HasSuffix(got[len(got)-1], "100% 1000 B/1000 B") || !strings.Contains(strings.Join(got, "\n"), "100% 1000 B/1000 B") {
		t.Errorf("frames %q", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

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
