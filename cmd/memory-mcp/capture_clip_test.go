package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory/transcript"
)

// TestCaptureKeepsNoPartOfAClippedSecret runs `memory-mcp capture` on
// Claude Code transcripts where a token straddles every clip a capture
// makes: the plan's and the outcome's, an episode's and a fact's
// description, a procedure's description from its first step, a
// statement's length limit. No part of the token may reach the database
// (any column of any table, or the file's bytes) or a mirrored file.
func TestCaptureKeepsNoPartOfAClippedSecret(t *testing.T) {
	token := fakeToken()
	e := newEnv(t)
	// straddle pads s with filler to put the token k bytes before byte n.
	straddle := func(lead string, n, k int, tail string) string {
		pad := n - k - len(lead) - 1
		filler := strings.Repeat("é", pad/2) + strings.Repeat("x", pad%2)
		return lead + filler + " " + token + tail
	}
	// The plan's clip, and the episode description's (200 bytes of the plan).
	for _, plan := range []int{transcript.PlanBytes, 200} {
		for _, k := range []int{1, 4, 8, 9, 10, 20, len(token) - 1} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			user := func(text string) {
				enc.Encode(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
			}
			assistant := func(parts ...map[string]any) {
				enc.Encode(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": parts}})
			}
			result := func(id string) {
				enc.Encode(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}}})
			}
			bash := func(id, cmd string) map[string]any {
				return map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": cmd}}
			}
			user(straddle("Rotate the deploy key.", plan, k, " is the new one."))
			// A procedure whose first step holds the token at its description's clip.
			assistant(bash("t1", straddle("echo", 80, k, "")), bash("t2", "make deploy"))
			result("t1")
			result("t2")
			// Statements: at a fact description's clip, and at the length
			// limit; and one clean, which the capture keeps.
			user(straddle("Always rotate", 120, k, " first.") + " " + straddle("Never print", 300, k, " anywhere.") + " Always run make lint first.")
			assistant(map[string]any{"type": "text", "text": straddle("Rotated.", transcript.OutcomeBytes, k, " is live.")})
			tr := filepath.Join(t.TempDir(), "t.jsonl")
			if err := os.WriteFile(tr, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			session := fmt.Sprintf("clip-%d-%d", plan, k)
			out := hookCapture(t, e.command("capture"), hookPayloadFor(session, tr, e.root))
			if strings.Contains(out, token[:8]) || !strings.Contains(out, "refused plan: secret_rejected") {
				t.Errorf("%s: capture output:\n%s", session, out)
			}
		}
	}

	// Every 8-byte run of the token, in any case.
	var parts []string
	for i := 0; i+8 <= len(token); i++ {
		parts = append(parts, strings.ToLower(token[i:i+8]))
	}
	holds := func(s string) bool {
		s = strings.ToLower(s)
		for _, p := range parts {
			if strings.Contains(s, p) {
				return true
			}
		}
		return false
	}

	db, err := sql.Open("sqlite3", "file:"+e.db+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	episodes := 0
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			continue // a virtual table's module may refuse a plain scan
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				var s string
				switch v := v.(type) {
				case string:
					s = v
				case []byte:
					s = string(v)
				}
				if holds(s) {
					t.Errorf("%s.%s holds part of the token", table, cols[i])
				}
				if table == "records" && cols[i] == "type" && s == "episodic" {
					episodes++
				}
			}
		}
		rows.Close()
	}
	if episodes == 0 {
		t.Error("no episode was recorded: the check proves nothing")
	}
	var facts int
	if err := db.QueryRow(`SELECT count(*) FROM statement_sessions WHERE statement = 'always run make lint first'`).Scan(&facts); err != nil || facts == 0 {
		t.Errorf("the clean statement was not counted (%d, %v)", facts, err)
	}
	for _, f := range []string{e.db, e.db + "-wal"} {
		if b, err := os.ReadFile(f); err == nil && holds(string(b)) {
			t.Errorf("%s holds part of the token", filepath.Base(f))
		}
	}
	filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && holds(string(b)) {
				t.Errorf("%s holds part of the token", p)
			}
		}
		return nil
	})
}
