package progress

import (
	"bytes"
	"os"
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

func TestDrawsOnATerminal(t *testing.T) {
	var w tty
	clock := time.Unix(0, 0)
	p := New(&w, "importing", 200, "records")
	p.now = func() time.Time { return clock }
	for range 200 {
		p.Add(1)
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
	p.Add(5)
	if strings.Contains(w.String(), "205") {
		t.Error("the bar counted past its total")
	}
	p.Finish()
	if !strings.HasSuffix(w.String(), "\r\033[K") {
		t.Errorf("finish did not clear the line: %q", w.String()[max(0, w.Len()-20):])
	}
	n := w.Len()
	p.Finish()
	if w.Len() != n {
		t.Error("a second finish wrote again")
	}
}

func TestWithoutTotalIsThrottled(t *testing.T) {
	var w tty
	clock := time.Unix(0, 0)
	p := New(&w, "exporting", 0, "records")
	p.now = func() time.Time { return clock }
	for range 1000 {
		p.Add(1) // all at one instant: only the first is drawn
	}
	clock = clock.Add(redrawEvery)
	p.Add(1)
	if got := frames(w.String()); len(got) != 2 || got[0] != "exporting 1 records" || got[1] != "exporting 1001 records" {
		t.Errorf("frames %q", got)
	}
}

func TestInBytes(t *testing.T) {
	var w tty
	p := New(&w, "backing up", 4<<20, "bytes")
	p.Set(1<<20, 0)
	p.Set(3<<20, 8<<20) // the total may be learnt late
	got := frames(w.String())
	if len(got) != 2 || !strings.HasSuffix(got[0], " 25% 1.0 MiB/4.0 MiB") || !strings.HasSuffix(got[1], " 37% 3.0 MiB/8.0 MiB") {
		t.Errorf("frames %q", got)
	}
}

// Anything not a terminal (a pipe, a file, a buffer) never sees a bar.
func TestQuietWhenNotATerminal(t *testing.T) {
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
		p := New(w, "importing", 10, "records")
		for range 10 {
			p.Add(1)
		}
		p.Finish()
		if err := p.WatchFile(f.Name(), func() error { return nil }); err != nil {
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

// WatchFile follows a file growing while the work runs.
func TestWatchFile(t *testing.T) {
	var w tty
	path := filepath.Join(t.TempDir(), "copy")
	p := New(&w, "backing up", 1000, "bytes")
	err := p.WatchFile(path, func() error {
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
