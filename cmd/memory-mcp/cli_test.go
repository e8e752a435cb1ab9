package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the command-line scripts in testdata/script against the
// real binary: each script gets its own home, database and workspace.
func TestScripts(t *testing.T) {
	p := scriptParams()
	p.Dir = filepath.Join("..", "..", "testdata", "script")
	testscript.Run(t, p)
}

// scriptParams sets up each script with its own home, database file and
// workspace, and the commands the scripts share.
func scriptParams() testscript.Params {
	return testscript.Params{
		Setup: func(e *testscript.Env) error {
			home := filepath.Join(e.WorkDir, "home")
			root := filepath.Join(e.WorkDir, "proj")
			if err := os.MkdirAll(root, 0o755); err != nil {
				return err
			}
			e.Setenv("PATH", filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
			e.Setenv("MEMORY_MCP", binary) // for scripts that take memory-mcp off PATH
			e.Setenv("HOME", home)
			e.Setenv("PROMETHEUS_MEMORY_DB_PATH", filepath.Join(home, ".prometheus", "memory.db"))
			e.Setenv("PROMETHEUS_WORKSPACE_ROOT", root)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// corrupt FILE OFFSET N overwrites N bytes of FILE from OFFSET.
			"corrupt": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 3 {
					ts.Fatalf("usage: corrupt FILE OFFSET N")
				}
				off, err1 := strconv.Atoi(args[1])
				n, err2 := strconv.Atoi(args[2])
				if err1 != nil || err2 != nil {
					ts.Fatalf("corrupt: bad numbers")
				}
				f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_WRONLY, 0)
				ts.Check(err)
				junk := make([]byte, n)
				for i := range junk {
					junk[i] = byte(i*7 + 13)
				}
				_, err = f.WriteAt(junk, int64(off))
				ts.Check(err)
				ts.Check(f.Close())
			},
			// jsonid NAME FILE sets $NAME to the "id" of the JSON object in FILE.
			"jsonid": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: jsonid NAME FILE")
				}
				var v struct{ ID string }
				ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[1])), &v))
				if v.ID == "" {
					ts.Fatalf("jsonid: no id in %s", args[1])
				}
				ts.Setenv(args[0], v.ID)
			},
			// mode FILE OCTAL checks a file's permission bits.
			"mode": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 {
					ts.Fatalf("usage: mode FILE OCTAL")
				}
				fi, err := os.Stat(ts.MkAbs(args[0]))
				ts.Check(err)
				want, err := strconv.ParseUint(args[1], 8, 32)
				ts.Check(err)
				if got := fi.Mode().Perm(); (got == os.FileMode(want)) == neg {
					ts.Fatalf("%s has mode %o, want %s%o", args[0], got, map[bool]string{true: "not ", false: ""}[neg], want)
				}
			},
		},
	}
}

// TestWriteEndlessStdin: a body streamed far past the limit is refused as
// too large once the limit is passed, without reading the stream to its end.
func TestWriteEndlessStdin(t *testing.T) {
	e := newEnv(t)
	cmd := e.command("write", "flood")
	cmd.Stdin = io.LimitReader(repeatReader('x'), 1<<30)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("write of an endless body exited 0: %s", out)
	}
	if !strings.Contains(string(out), "too_large: body is over") {
		t.Fatalf("want too_large, got: %s", out)
	}
	if strings.Contains(string(out), "xxxxxxxx") {
		t.Fatal("the body was echoed")
	}
}

// repeatReader reads as b, b, b, … without end.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
