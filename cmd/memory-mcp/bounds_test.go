package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/weave"
)

// TestReadTypesFilter weaves only the types asked for.
func TestReadTypesFilter(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "fact-one", "body": "A durable fact."})
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "key": "how-to", "body": "1. make release"})
	out := ok(t, cs, "memory_read", map[string]any{"types": []string{"procedural"}})
	block, _ := out["block"].(string)
	if !strings.Contains(block, "how-to") || strings.Contains(block, "fact-one") {
		t.Errorf("types [procedural] gave block:\n%s", block)
	}
	msg := fails(t, cs, "memory_read", map[string]any{"types": []string{"nonsense"}})
	if !strings.HasPrefix(msg, "invalid_argument") || !strings.Contains(msg, "types") {
		t.Errorf("bad type in types: %q", msg)
	}
}

// TestSchemasHaveNoTypeUnions walks every tool's input and output schema:
// some clients refuse a "type" that is an array or names "null", so
// optional fields are simply left out of "required".
func TestSchemasHaveNoTypeUnions(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		for part, schema := range map[string]any{"in": tool.InputSchema, "out": tool.OutputSchema} {
			if schema == nil {
				t.Errorf("%s has no %sput schema", tool.Name, part)
				continue
			}
			b, err := json.Marshal(schema)
			if err != nil {
				t.Fatal(err)
			}
			var s any
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			walkSchema(t, tool.Name+" "+part, s)
		}
	}
}

// walkSchema checks one schema and the schemas nested in it.
func walkSchema(t *testing.T, path string, v any) {
	t.Helper()
	s, isMap := v.(map[string]any)
	if !isMap {
		return
	}
	if typ, has := s["type"]; has {
		if name, isString := typ.(string); !isString || name == "null" {
			t.Errorf("%s: type %v", path, typ)
		}
	}
	if props, isMap := s["properties"].(map[string]any); isMap {
		for k, c := range props {
			walkSchema(t, path+"."+k, c)
		}
	}
	walkSchema(t, path+"[]", s["items"])
	walkSchema(t, path+"{}", s["additionalProperties"])
}

// An argument a tool does not take is refused by name, with the ones it
// does take.
func TestUnknownArgumentNamed(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "k", "body": "b", "color": "red"})
	if !strings.HasPrefix(msg, "invalid_argument: ") || !strings.Contains(msg, "color") || !strings.Contains(msg, "body") {
		t.Errorf("memory_write with color: %q, want an invalid_argument naming color and what it takes", msg)
	}
	if strings.Contains(msg, "red") {
		t.Errorf("the refusal quotes the value: %q", msg)
	}
}

// TestTTLBounded refuses a ttl_seconds that is not positive or longer than
// a hundred years: a huge one used to overflow into a past expiry that
// deleted the record and its file.
func TestTTLBounded(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "keep-me", "body": "Still here."})
	const century = 100 * 365 * 24 * 60 * 60
	for _, sec := range []any{0, -5, century + 1, int64(1) << 62, uint64(1<<63 - 1)} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"memory_write", map[string]any{"type": "semantic", "key": "keep-me", "body": "Replaced.", "ttl_seconds": sec}},
			{"memory_update", map[string]any{"key": "keep-me", "ttl_seconds": sec}},
		} {
			msg := fails(t, cs, c.tool, c.args)
			if !strings.HasPrefix(msg, "invalid_argument") || !strings.Contains(msg, "ttl_seconds") {
				t.Errorf("%s ttl_seconds %v: %q", c.tool, sec, msg)
			}
		}
	}
	if got := bodyOf(t, cs, "keep-me"); got != "Still here." {
		t.Errorf("body after refused writes: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "keep-me.md")); err != nil {
		t.Errorf("mirrored file: %v", err)
	}
	out := ok(t, cs, "memory_update", map[string]any{"key": "keep-me", "ttl_seconds": century})
	exp, err := time.Parse(time.RFC3339, out["record"].(map[string]any)["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if exp.Year() < time.Now().Year()+99 {
		t.Errorf("a century's ttl expires at %v", exp)
	}
}

// fakeAWSKey is storetest.FakeAWSKey.
func fakeAWSKey() string { return storetest.FakeAWSKey() }

// leaks reports whether s holds the distinctive tail of secret, in any case.
func leaks(s, secret string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(secret[len(secret)-10:]))
}

// TestErrorsNeverEchoSecrets sends a secret-shaped value into every field
// of every tool, every part of a resource URI and the recall prompt, and
// checks that no reply and no log line carries any of it back.
func TestErrorsNeverEchoSecrets(t *testing.T) {
	secret := fakeAWSKey()
	dirty := "prod-" + secret
	e := newEnv(t)
	cmd := e.command()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "base", "body": "A fact."})

	calls := []struct {
		tool string
		args map[string]any
	}{}
	add := func(tool string, base map[string]any, field string, v any) {
		args := map[string]any{}
		for k, x := range base {
			args[k] = x
		}
		args[field] = v
		calls = append(calls, struct {
			tool string
			args map[string]any
		}{tool, args})
	}
	write := map[string]any{"type": "semantic", "key": "k", "body": "b"}
	for _, f := range []string{"type", "key", "body", "description", "scope", "session_id", "confidence", "ttl_seconds"} {
		add("memory_write", write, f, dirty)
	}
	add("memory_write", write, "tags", []string{dirty})
	add("memory_write", write, "metadata", map[string]any{"m": dirty})
	add("memory_write", write, "metadata", map[string]any{dirty: "v"})
	add("memory_write", write, dirty, "x")
	for _, f := range []string{"key", "id", "type", "scope", "body", "description", "confidence", "ttl_seconds"} {
		add("memory_update", map[string]any{"key": "base"}, f, dirty)
	}
	add("memory_update", map[string]any{"key": "base"}, "tags", []string{dirty})
	add("memory_update", map[string]any{"key": "base"}, "metadata", map[string]any{dirty: dirty})
	for _, f := range []string{"key", "id", "type", "scope"} {
		add("memory_delete", map[string]any{"key": "base"}, f, dirty)
		add("memory_read", map[string]any{"key": "base"}, f, dirty)
	}
	for _, f := range []string{"query", "max_tokens", "types"} {
		add("memory_read", map[string]any{}, f, dirty)
	}
	add("memory_read", map[string]any{}, "types", []string{dirty})
	for _, f := range []string{"type", "scope", "tag", "limit", "cursor"} {
		add("memory_list", map[string]any{}, f, dirty)
	}
	for _, f := range []string{"query", "type", "scope", "since", "limit", "min_score", "tags"} {
		add("memory_search", map[string]any{"query": "fact"}, f, dirty)
	}
	add("memory_search", map[string]any{"query": "fact"}, "tags", []string{dirty})
	capture := map[string]any{"session_id": "s1"}
	for _, f := range []string{"session_id", "plan", "outcome"} {
		add("memory_capture", capture, f, dirty)
	}
	add("memory_capture", capture, "statements", []string{"Always say " + dirty + "."})
	add("memory_capture", capture, "tool_sequences", []map[string]any{{"name": dirty, "steps": []string{"make"}, "succeeded": true}})
	add("memory_capture", capture, "tool_sequences", []map[string]any{{"name": "n", "steps": []string{dirty}, "succeeded": dirty}})

	for _, c := range calls {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			if leaks(err.Error(), secret) {
				t.Errorf("%s %v: the error holds the secret: %v", c.tool, c.args, err)
			}
			continue
		}
		b, _ := json.Marshal(res)
		if leaks(string(b), secret) {
			t.Errorf("%s %v: the reply holds the secret: %s", c.tool, c.args, b)
		}
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: dirty, Arguments: map[string]any{}}); err == nil || leaks(err.Error(), secret) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: dirty}); err == nil || leaks(err.Error(), secret) {
		t.Errorf("unknown prompt: %v", err)
	}
	// Errors with nothing secret in them keep their words.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_wrote", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "memory_wrote"`) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "recall", Arguments: map[string]string{"max_tokens": "lots"}}); err == nil || !strings.Contains(err.Error(), "max_tokens must be a whole number") {
		t.Errorf("prompt max_tokens: %v", err)
	}
	for args, want := range map[string]string{
		`{"type":"semantic","key":"k","body":"b","scope":"` + dirty + `"}`:       "invalid_argument: scope must be one of project, workspace, tenant, system",
		`{"type":"semantic","key":"k","body":"b","ttl_seconds":"` + dirty + `"}`: "invalid_argument: ttl_seconds must be a whole number from 1 to 3153600000",
		`{"type":"semantic","key":"k","body":"b","` + dirty + `":1}`:             "invalid_argument: arguments hold a field this tool does not take",
		`{"type":"semantic","body":"b"}`:                                         "invalid_argument: key is required",
		`{"type":"semantic","key":"` + dirty + `","body":"b"}`:                   "secret_rejected: key looks like a secret (rule aws-access-key-id",
	} {
		if msg := fails(t, cs, "memory_write", json.RawMessage(args)); !strings.HasPrefix(msg, want) {
			t.Errorf("memory_write %s: %q, want it to start %q", args, msg, want)
		}
	}
	msg := fails(t, cs, "memory_capture", map[string]any{"session_id": "s", "tool_sequences": []any{map[string]any{"steps": []string{"make"}, "succeeded": dirty}}})
	if want := "invalid_argument: tool_sequences must be a list whose items are each an object with the fields name, steps, succeeded (steps, succeeded required)"; msg != want {
		t.Errorf("capture: %q, want %q", msg, want)
	}
	for _, uri := range []string{
		"memory://project/semantic/" + dirty, "memory://" + dirty + "/semantic/base", "memory://project/" + dirty + "/base",
		"memory://project/semantic/base/" + dirty,
	} {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err == nil {
			t.Errorf("read %s: no error", uri)
		} else if b, _ := json.Marshal(err); leaks(err.Error(), secret) || leaks(string(b), secret) {
			t.Errorf("read resource: the error holds the secret: %v %s", err, b)
		}
	}
	for _, args := range []map[string]string{{"max_tokens": dirty}, {"query": dirty}} {
		res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "recall", Arguments: args})
		b, _ := json.Marshal(res)
		if (err != nil && leaks(err.Error(), secret)) || leaks(string(b), secret) {
			t.Errorf("prompt %v: the reply holds the secret: %v %s", args, err, b)
		}
	}
	cs.Close()
	if leaks(stderr.String(), secret) {
		t.Errorf("the server's log holds the secret:\n%s", stderr.String())
	}
	db, _ := os.ReadFile(e.db)
	wal, _ := os.ReadFile(e.db + "-wal")
	if leaks(string(db)+string(wal), secret) {
		t.Error("the database holds the secret")
	}
}

// runCLI runs the binary with args and stdin in e and returns its output.
func runCLI(t *testing.T, e env, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := e.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, s strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &s
	err = cmd.Run()
	return o.String(), s.String(), err
}

// TestSecretKeysRefused refuses a key holding an AWS key id, which
// lower-casing would otherwise hide from the scan, on every path a key
// comes in by, and never shows it back.
func TestSecretKeysRefused(t *testing.T) {
	secret := fakeAWSKey()
	dirty := "prod-" + secret
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "base", "body": "A fact."})
	dir := filepath.Join(e.root, ".prometheus", "memories")
	check := func(where, msg string) {
		t.Helper()
		if !strings.Contains(msg, "secret_rejected") {
			t.Errorf("%s: %q, want secret_rejected", where, msg)
		}
		if leaks(msg, secret) {
			t.Errorf("%s: the message holds the secret: %s", where, msg)
		}
	}
	check("write", fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": dirty, "body": "b"}))
	check("write lower", fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": strings.ToLower(dirty), "body": "b"}))
	check("write tag", fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "k", "body": "b", "tags": []string{dirty}}))
	check("update", fails(t, cs, "memory_update", map[string]any{"key": dirty, "body": "b"}))
	check("capture session", fails(t, cs, "memory_capture", map[string]any{"session_id": dirty, "plan": "p"}))
	out := ok(t, cs, "memory_capture", map[string]any{"session_id": "s1", "tool_sequences": []map[string]any{
		{"name": dirty, "steps": []string{"make"}, "succeeded": true},
		{"steps": []string{"deploy " + strings.ToLower(dirty)}, "succeeded": true},
	}})
	if b, _ := json.Marshal(out); len(out["refused"].([]any)) != 2 || leaks(string(b), secret) {
		t.Errorf("capture: %s", b)
	}

	jsonl := `{"scope":"project","type":"semantic","key":"` + dirty + `","body":"x"}` + "\n" +
		`{"scope":"project","type":"semantic","key":"fine","body":"x","id":"` + dirty + `"}` + "\n"
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(jsonl), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, e, "", "import", p)
	if err == nil || strings.Count(stderr, "secret_rejected") != 2 || leaks(stdout+stderr, secret) {
		t.Errorf("import: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	for _, args := range [][]string{{"show", dirty}, {"rm", dirty}, {"show", strings.ToLower(dirty)}} {
		stdout, stderr, err := runCLI(t, e, "", args...)
		if err == nil || !strings.Contains(stderr, "secret_rejected") || leaks(stdout+stderr, secret) {
			t.Errorf("%v: %v\nstdout: %s\nstderr: %s", args, err, stdout, stderr)
		}
	}

	// A markdown file named after a secret is reported without its name
	// and imports nothing.
	if err := os.WriteFile(filepath.Join(dir, dirty+".md"), []byte("# A note\n\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "memory_list", map[string]any{})
	b, _ := json.Marshal(res)
	if leaks(string(b), secret) || !strings.Contains(string(b), "looks like a secret") {
		t.Errorf("list with a secret-named file: %s", b)
	}
	for _, r := range ok(t, cs, "memory_list", map[string]any{})["records"].([]any) {
		if k := r.(map[string]any)["key"].(string); k != "base" && k != "s1" {
			t.Errorf("record %q was stored", k)
		}
	}
	cs.Close()
	for _, f := range []string{e.db, e.db + "-wal"} {
		if b, _ := os.ReadFile(f); leaks(string(b), secret) {
			t.Errorf("%s holds the secret", f)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, en := range entries {
		if leaks(en.Name(), secret) && en.Name() != dirty+".md" {
			t.Errorf("file %s was written", en.Name())
		}
	}
}

// TestKeysWithControlCharactersRefused refuses, rather than rewrites, a
// key holding a newline, a tab or another control character.
func TestKeysWithControlCharactersRefused(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "base", "body": "A fact."})
	for _, k := range []string{"deploy\nsteps", "deploy\tsteps", "base\n", "\tbase", "a\rb", "red\x1b[31m", "a\u0085b", "a\x7fb"} {
		msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": k, "body": "b"})
		if !strings.HasPrefix(msg, "invalid_argument: key") || !strings.Contains(msg, "control character") {
			t.Errorf("write %q: %s", k, msg)
		}
		msg = fails(t, cs, "memory_read", map[string]any{"key": k})
		if !strings.HasPrefix(msg, "invalid_argument: key") {
			t.Errorf("read %q: %s", k, msg)
		}
	}
	msg := fails(t, cs, "memory_update", map[string]any{"key": "base\n", "body": "changed"})
	if !strings.HasPrefix(msg, "invalid_argument: key") {
		t.Errorf("update: %s", msg)
	}
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(`{"scope":"project","type":"semantic","key":"tab\there","body":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, e, "", "import", p); err == nil || !strings.Contains(stderr, "control character") {
		t.Errorf("import: %v %s", err, stderr)
	}
	if _, stderr, err := runCLI(t, e, "", "show", "base\n"); err == nil || !strings.Contains(stderr, "control character") {
		t.Errorf("show: %v %s", err, stderr)
	}
	dir := filepath.Join(e.root, ".prometheus", "memories")
	if err := os.WriteFile(filepath.Join(dir, "tab\there.md"), []byte("# Tab\n\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	if len(out["records"].([]any)) != 1 || len(problemPaths(out)) != 1 {
		t.Errorf("list after a file named with a tab: %v", out)
	}
	if got := bodyOf(t, cs, "base"); got != "A fact." {
		t.Errorf("base: %q", got)
	}
}

// TestLoosePermissionsTightened starts the server on a database that an
// older tool or a copy left readable by others: the default directory is
// made 0700 and the files 0600; a directory of the user's choosing that
// anyone may write to is refused with a message saying what to do.
func TestLoosePermissionsTightened(t *testing.T) {
	e := newEnv(t)
	ok(t, connect(t, e, nil), "memory_write", map[string]any{"type": "semantic", "key": "base", "body": "A fact."})
	dir := filepath.Dir(e.db)
	for p, m := range map[string]os.FileMode{dir: 0o755, e.db: 0o644} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := bodyOf(t, connect(t, e, nil), "base"); got != "A fact." {
		t.Errorf("body: %q", got)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, e.db: 0o600, e.db + "-wal": 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			if os.IsNotExist(err) && p != dir && p != e.db {
				continue
			}
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(p), fi.Mode().Perm(), want)
		}
	}

	open := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	e.db = filepath.Join(open, "memory.db")
	_, stderr, err := runCLI(t, e, "", "list")
	if err == nil || !strings.Contains(stderr, "chmod 700") {
		t.Errorf("a database in a directory anyone may write: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(e.db); err == nil {
		t.Errorf("the database was created in a directory anyone may write")
	}
}

// TestTinyRecallBudget asks for recall blocks of 1 to 20 tokens: each is
// valid markdown within its budget, never the 17 tokens a budget of 1 once
// returned.
func TestTinyRecallBudget(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	for _, tc := range []struct{ budget, minWant int }{{1, 0}, {8, 0}, {20, 1}} {
		out := ok(t, cs, "memory_read", map[string]any{"max_tokens": tc.budget})
		if n := int(out["tokens"].(float64)); n > tc.budget || n < tc.minWant {
			t.Errorf("empty store, budget %d: %d tokens: %q", tc.budget, n, out["block"])
		}
	}
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "base", "body": "A fact."})
	w := weave.New()
	for budget := 1; budget <= 20; budget++ {
		res := call(t, cs, "memory_read", map[string]any{"max_tokens": budget})
		out := ok(t, cs, "memory_read", map[string]any{"max_tokens": budget})
		block, _ := out["block"].(string)
		if n := int(out["tokens"].(float64)); n > budget || n != w.Count(block) {
			t.Errorf("budget %d: %d tokens: %q", budget, n, block)
		}
		if n := w.Count(text(res)); n > budget {
			t.Errorf("budget %d: the text is %d tokens: %q", budget, n, text(res))
		}
		if budget >= 8 && block == "" {
			t.Errorf("budget %d: empty block", budget)
		}
		if block != "" && !strings.HasSuffix(block, "\n") {
			t.Errorf("budget %d: block does not end in a newline: %q", budget, block)
		}
	}
}

// TestListTextPages pages through memory_list by its text alone, as an
// agent that reads only the text does, and checks that counts read as
// English.
func TestListTextPages(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	for _, k := range []string{"alpha", "bravo", "charlie"} {
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": k, "body": "About " + k + "."})
	}
	seen := map[string]bool{}
	args := map[string]any{"limit": 2}
	for page := 0; page < 3; page++ {
		txt := text(call(t, cs, "memory_list", args))
		for _, k := range []string{"alpha", "bravo", "charlie"} {
			if strings.Contains(txt, "- "+k+" ") {
				seen[k] = true
			}
		}
		_, rest, more := strings.Cut(txt, `pass cursor "`)
		if !more {
			if !strings.HasPrefix(txt, "1 memory\n") {
				t.Errorf("last page: %q", txt)
			}
			break
		}
		cursor, _, _ := strings.Cut(rest, `"`)
		args = map[string]any{"limit": 2, "cursor": cursor}
	}
	if len(seen) != 3 {
		t.Errorf("paging by the text saw %v", seen)
	}
	if txt := text(call(t, cs, "memory_search", map[string]any{"query": "charlie"})); !strings.HasPrefix(txt, `1 result for "charlie"`) {
		t.Errorf("search: %q", txt)
	}
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "missing"}); !strings.HasPrefix(msg, `not_found: key "missing": `) {
		t.Errorf("read missing: %q", msg)
	}
}

// TestCLIErrorsNeverEchoSecrets passes a secret-shaped value where the
// command line does not expect one: the error says what was wrong without
// showing it, or the first 40 bytes of it.
func TestCLIErrorsNeverEchoSecrets(t *testing.T) {
	secret := fakeAWSKey()
	e := newEnv(t)
	long := strings.Repeat("x", 30) + "-" + secret
	for _, args := range [][]string{
		{"prod-" + secret}, {"show", "base", "prod-" + secret}, {"show", "base", long}, {"list", "--prod-" + secret},
		{"list", "--limit", "prod-" + secret}, {"list", "--type", "prod-" + secret}, {"list", "--scope", "prod-" + secret},
		{"setup", "prod-" + secret}, {"import", "--format", "prod-" + secret, "x.jsonl"}, {"search", "prod-" + secret},
		{"show", "--id", "prod-" + secret}, {"rm", "--id", "prod-" + secret},
	} {
		stdout, stderr, _ := runCLI(t, e, "", args...)
		if leaks(stdout+stderr, secret) || strings.Contains(stdout+stderr, secret[:8]) {
			t.Errorf("%v: the output holds the secret:\n%s%s", args, stdout, stderr)
		}
	}
}

// TestImportExpiredLineKeepsLiveRecord imports an old export whose lines
// had expired: they used to replace the live records of the same keys,
// which were then purged at once with their markdown file.
func TestImportExpiredLineKeepsLiveRecord(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "body": "Current deploy steps."})
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "sys", "scope": "system", "body": "System fact."})
	p := filepath.Join(t.TempDir(), "old.jsonl")
	lines := `{"scope":"project","type":"semantic","key":"deploy","body":"Old deploy steps.","expires_at":"2001-01-01T00:00:00Z"}` + "\n" +
		`{"scope":"system","type":"semantic","key":"sys","body":"Old system fact.","expires_at":"2001-01-01T00:00:00Z"}` + "\n" +
		`{"scope":"project","type":"working","key":"gone","body":"Expired scratch.","expires_at":"2001-01-01T00:00:00Z"}` + "\n" +
		`{"scope":"project","type":"semantic","key":"deploy","body":"Far deploy steps.","expires_at":"3000-01-01T00:00:00Z"}` + "\n" +
		`{"scope":"project","type":"semantic","key":"new-one","body":"From the future.","created_at":"3000-01-01T00:00:00Z"}` + "\n"
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, _ := runCLI(t, e, "", "import", p)
	if strings.Count(stderr, "expired") < 3 || strings.Count(stderr, "refused") < 5 {
		t.Errorf("import did not say the lines had expired:\n%s", stderr)
	}
	cs2 := connect(t, e, nil)
	for k, want := range map[string]string{"deploy": "Current deploy steps.", "sys": "System fact."} {
		if got := bodyOf(t, cs2, k); got != want {
			t.Errorf("%s: %q", k, got)
		}
	}
	b, err := os.ReadFile(filepath.Join(e.root, ".prometheus", "memories", "deploy.md"))
	if err != nil || !strings.Contains(string(b), "Current deploy steps.") {
		t.Errorf("deploy.md: %v %q", err, b)
	}
}

// TestDeletedMemoryLeavesTheInstructions deletes a memory from the
// command line, after a server saved the initialize instructions listing
// it: the next session must not be told about it.
func TestDeletedMemoryLeavesTheInstructions(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "merger", "description": "Merger talks with Acme, not public", "body": "x"})
	ok(t, cs, "memory_read", map[string]any{}) // the tokenizer the saved instructions need
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "other", "body": "y"})
	saved := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		c := connect(t, e, nil)
		saved = strings.Contains(c.InitializeResult().Instructions, "Acme")
		c.Close()
		if saved {
			break
		}
	}
	if !saved {
		t.Fatal("the server never saved instructions listing the memory")
	}
	cs.Close()
	if _, stderr, err := runCLI(t, e, "", "rm", "merger"); err != nil {
		t.Fatalf("rm: %v %s", err, stderr)
	}
	if ins := connect(t, e, nil).InitializeResult().Instructions; strings.Contains(ins, "Acme") {
		t.Errorf("a deleted memory is still in the instructions:\n%s", ins)
	}
}

// TestSecretAcrossEveryClip puts a token across each place a derived text
// is clipped: a fact's description (120 bytes), a procedure's (80 bytes of
// its first step), a markdown file's first line: the whole is refused and
// no part of the token is stored.
func TestSecretAcrossEveryClip(t *testing.T) {
	token := fakeToken()
	e := newEnv(t)
	cs := connect(t, e, nil)
	stmt := "Always " + strings.Repeat("x", 120-7-10) + " " + token + " is the deploy token."
	step := "deploy " + strings.Repeat("y", 80-7-12) + " " + token
	for _, s := range []string{"s1", "s2"} {
		out := ok(t, cs, "memory_capture", map[string]any{"session_id": s, "statements": []string{stmt},
			"tool_sequences": []map[string]any{{"steps": []string{step, "make"}, "succeeded": true}}})
		if n := len(out["refused"].([]any)); n != 2 {
			t.Errorf("capture %s refused %d items: %v", s, n, out["refused"])
		}
	}
	line := strings.Repeat("word ", 40) + token + " more words"
	dir := filepath.Join(e.root, ".prometheus", "memories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clipped.md"), []byte(line+"\n\nBody.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	if r := problemReason(out, ".prometheus/memories/clipped.md"); !strings.Contains(r, "secret") {
		t.Errorf("clipped.md: %q", r)
	}
	cs.Close()
	for _, f := range []string{e.db, e.db + "-wal"} {
		b, _ := os.ReadFile(f)
		for _, part := range []string{token[:12], token[len(token)-12:]} {
			if strings.Contains(string(b), part) {
				t.Errorf("%s holds part of the token", filepath.Base(f))
			}
		}
	}
}

// TestTeamServerLogsNoSecrets sends secret-shaped values to the HTTP
// server, as a tool name, arguments and a resource URI: its log names the
// call but shows none of them.
func TestTeamServerLogsNoSecrets(t *testing.T) {
	secret := fakeAWSKey()
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	s := startTeamServer(t, e, "--rate", "1000")
	cs := connectTeam(t, s, tok)
	cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "prod-" + secret, Arguments: map[string]any{}})
	fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "prod-" + secret, "body": "x"})
	fails(t, cs, "memory_read", map[string]any{"scope": "prod-" + secret, "key": "x"})
	cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://project/semantic/prod-" + secret})
	cs.Close()
	s.stop(t)
	if log := s.stderr.String(); leaks(log, secret) || !strings.Contains(log, "memory_write") {
		t.Errorf("the server log:\n%s", log)
	}
}
