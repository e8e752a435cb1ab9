package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/scope"
)

// TestBackupDuringWrites takes a backup while a real server process writes
// as fast as it can: the copy holds every write acknowledged before the
// backup started and passes integrity_check.
func TestBackupDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes for a while")
	}
	e := newEnv(t)
	cs := connect(t, e, nil)
	ctx := context.Background()

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			typ := "working"
			if i%5 == 0 {
				typ = "semantic" // mirrored: a markdown file too
			}
			key := fmt.Sprintf("burst-%05d", i)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_write", Arguments: map[string]any{
				"type": typ, "key": key, "body": strings.Repeat("payload ", 20) + key,
			}})
			if err != nil || res.IsError {
				done <- fmt.Errorf("write %s: %v %v", key, err, res)
				return
			}
			mu.Lock()
			acked = append(acked, typ+"/"+key)
			mu.Unlock()
		}
	}()
	waitFor := func(n int) {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
		}
		t.Fatalf("fewer than %d writes acknowledged", n)
	}
	waitFor(50)

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	path := filepath.Join(t.TempDir(), "backup.db")
	out, err := e.command("backup", "--json", path).CombinedOutput()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	mu.Lock()
	during := len(acked) - len(before)
	mu.Unlock()
	waitFor(len(before) + during + 10) // still writing after it
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged before the backup, %d while it ran", len(before), during)

	chk, err := sqlite.CheckFile(ctx, path)
	if err != nil {
		t.Fatalf("backup does not check out: %v", err)
	}
	if chk.Records < len(before) {
		t.Fatalf("backup holds %d records, want at least %d", chk.Records, len(before))
	}
	st, err := openStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	root, err := scope.Root(e.root, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range before {
		typ, key, _ := strings.Cut(tk, "/")
		if _, err := st.Peek(ctx, scope.IdentityOf(root), memory.Selector{Key: key, Type: memory.Type(typ)}); err != nil {
			t.Fatalf("acknowledged write %s missing from the backup: %v", tk, err)
		}
	}
}

// TestTwoImportsAtOnce runs two imports of overlapping files side by side:
// both finish, and every record is there once with the id its file gave it.
func TestTwoImportsAtOnce(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	var a, b bytes.Buffer
	ids := map[string]string{}
	for i := 0; i < 300; i++ {
		id := fmt.Sprintf("01JTESTIMPORT%013d", i)
		line := fmt.Sprintf(`{"id":%q,"scope":"project","type":"semantic","key":"k-%03d","body":"record %d"}`+"\n", id, i, i)
		ids[fmt.Sprintf("k-%03d", i)] = id
		a.WriteString(line)
		if i%2 == 0 {
			b.WriteString(line)
		}
	}
	fa, fb := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	must(t, os.WriteFile(fa, a.Bytes(), 0o600))
	must(t, os.WriteFile(fb, b.Bytes(), 0o600))

	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for i, f := range []string{fa, fb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = e.command("import", "--json", f).CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("import %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	exp, err := e.command("export").Output()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(exp))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l jsonl.Line
		must(t, json.Unmarshal(sc.Bytes(), &l))
		if seen[l.Key] {
			t.Fatalf("%s exported twice", l.Key)
		}
		seen[l.Key] = true
		if ids[l.Key] != l.ID {
			t.Errorf("%s has id %s, want %s", l.Key, l.ID, ids[l.Key])
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("exported %d records, want %d", len(seen), len(ids))
	}
}

// TestTerminalBanner: bare memory-mcp with a terminal on stdin says what it
// is on stderr; with /dev/null or a pipe it says nothing.
func TestTerminalBanner(t *testing.T) {
	e := newEnv(t)
	cmd := e.command()
	devnull, err := os.Open(os.DevNull)
	must(t, err)
	defer devnull.Close()
	cmd.Stdin = devnull
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve with /dev/null: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "waiting for an agent") {
		t.Fatalf("banner printed for /dev/null: %s", stderr.String())
	}

	// script(1) gives the server a terminal.
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to make a terminal")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "script", "-qfec", binary, os.DevNull)
	sh.Env = e.vars()
	sh.Dir = e.root
	sh.Stdin = strings.NewReader("")
	pr, pw, err := os.Pipe()
	must(t, err)
	sh.Stdout, sh.Stderr = pw, pw
	if err := sh.Start(); err != nil {
		t.Skipf("script: %v", err)
	}
	pw.Close()
	defer func() {
		sh.Process.Kill()
		sh.Wait()
		// The server runs under script's terminal, not as our child: stop
		// it too, before the workspace it works in is removed.
		stopProcessesIn(t, e.root)
	}()
	var seen strings.Builder
	r := bufio.NewReader(pr)
	for {
		line, err := r.ReadString('\n')
		seen.WriteString(line)
		if strings.Contains(seen.String(), "memory-mcp list") {
			break
		}
		if err != nil {
			t.Fatalf("no banner on a terminal; saw %q", seen.String())
		}
	}
	if !strings.Contains(seen.String(), "MCP server and is waiting for an agent") {
		t.Fatalf("banner: %q", seen.String())
	}
}

// TestImportHugeAndOversized: a line over the limit and a body over the
// record limit are refused by number; the lines around them are imported.
func TestImportHugeAndOversized(t *testing.T) {
	e := newEnv(t)
	var b bytes.Buffer
	b.WriteString(`{"scope":"project","type":"semantic","key":"before","body":"ok"}` + "\n")
	b.WriteString(`{"scope":"project","type":"semantic","key":"huge","body":"` + strings.Repeat("x", 3<<20) + `"}` + "\n")
	b.WriteString(`{"scope":"project","type":"semantic","key":"big-body","body":"` + strings.Repeat("y", memory.MaxBodyBytes+1) + `"}` + "\n")
	b.WriteString(`{"scope":"project","type":"semantic","key":"after","body":"ok"}`) // no final newline
	file := filepath.Join(t.TempDir(), "huge.jsonl")
	must(t, os.WriteFile(file, b.Bytes(), 0o600))
	cmd := e.command("import", "--json", file)
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("import with refused lines exited 0: %s", out)
	}
	var res importResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Created != 2 || len(res.Refused) != 2 || res.Lines != 4 {
		t.Fatalf("result %+v, want 2 created, lines 2 and 3 refused", res)
	}
	if r := res.Refused[0]; r.Line != 2 || !strings.HasPrefix(r.Reason, "too_large: the line is longer") {
		t.Errorf("line 2: %+v", r)
	}
	if r := res.Refused[1]; r.Line != 3 || !strings.HasPrefix(r.Reason, "too_large") {
		t.Errorf("line 3: %+v", r)
	}
	if bytes.Contains(out, []byte("xxxxxxxx")) || bytes.Contains(out, []byte("yyyyyyyy")) {
		t.Error("a refused value was echoed")
	}
}

// TestProgressOnTerminal: a long import draws a bar on a terminal's stderr
// and nothing when stderr is a pipe.
func TestProgressOnTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to make a terminal")
	}
	e := newEnv(t)
	var b bytes.Buffer
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, `{"scope":"project","type":"working","key":"p-%03d","body":"n"}`+"\n", i)
	}
	file := filepath.Join(t.TempDir(), "many.jsonl")
	must(t, os.WriteFile(file, b.Bytes(), 0o600))

	piped, err := e.command("import", file).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, piped)
	}
	if bytes.Contains(piped, []byte("importing [")) {
		t.Fatalf("progress drawn into a pipe: %q", piped)
	}
	e2 := newEnv(t)
	sh := exec.Command("script", "-qfec", binary+" import "+file, os.DevNull)
	sh.Env = e2.vars()
	sh.Dir = e2.root
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Skipf("script: %v: %s", err, out)
	}
	if !bytes.Contains(out, []byte("importing [")) || !bytes.Contains(out, []byte("imported 200 new")) {
		t.Fatalf("no progress on a terminal: %q", out)
	}
}

// TestRestoreUnderRunningServer restores a backup while a server has the
// database open: the server then reads the restored records, with the
// markdown files still canonical.
func TestRestoreUnderRunningServer(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "alpha", "body": "kept in the backup"})
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "scratch", "body": "in the backup only"})
	path := filepath.Join(t.TempDir(), "b.db")
	if out, err := e.command("backup", path).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "beta", "body": "written after, its file stays"})
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "later", "body": "written after, no file"})
	ok(t, cs, "memory_delete", map[string]any{"key": "alpha"})
	ok(t, cs, "memory_delete", map[string]any{"key": "scratch"})
	// The server has read its mirror state and counts; now the ground moves.
	ok(t, cs, "memory_list", map[string]any{})

	if out, err := e.command("restore", path).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if got := bodyOf(t, cs, "alpha"); got != "kept in the backup" {
		t.Errorf("alpha after restore: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "alpha.md")); err != nil {
		t.Errorf("alpha's file not brought back: %v", err)
	}
	if got := bodyOf(t, cs, "scratch"); got != "in the backup only" {
		t.Errorf("scratch after restore: %q", got)
	}
	if got := bodyOf(t, cs, "beta"); got != "written after, its file stays" {
		t.Errorf("beta, whose file is canonical: %q", got)
	}
	msg := fails(t, cs, "memory_read", map[string]any{"key": "later"})
	if !strings.Contains(msg, "not_found") {
		t.Errorf("later should be gone with the restore: %s", msg)
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	var keys []string
	for _, r := range out["records"].([]any) {
		keys = append(keys, r.(map[string]any)["key"].(string))
	}
	if strings.Join(keys, ",") != "alpha,beta,scratch" {
		t.Errorf("list after restore: %v", keys)
	}
}

// stopProcessesIn ends the processes whose working directory is dir and
// waits for them to go (Linux: it reads /proc; elsewhere it does nothing).
func stopProcessesIn(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids, _ := filepath.Glob("/proc/[0-9]*/cwd")
		left := 0
		for _, link := range pids {
			if cwd, err := os.Readlink(link); err != nil || cwd != dir {
				continue
			}
			left++
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(link))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Signal(syscall.SIGTERM)
				}
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("processes still working in %s", dir)
}

// A restore killed at any moment leaves the database whole: either as it
// was or as the backup, never a mix, and the next restore works.
func TestRestoreKilledLeavesOneWholeDatabase(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, `{"scope":"workspace","type":"semantic","key":"seed-%d","body":"a seeded fact, number %d, with some words to fill its page"}`+"\n", i, i)
	}
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	if err := os.WriteFile(seed, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := e.command("import", seed).CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if out, err := e.command("backup", backup).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := e.command("write", "after-backup", "--scope", "workspace", "--body", "only in the live database").CombinedOutput(); err != nil {
		t.Fatalf("write: %v\n%s", err, out)
	}
	count := func() (records int, after bool) {
		out, err := e.command("export", "--all-projects").Output()
		if err != nil {
			t.Fatalf("export after a killed restore: %v", err)
		}
		s := string(out)
		return strings.Count(s, "\n"), strings.Contains(s, `"after-backup"`)
	}
	for _, delay := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 120 * time.Millisecond} {
		cmd := e.command("restore", backup)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		switch n, after := count(); {
		case n == 5001 && after, n == 5000 && !after:
		default:
			t.Fatalf("after a restore killed at %v: %d records, the later write there: %v", delay, n, after)
		}
	}
	if out, err := e.command("restore", backup).CombinedOutput(); err != nil {
		t.Fatalf("restore after the killed ones: %v\n%s", err, out)
	}
	if n, after := count(); n != 5000 || after {
		t.Errorf("after the restore: %d records, the later write there: %v", n, after)
	}
	if out, err := e.command("doctor").CombinedOutput(); err != nil && strings.Contains(string(out), "integrity") {
		t.Errorf("doctor: %s", out)
	}
}
