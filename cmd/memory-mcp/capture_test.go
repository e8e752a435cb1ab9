package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/transcript"
)

func transcriptPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "transcripts", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hookCapture runs `memory-mcp capture` as a Claude Code SessionEnd hook
// would, with cmd adjusted by the caller, and returns its output.
func hookCapture(t *testing.T, cmd *exec.Cmd, payload map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(payload)
	cmd.Stdin = strings.NewReader(string(b))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("capture %v: %v\nstdout: %s\nstderr: %s", payload["session_id"], err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func hookPayloadFor(session, transcript, cwd string) map[string]any {
	p := map[string]any{"session_id": session, "transcript_path": transcript, "hook_event_name": "SessionEnd", "reason": "exit"}
	if cwd != "" {
		p["cwd"] = cwd
	}
	return p
}

func records(t *testing.T, cs *mcp.ClientSession, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range ok(t, cs, "memory_list", map[string]any{"type": typ})["records"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

func bodies(t *testing.T, cs *mcp.ClientSession, typ string) []string {
	t.Helper()
	var out []string
	for _, r := range records(t, cs, typ) {
		out = append(out, bodyOf(t, cs, r["key"].(string)))
	}
	sort.Strings(out)
	return out
}

func TestCaptureHookLearnsSucceededSteps(t *testing.T) {
	e := newEnv(t)
	tr := transcriptPath(t, "retry.jsonl")
	for _, s := range []string{"h1", "h2"} {
		hookCapture(t, e.command("capture"), hookPayloadFor(s, tr, e.root))
	}
	cs := connect(t, e, nil)
	procs := records(t, cs, "procedural")
	if len(procs) != 1 || procs[0]["use_count"].(float64) != 2 {
		t.Fatalf("procedures = %v, want the build fix learned once, repeated once", procs)
	}
	want := "1. go build ./...\n2. Edit /home/dev/shop/parse.go\n3. go test ./...\n4. go vet ./..."
	if got := bodyOf(t, cs, procs[0]["key"].(string)); got != want {
		t.Errorf("procedure body:\n%s\nwant:\n%s", got, want)
	}
	ep := bodyOf(t, cs, "h1")
	if !strings.Contains(ep, "### unnamed (failed)\n\n1. make deploy ENV=staging") {
		t.Errorf("the episode does not record the failed deploy:\n%s", ep)
	}
}

func TestCaptureHookOutcomeAndWholeSentences(t *testing.T) {
	e := newEnv(t)
	tr := transcriptPath(t, "retry.jsonl")
	for _, s := range []string{"h1", "h2"} {
		hookCapture(t, e.command("capture"), hookPayloadFor(s, tr, e.root))
	}
	cs := connect(t, e, nil)
	ep := bodyOf(t, cs, "h1")
	if !strings.Contains(ep, "## Outcome\n\nThe deploy to staging failed: there are no staging credentials on this machine, so nothing was deployed.\n") {
		t.Errorf("the outcome is not the last substantive answer:\n%s", ep)
	}
	want := []string{"Always run go vet before you finish; it catches shadowed errors.", "We use squash merges for every pull request."}
	if got := bodies(t, cs, "semantic"); !cmp.Equal(got, want) {
		t.Errorf("facts (-want +got):\n%s", cmp.Diff(want, got))
	}
}

func TestCaptureHookProjectFromCWD(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(e.root, "services", "api")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir() // where the hook process happens to run
	bare := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(binary, "capture")
		cmd.Env = append([]string{"HOME=" + e.home, "PATH=" + os.Getenv("PATH"), "PROMETHEUS_MEMORY_DB_PATH=" + e.db}, extra...)
		cmd.Dir = elsewhere
		return cmd
	}
	tr := transcriptPath(t, "claude-code-session.jsonl")
	// The payload's cwd (a subdirectory of the repository) decides.
	hookCapture(t, bare(), hookPayloadFor("from-cwd", tr, sub))
	// Without one, CLAUDE_PROJECT_DIR does; the payload's cwd still beats it.
	hookCapture(t, bare("CLAUDE_PROJECT_DIR="+e.root), hookPayloadFor("from-env", tr, ""))
	hookCapture(t, bare("CLAUDE_PROJECT_DIR="+elsewhere), hookPayloadFor("cwd-wins", tr, e.root))

	cs := connect(t, e, nil)
	for _, s := range []string{"from-cwd", "from-env", "cwd-wins"} {
		if !strings.Contains(bodyOf(t, cs, s), "pagination") {
			t.Errorf("session %s was not recorded in the workspace's project", s)
		}
	}
	if len(records(t, cs, "semantic")) == 0 {
		t.Error("statements confirmed in two sessions of the project did not become a fact")
	}
	if _, err := os.Stat(filepath.Join(elsewhere, ".prometheus")); err == nil {
		t.Error("the hook's working directory got a mirror")
	}
	other := connect(t, env{home: e.home, db: e.db, root: elsewhere}, nil)
	if n := len(records(t, other, "episodic")); n != 0 {
		t.Errorf("the hook's working directory holds %d episodes", n)
	}
}

func TestCaptureHookSkipsSidechainAndEmpty(t *testing.T) {
	e := newEnv(t)
	tr := transcriptPath(t, "sidechain.jsonl")
	for _, s := range []string{"main-1", "main-2"} {
		hookCapture(t, e.command("capture"), hookPayloadFor(s, tr, e.root))
	}
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, tr := range []string{empty, transcriptPath(t, "empty.jsonl")} {
		out := hookCapture(t, e.command("capture"), hookPayloadFor(fmt.Sprint("empty-", i), tr, e.root))
		if !strings.Contains(out, "othing to capture") {
			t.Errorf("empty transcript %d: %q", i, out)
		}
	}
	cs := connect(t, e, nil)
	eps := records(t, cs, "episodic")
	if len(eps) != 2 {
		t.Errorf("episodes = %v, want main-1 and main-2 only", eps)
	}
	ep := bodyOf(t, cs, "main-1")
	for _, side := range []string{"tabs", "grep -rn", "rm -rf", "called from the order update handler"} {
		if strings.Contains(ep, side) {
			t.Errorf("the episode holds the subagent's %q:\n%s", side, ep)
		}
	}
	if !strings.Contains(ep, "Added orders/cache_test.go") {
		t.Errorf("the outcome is not the main answer:\n%s", ep)
	}
	if facts := records(t, cs, "semantic"); len(facts) != 0 {
		t.Errorf("a subagent's prompt was learned: %v", facts)
	}
	want := []string{"1. Task Search the code\n2. Write /home/dev/shop/orders/cache_test.go\n3. go test ./orders/..."}
	if got := bodies(t, cs, "procedural"); !cmp.Equal(got, want) {
		t.Errorf("procedures (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// transcriptLines writes a transcript of one prompt and one answer.
func writeTranscript(t *testing.T, prompt, answer string) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.Encode(map[string]any{"type": "user", "isSidechain": false, "message": map[string]any{"role": "user", "content": prompt}})
	enc.Encode(map[string]any{"type": "assistant", "isSidechain": false, "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": answer}}}})
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCaptureHookSecretAcrossClip(t *testing.T) {
	token := fakeToken()
	e := newEnv(t)
	// The token starts 10 bytes before the plan's clip and the outcome's.
	prompt := "Rotate the deploy key. " + strings.Repeat("x", 2000-10-24) + " " + token + " is the new one."
	answer := "Rotated. " + strings.Repeat("y", 4000-10-10) + " " + token + " is live."
	out := hookCapture(t, e.command("capture"), hookPayloadFor("clip", writeTranscript(t, prompt, answer), e.root))
	if !strings.Contains(out, "refused plan: secret_rejected") || !strings.Contains(out, "refused outcome: secret_rejected") {
		t.Errorf("capture output:\n%s", out)
	}
	for _, part := range []string{token[:10], token[len(token)-8:]} {
		if strings.Contains(out, part) {
			t.Errorf("the output holds part of the token")
		}
	}
	db, _ := os.ReadFile(e.db)
	wal, _ := os.ReadFile(e.db + "-wal")
	if strings.Contains(string(db)+string(wal), token[:10]) {
		t.Error("the database holds the start of the token")
	}
}

func TestCaptureHookIgnoresWhatWasNotSaid(t *testing.T) {
	e := newEnv(t)
	tr := transcriptPath(t, "noise.jsonl")
	for _, s := range []string{"n1", "n2"} {
		hookCapture(t, e.command("capture"), hookPayloadFor(s, tr, e.root))
	}
	cs := connect(t, e, nil)
	want := []string{"Prefer small pull requests over big ones."}
	if got := bodies(t, cs, "semantic"); !cmp.Equal(got, want) {
		t.Errorf("facts (-want +got):\n%s", cmp.Diff(want, got))
	}
	want = []string{"1. npm ci\n2. npm test"}
	if got := bodies(t, cs, "procedural"); !cmp.Equal(got, want) {
		t.Errorf("procedures (-want +got):\n%s", cmp.Diff(want, got))
	}
	if ep := bodyOf(t, cs, "n1"); !strings.Contains(ep, "## Plan\n\nReview this snippet:") {
		t.Errorf("the plan is not the first prompt the user wrote:\n%s", ep)
	}
}

func TestCaptureToolLearnsTheRightThing(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	capture := func(session, stmt string) map[string]any {
		return ok(t, cs, "memory_capture", map[string]any{
			"session_id": session, "plan": "Tidy the comparisons", "statements": []string{stmt},
			"tool_sequences": []map[string]any{{"steps": []string{"go test ./...", "go vet ./..."}, "succeeded": true}},
		})
	}
	capture("t1", "Prefer === over ==")
	capture("t2", "Prefer === over ==")
	facts := records(t, cs, "semantic")
	if len(facts) != 1 {
		t.Fatalf("facts = %v", facts)
	}
	conf := facts[0]["confidence"].(float64)
	out := capture("t3", "Prefer == over ===")
	if len(out["facts_promoted"].([]any)) != 0 || len(out["refused"].([]any)) != 0 {
		t.Errorf("the contradicting statement: %v", out)
	}
	for _, f := range records(t, cs, "semantic") {
		if f["key"] == facts[0]["key"] && f["confidence"].(float64) != conf {
			t.Errorf("\"Prefer === over ==\" moved from %v to %v", conf, f["confidence"])
		}
	}
	procs := records(t, cs, "procedural")
	if len(procs) != 1 || procs[0]["use_count"].(float64) != 3 {
		t.Fatalf("procedures = %v", procs)
	}
	before := ok(t, cs, "memory_list", map[string]any{})
	again := capture("t2", "Prefer === over ==")
	if !again["replaced"].(bool) {
		t.Errorf("re-capture: %v", again)
	}
	if after := ok(t, cs, "memory_list", map[string]any{}); !cmp.Equal(before, after) {
		t.Errorf("capturing t2 again moved something (-before +after):\n%s", cmp.Diff(before, after))
	}
}

func TestCaptureRacingItself(t *testing.T) {
	e := newFastEnv(t)
	tr := transcriptPath(t, "retry.jsonl")
	hookCapture(t, e.command("capture"), hookPayloadFor("r1", tr, e.root))
	// Two hooks for the same session at once: the second is a re-capture.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(hookPayloadFor("r2", tr, e.root))
			cmd := e.command("capture")
			cmd.Stdin = strings.NewReader(string(b))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	cs := connect(t, e, nil)
	procs := records(t, cs, "procedural")
	if len(procs) != 1 || procs[0]["use_count"].(float64) != 2 {
		t.Errorf("procedures = %v, want one used twice", procs)
	}
	facts := records(t, cs, "semantic")
	if len(facts) != 2 {
		t.Fatalf("facts = %v", facts)
	}
	for _, f := range facts {
		if f["confidence"].(float64) != 0.6 {
			t.Errorf("fact %s has confidence %v after two sessions, want 0.6", f["key"], f["confidence"])
		}
	}
	files, _ := filepath.Glob(filepath.Join(e.root, ".prometheus", "memories", "*.md"))
	if len(files) != 3 {
		t.Errorf("mirror holds %v, want the two facts and the procedure", files)
	}
}

func TestCaptureHookRefusesABadSessionDirectory(t *testing.T) {
	e := newEnv(t)
	tr := transcriptPath(t, "claude-code-session.jsonl")
	for _, cwd := range []string{"relative/dir", filepath.Join(e.root, "missing")} {
		b, _ := json.Marshal(hookPayloadFor("bad-dir", tr, cwd))
		cmd := e.command("capture")
		cmd.Stdin = strings.NewReader(string(b))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "session directory") {
			t.Errorf("cwd %q: %v\n%s", cwd, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(e.root, "missing")); err == nil {
		t.Error("a missing session directory was created")
	}
	cs := connect(t, e, nil)
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "bad-dir"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("a refused capture recorded something: %s", msg)
	}
}

func TestCaptureHookHugeAndNonASCII(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	line := func(role string, content any) {
		enc.Encode(map[string]any{"type": role, "message": map[string]any{"role": role, "content": content}})
	}
	prompt := strings.Repeat("日本語のテキスト🚀", 100000) + "\nAlways answer in English 🚀. Never use emoji in commit messages."
	line("user", prompt)
	heredoc := "cat > big.txt <<'EOF'\n" + strings.Repeat("データ", 40000) + "\nEOF"
	for i, cmd := range []string{heredoc, "wc -c big.txt", "echo 完了"} {
		line("assistant", []any{map[string]any{"type": "tool_use", "id": fmt.Sprint("t", i), "name": "Bash", "input": map[string]any{"command": cmd}}})
		line("user", []any{map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprint("t", i), "content": "ok"}})
	}
	line("assistant", strings.Repeat("完了しました。", 2000))
	tr := filepath.Join(t.TempDir(), "huge.jsonl")
	if err := os.WriteFile(tr, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"日本-1", "日本-2"} {
		hookCapture(t, e.command("capture"), hookPayloadFor(s, tr, e.root))
	}
	cs := connect(t, e, nil)
	eps := records(t, cs, "episodic")
	if len(eps) != 2 {
		t.Fatalf("episodes = %v", eps)
	}
	for _, ep := range eps {
		body := bodyOf(t, cs, ep["key"].(string))
		if !utf8.ValidString(body) || len(body) > memory.MaxBodyBytes || !utf8.ValidString(ep["description"].(string)) {
			t.Errorf("episode %s: %d bytes, valid %v", ep["key"], len(body), utf8.ValidString(body))
		}
		plan := body[strings.Index(body, "## Plan\n\n")+9:]
		plan = plan[:strings.Index(plan, "\n")]
		if len(plan) > transcript.PlanBytes+len("…") {
			t.Errorf("plan is %d bytes", len(plan))
		}
	}
	want := []string{"Always answer in English 🚀.", "Never use emoji in commit messages."}
	if got := bodies(t, cs, "semantic"); !cmp.Equal(got, want) {
		t.Errorf("facts (-want +got):\n%s", cmp.Diff(want, got))
	}
	// The heredoc makes the procedure's body larger than any body may be:
	// it is refused, the session is still recorded.
	if procs := records(t, cs, "procedural"); len(procs) != 0 {
		t.Errorf("procedures = %v", procs)
	}
}
