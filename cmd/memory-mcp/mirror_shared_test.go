package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
)

// TestTwoServersAndAHumanOnOneMirror runs two server processes on one
// workspace and one database while a person edits the markdown files.
//
// In the background both servers write, update and delete the same keys
// at random, and the person rewrites, removes, renames, copies and creates
// files of those keys, and rewrites and removes files of keys only they
// touch. Meanwhile, on keys of their own, the
// servers and the person take turns in a fixed order, each step checked
// through the other server: every write and every hand edit must be seen
// at once, by the other process too, and no step may be refused.
//
// Afterwards a fresh server syncs and reports no problem, the files match
// the database exactly, every key holds a body that was acknowledged or
// written by hand (never one from a call that failed), and the keys only
// the person touched hold what they last did.
func TestTwoServersAndAHumanOnOneMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("two processes and a person, racing")
	}
	e := newFastEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var servers [2]*mcp.ClientSession
	var stderrs [2]*lockedBuffer
	for i := range servers {
		cs, stderr, err := startClient(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		servers[i], stderrs[i] = cs, stderr
	}
	// What the servers said, for any failure found below (a file kept in
	// the temporary directory is explained there).
	defer func() {
		if t.Failed() {
			for i, s := range stderrs {
				t.Logf("server %d stderr:\n%s", i, clipLog(s.String()))
			}
		}
	}()
	dir := filepath.Join(e.root, ".prometheus", "memories")
	h := &written{acked: map[string]bool{}, failed: map[string]bool{}, hand: map[string]bool{}}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, cs := range servers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			h.churn(ctx, t, cs, i, "shared", stop)
		}()
		go func() {
			defer wg.Done()
			h.churn(ctx, t, cs, i, "tool", stop)
		}()
	}
	handOnly := map[string]string{} // key: its last body by hand, "" when removed
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("shared-%d", r.IntN(4))
			if n%3 == 0 {
				key = fmt.Sprintf("hand-%d", r.IntN(3))
			}
			path := filepath.Join(dir, key+".md")
			other := filepath.Join(dir, fmt.Sprintf("shared-%d.md", r.IntN(4)))
			op := r.IntN(6)
			switch {
			case op == 0:
				if err := os.Remove(path); err == nil || errors.Is(err, os.ErrNotExist) {
					if strings.HasPrefix(key, "hand-") {
						handOnly[key] = ""
					}
				}
			case op == 1 && strings.HasPrefix(key, "shared-"):
				os.Rename(path, other) // git mv, perhaps over another file
			case op == 2 && strings.HasPrefix(key, "shared-"):
				if data, err := os.ReadFile(path); err == nil {
					os.WriteFile(other, data, 0o644) // a copy to start a new one
				}
			default:
				body := fmt.Sprintf("By hand, edit %d of %s.", n, key)
				h.add(h.hand, body)
				if err := handEdit(path, key, body); err != nil {
					t.Errorf("hand edit: %v", err)
					return
				}
				if strings.HasPrefix(key, "hand-") {
					handOnly[key] = body
				}
			}
			time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond)
		}
	}()

	// The turns, on keys nobody else touches.
	a, b := servers[0], servers[1]
	for round := range 8 {
		for k := range 3 {
			key := fmt.Sprintf("turn-%d", k)
			path := filepath.Join(dir, key+".md")
			body := func(step string) string { return fmt.Sprintf("%s, round %d: %s.", key, round, step) }
			step := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Errorf("%s, round %d, %s: %v", key, round, what, err)
				}
			}
			step("a writes", toolWrite(ctx, a, key, body("a writes")))
			step("b reads it", expectBody(ctx, b, key, body("a writes")))
			step("b updates", toolUpdate(ctx, b, key, body("b updates")))
			step("a reads it", expectBody(ctx, a, key, body("b updates")))
			step("edit by hand", handEdit(path, key, body("edited by hand")))
			step("a reads the edit", expectBody(ctx, a, key, body("edited by hand")))
			step("a updates", toolUpdate(ctx, a, key, body("a updates")))
			step("b reads it", expectBody(ctx, b, key, body("a updates")))
			step("remove by hand", os.Remove(path))
			step("b finds it gone", expectBody(ctx, b, key, ""))
			step("b writes again", toolWrite(ctx, b, key, body("b writes again")))
			step("a reads it", expectBody(ctx, a, key, body("b writes again")))
			step("a deletes", toolDelete(ctx, a, key))
			step("b finds it gone", expectBody(ctx, b, key, ""))
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s, round %d: file after the delete: %v", key, round, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	for _, cs := range servers {
		cs.Close()
	}
	// A fresh server settles what is on disk.
	cs, _, err := startClient(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	out, err := callTool(ctx, cs, "memory_list", map[string]any{"limit": 100})
	if err != nil {
		t.Fatal(err)
	}
	if ps := problemPaths(out); len(ps) > 0 {
		t.Errorf("the fresh server reports problems: %v", ps)
	}
	cs.Close()
	db := openDB(t, e.db)
	integrityCheck(t, db)
	recs := mirroredInDB(t, db, projectOf(t, e))
	// The files match the database. Not their ids: a file made by hand has
	// no id line, and a copy keeps the one it was copied with, until a
	// tool writes them.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, en := range entries {
		stem, ok := strings.CutSuffix(en.Name(), ".md")
		if !ok {
			if en.Name() != ".tmp" {
				t.Errorf("unexpected entry %s in the memories directory", en.Name())
			}
			continue
		}
		files[stem] = true
		data, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := mirror.Decode(stem, data)
		if err != nil {
			t.Errorf("%s: %v", en.Name(), err)
			continue
		}
		if r, ok := recs[stem]; !ok || r.body != got.Body {
			t.Errorf("%s holds %s %q; the database %s %q", en.Name(), got.ID, got.Body, r.id, r.body)
		}
	}
	for key := range recs {
		if !files[key] {
			t.Errorf("record %s has no file", key)
		}
	}
	// Only .gitignore, and a person's edit a server could not put back
	// (its rename raced another edit), which it keeps there and names.
	tmp, _ := os.ReadDir(filepath.Join(dir, ".tmp"))
	for _, en := range tmp {
		kept := false
		for _, s := range stderrs {
			kept = kept || strings.Contains(s.String(), "the edit is in the temporary directory") && strings.Contains(s.String(), en.Name())
		}
		if en.Name() != ".gitignore" && !kept {
			t.Errorf("temporary file left: %s", en.Name())
		}
	}
	for key, r := range recs {
		switch {
		case h.failed[r.body]:
			t.Errorf("%s holds %q, from a call that failed", key, r.body)
		case !h.acked[r.body] && !h.hand[r.body]:
			t.Errorf("%s holds %q, which nobody wrote", key, r.body)
		}
	}
	for key, body := range handOnly {
		if got, ok := recs[key]; body == "" && ok {
			t.Errorf("%s was removed by hand last; its record holds %q", key, got.body)
		} else if body != "" && got.body != body {
			t.Errorf("%s holds %q; it was last edited by hand to %q", key, got.body, body)
		}
	}
	t.Logf("tool calls: %d acknowledged, %s; %d hand edits; %d records at the end",
		len(h.acked), h.codes(), len(h.hand), len(recs))
}

// written is what was written where, each body unique.
type written struct {
	mu                   sync.Mutex
	acked, failed, hand  map[string]bool
	conflicts, notFounds int
	cancelled            int
}

func (h *written) add(m map[string]bool, body string) {
	h.mu.Lock()
	m[body] = true
	h.mu.Unlock()
}

func (h *written) codes() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%d cancelled, %d refused as conflicts, %d not found", h.cancelled, h.conflicts, h.notFounds)
}

// churn writes, updates and deletes the keys named prefix-0 to prefix-3 at
// random until stop. not_found (deleted meanwhile) is expected. On the
// shared keys, which the person edits, so is a conflict: a file changed
// by hand that no sync has imported yet. The tool keys nobody edits by
// hand, and their calls are cancelled at random moments, as a client
// gives up on a call: a cancelled call may or may not have happened, but
// never leaves a file that the next call takes for a human's edit.
func (h *written) churn(ctx context.Context, t *testing.T, cs *mcp.ClientSession, server int, prefix string, stop chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(server), uint64(len(prefix))))
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("%s-%d", prefix, r.IntN(4))
		body := fmt.Sprintf("Server %d, call %d, on %s.", server, n, key)
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if prefix == "tool" && r.IntN(2) == 0 {
			callCtx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(3000))*time.Microsecond)
		}
		var err error
		switch r.IntN(5) {
		case 0, 1:
			err = toolWrite(callCtx, cs, key, body)
		case 2, 3:
			err = toolUpdate(callCtx, cs, key, body)
		case 4:
			body = ""
			err = toolDelete(callCtx, cs, key)
		}
		cancel()
		h.mu.Lock()
		switch {
		case err == nil:
			h.acked[body] = true
		case callCtx.Err() != nil && ctx.Err() == nil:
			h.cancelled++
			h.acked[body] = true // it may have happened
		case prefix == "shared" && strings.Contains(err.Error(), "tool error: "+string(memory.CodeConflict)+":"):
			h.conflicts++
			h.failed[body] = true
		case strings.Contains(err.Error(), "tool error: "+string(memory.CodeNotFound)+":"):
			h.notFounds++
			h.failed[body] = true
		default:
			t.Errorf("server %d: %v", server, err)
		}
		h.mu.Unlock()
	}
}

func toolWrite(ctx context.Context, cs *mcp.ClientSession, key, body string) error {
	_, err := callTool(ctx, cs, "memory_write", map[string]any{"type": "semantic", "key": key, "body": body})
	return err
}

func toolUpdate(ctx context.Context, cs *mcp.ClientSession, key, body string) error {
	_, err := callTool(ctx, cs, "memory_update", map[string]any{"type": "semantic", "key": key, "body": body})
	return err
}

func toolDelete(ctx context.Context, cs *mcp.ClientSession, key string) error {
	_, err := callTool(ctx, cs, "memory_delete", map[string]any{"type": "semantic", "key": key})
	return err
}

// expectBody reads key and checks its body; "" means it must not exist.
func expectBody(ctx context.Context, cs *mcp.ClientSession, key, want string) error {
	out, err := callTool(ctx, cs, "memory_read", map[string]any{"type": "semantic", "key": key})
	if want == "" {
		if err == nil || !strings.Contains(err.Error(), string(memory.CodeNotFound)) {
			return fmt.Errorf("read: %v, want not_found (%v)", err, out)
		}
		return nil
	}
	if err != nil {
		return err
	}
	rec, _ := out["record"].(map[string]any)
	if got, _ := rec["body"].(string); got != want {
		return fmt.Errorf("read %q, want %q", got, want)
	}
	return nil
}

// handEdit rewrites key's file with body the way an editor does (in place,
// not atomically), keeping its front matter; a missing file is created
// with none.
func handEdit(path, key, body string) error {
	rec := memory.Record{Type: memory.Semantic, Key: key}
	if data, err := os.ReadFile(path); err == nil {
		if got, err := mirror.Decode(key, data); err == nil {
			rec = got
		}
	}
	rec.Body = body
	data := mirror.Encode(rec)
	if rec.ID == "" {
		data = []byte(body + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
