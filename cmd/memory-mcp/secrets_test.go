package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeToken makes a GitHub-token-shaped value at test time, so that no
// realistic key is ever committed.
func fakeToken() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(7, 11))
	b := make([]byte, 36)
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	b[0], b[1] = 'Q', '7'
	return "gh" + "p_" + string(b)
}

func TestSecretsRefusedOnEveryPath(t *testing.T) {
	token := fakeToken()
	secretPart := token[4:]
	e := newEnv(t)
	cs := connect(t, e, nil)
	noLeak := func(where, msg string) {
		t.Helper()
		if strings.Contains(msg, secretPart[:8]) {
			t.Errorf("%s leaks the secret: %s", where, msg)
		}
	}

	msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "ci", "body": "export GITHUB_TOKEN=" + token})
	if !strings.HasPrefix(msg, "secret_rejected:") || !strings.Contains(msg, "body") || !strings.Contains(msg, "github-pat") {
		t.Errorf("write: %s", msg)
	}
	noLeak("write", msg)
	msg = fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "ci", "body": "fine", "tags": []string{"ok", token}})
	if !strings.HasPrefix(msg, "secret_rejected:") || !strings.Contains(msg, "tags[1]") {
		t.Errorf("write tag: %s", msg)
	}
	msg = fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "ci", "body": "fine", "metadata": map[string]string{"auth": "Bearer " + token}})
	if !strings.HasPrefix(msg, "secret_rejected:") || !strings.Contains(msg, "metadata") {
		t.Errorf("write metadata: %s", msg)
	}

	// Writes that skip the markdown check (a note, a wider scope's fact)
	// are scanned all the same.
	for _, args := range []map[string]any{
		{"type": "working", "key": "scratch", "body": "token " + token},
		{"type": "episodic", "key": "session-notes", "body": "fine", "metadata": map[string]string{"k": token}},
		{"type": "semantic", "scope": "workspace", "key": "ci-" + strings.ToLower(token[4:20]), "body": "fine", "tags": []string{token}},
	} {
		msg := fails(t, cs, "memory_write", args)
		if !strings.HasPrefix(msg, "secret_rejected:") {
			t.Errorf("write %v: %s", args["type"], msg)
		}
		noLeak("write "+args["type"].(string), msg)
	}

	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "ci", "body": "CI reads the token from the vault."})
	msg = fails(t, cs, "memory_update", map[string]any{"key": "ci", "description": "token " + token})
	if !strings.HasPrefix(msg, "secret_rejected:") || !strings.Contains(msg, "description") {
		t.Errorf("update: %s", msg)
	}
	noLeak("update", msg)
	if got := bodyOf(t, cs, "ci"); got != "CI reads the token from the vault." {
		t.Errorf("a refused update changed the record: %q", got)
	}

	out := ok(t, cs, "memory_capture", map[string]any{
		"session_id": "s-secret", "plan": "rotate keys",
		"statements":     []string{"Always use the vault.", "Remember the token is " + token},
		"tool_sequences": []map[string]any{{"name": "login", "steps": []string{"gh auth login --with-token " + token, "gh repo list"}, "succeeded": true}},
	})
	refused := out["refused"].([]any)
	if len(refused) != 2 {
		t.Fatalf("capture refused %v", refused)
	}
	items := refused[0].(map[string]any)["item"].(string) + " " + refused[1].(map[string]any)["item"].(string)
	if !strings.Contains(items, "statements[1]") || !strings.Contains(items, "tool_sequences[0]") {
		t.Errorf("refused items: %s", items)
	}
	if len(out["facts_pending"].([]any)) != 1 {
		t.Errorf("the clean statement did not proceed: %v", out)
	}
	ep := ok(t, cs, "memory_read", map[string]any{"key": "s-secret"})
	noLeak("episode", ep["record"].(map[string]any)["body"].(string))

	// A markdown file with a secret: left untouched, reported, not imported.
	dir := filepath.Join(e.root, ".prometheus", "memories")
	file := filepath.Join(dir, "leaky.md")
	content := "# Deploy\n\nUse " + token + " to push.\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "memory_list", map[string]any{})
	if res.IsError {
		t.Fatal(text(res))
	}
	listed := text(res)
	if !strings.Contains(listed, "leaky.md") || !strings.Contains(listed, "secret") {
		t.Errorf("the refused file is not reported:\n%s", listed)
	}
	noLeak("list", listed)
	if got, _ := os.ReadFile(file); string(got) != content {
		t.Error("the refused file was changed")
	}
	if msg := fails(t, cs, "memory_read", map[string]any{"key": "leaky"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("the refused file was imported: %s", msg)
	}
	db, _ := os.ReadFile(e.db)
	wal, _ := os.ReadFile(e.db + "-wal")
	if strings.Contains(string(db)+string(wal), secretPart) {
		t.Error("the database holds the secret")
	}
}
