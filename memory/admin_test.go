package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/scope"
)

func TestRestoreKeepsEveryField(t *testing.T) {
	ctx := context.Background()
	s, _ := mustOpen(t)
	last := time.Date(2026, 4, 1, 9, 0, 0, 5, time.UTC)
	exp := time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC)
	in := Record{
		ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Scope: scope.Project, Type: Working, Key: "scratch",
		Description: "d", Body: "b", Tags: []string{"x"}, Confidence: 0.7, UseCount: 4, LastAccessedAt: &last,
		CreatedAt: time.Date(2026, 3, 1, 0, 0, 0, 1, time.UTC), UpdatedAt: time.Date(2026, 3, 2, 0, 0, 0, 2, time.UTC),
		ExpiresAt: &exp, SessionID: "s", Source: FromCapture, Metadata: map[string]string{"k": "v"},
	}
	got, created, err := s.Restore(ctx, projA, in)
	if err != nil || !created {
		t.Fatalf("restore: %v created=%v", err, created)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("returned record (-want +got):\n%s", diff)
	}
	read, err := s.Peek(ctx, projA.ID, Selector{ID: in.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, read); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}

	// The same id on another key is refused; a secret in any field is too.
	other := in
	other.Key = "other"
	if _, _, err := s.Restore(ctx, projA, other); !errors.Is(err, ErrConflict) {
		t.Errorf("id reused for another key: %v", err)
	}
	leak := in
	leak.ID, leak.Key, leak.Body = "", "leak", "AKIA"+"Z7QW3RTY5UXP2KLM"+" is the key"
	if _, _, err := s.Restore(ctx, projA, leak); !errors.Is(err, ErrSecretRejected) {
		t.Errorf("secret body: %v", err)
	}
}

// What only an import carries is checked like the rest: a source that is
// not one of the four (a secret there is refused as unknown, never
// stored) and a use count out of range, which near the top of an int64
// would overflow on the record's next read and break every listing.
func TestRestoreRefusesSourceAndUseCountOutOfRange(t *testing.T) {
	ctx := context.Background()
	s, _ := mustOpen(t)
	base := Record{Scope: scope.Workspace, Type: Semantic, Key: "counted", Body: "b", Confidence: 0.5}
	bad := map[string]func(r *Record){
		"source":          func(r *Record) { r.Source = "ghp_" + "Zk3q9XbT2mV7nR4wY8pL1sD6fH0jC5aE9uQ2" },
		"use_count":       func(r *Record) { r.UseCount = 1<<63 - 1 },
		"use_count below": func(r *Record) { r.UseCount = -5 },
	}
	for name, change := range bad {
		r := base
		change(&r)
		_, _, err := s.Restore(ctx, projA, r)
		var me *Error
		if !errors.As(err, &me) || me.Code != CodeInvalidArgument || strings.Contains(err.Error(), "ghp_") {
			t.Errorf("%s: %v, want invalid_argument naming the field", name, err)
		}
	}
	top := base
	top.UseCount = MaxUseCount
	if _, _, err := s.Restore(ctx, projA, top); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, projA.ID, Selector{Key: "counted", Type: Semantic}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.List(ctx, projA.ID, ListOptions{})
	if err != nil || len(recs) != 1 || recs[0].UseCount != MaxUseCount+1 {
		t.Fatalf("list after a use of the largest count: %+v, %v", recs, err)
	}
}

// A restore while another store on the database writes without pause
// loses none of its writes: each one acknowledged is in the restored
// database or in the copy kept of the replaced one.
func TestRestoreLosesNoWriteMadeMeanwhile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.db")
	s1, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	for i := range 2000 {
		if _, _, err := s1.Put(ctx, Project{}, Write{Scope: scope.Workspace, Type: Semantic, Key: fmt.Sprintf("seed-%d", i), Body: "seed"}); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(dir, "b.db")
	if err := s1.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	s2, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	stop := make(chan struct{})
	acked := make(chan []string)
	go func() {
		var keys []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				acked <- keys
				return
			default:
			}
			key := fmt.Sprintf("meanwhile-%d", i)
			if _, _, err := s1.Put(ctx, Project{}, Write{Scope: scope.Workspace, Type: Semantic, Key: key, Body: "written during the restore"}); err == nil {
				keys = append(keys, key)
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	kept := filepath.Join(dir, "kept.db")
	err = s2.RestoreFrom(ctx, backup, kept, nil)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	keys := <-acked
	if err != nil {
		t.Fatal(err)
	}
	k, err := openTarget(ctx, kept, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ws := scope.Workspace
	lost := 0
	for _, key := range keys {
		sel := Selector{Key: key, Type: Semantic, Scope: &ws}
		_, err1 := s1.Peek(ctx, "", sel)
		_, err2 := k.Peek(ctx, "", sel)
		if err1 != nil && err2 != nil {
			lost++
		}
	}
	if lost > 0 || len(keys) == 0 {
		t.Errorf("%d of %d writes made during the restore are in neither database", lost, len(keys))
	}
}

// A backup made with larger pages (an earlier build made 4 KiB ones) is
// restored into a database of 1 KiB pages, and so is the copy kept then.
func TestRestoreFromLargerPages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := openTarget(ctx, filepath.Join(dir, "memory.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Put(ctx, Project{}, Write{Scope: scope.Workspace, Type: Semantic, Key: "kept", Body: "from the old build"}); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old.db")
	if err := s.Backup(ctx, old); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", old)
	if err != nil {
		t.Fatal(err)
	}
	var page int
	_, err = db.ExecContext(ctx, `PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM`)
	if err == nil {
		err = db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page)
	}
	db.Close()
	if err != nil || page != 4096 {
		t.Fatalf("page size %d, %v", page, err)
	}
	if _, err := s.Delete(ctx, Project{}, Selector{Key: "kept", Type: Semantic}); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreFrom(ctx, old, filepath.Join(dir, "kept.db"), nil); err != nil {
		t.Fatal(err)
	}
	ws := scope.Workspace
	if r, err := s.Get(ctx, "", Selector{Key: "kept", Type: Semantic, Scope: &ws}); err != nil || r.Body != "from the old build" {
		t.Errorf("after the restore: %+v, %v", r, err)
	}
	if err := s.RestoreFrom(ctx, filepath.Join(dir, "kept.db"), filepath.Join(dir, "kept-again.db"), nil); err != nil {
		t.Fatal(err) // the copy kept is itself a backup that restores
	}
}

// Importing an older export again changes nothing: the uses counted since
// it was made are kept, not set back to its count.
func TestRestoreNeverLowersAUseCount(t *testing.T) {
	ctx := context.Background()
	s, _ := mustOpen(t)
	rec := Record{Scope: scope.Workspace, Type: Semantic, Key: "counted", Body: "b", Confidence: 0.5, UseCount: 2}
	if _, _, err := s.Restore(ctx, projA, rec); err != nil {
		t.Fatal(err)
	}
	ws := scope.Workspace
	for range 3 {
		if _, err := s.Get(ctx, projA.ID, Selector{Key: "counted", Type: Semantic, Scope: &ws}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, created, err := s.Restore(ctx, projA, rec)
	if err != nil || created {
		t.Fatal(err, created)
	}
	if got.UseCount != 5 {
		t.Errorf("use count %d after importing the older export again, want 5", got.UseCount)
	}
	if r, _ := s.Peek(ctx, projA.ID, Selector{Key: "counted", Type: Semantic, Scope: &ws}); r.UseCount != 5 {
		t.Errorf("stored use count %d, want 5", r.UseCount)
	}
}

func TestMoveProject(t *testing.T) {
	ctx := context.Background()
	s, _ := mustOpen(t)
	from, to := scope.IdentityOf("/old"), scope.IdentityOf("/new")
	a, _, err := s.Put(ctx, Project{ID: from}, Write{Type: Semantic, Key: "alpha", Body: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, Project{ID: from}, Write{Type: Working, Key: "beta", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	// A copy of alpha, as a server at the new root reads it from the file.
	if _, err := s.Import(ctx, to, Record{ID: a.ID, Type: Semantic, Key: "alpha", Body: "a"}, FileState{Stem: "alpha", Hash: "h"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	n, err := s.MoveProject(ctx, from, to, "/new")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("moved %d records, want 2", n)
	}
	got, err := s.Peek(ctx, to, Selector{Key: "alpha", Type: Semantic})
	if err != nil || got.ID != a.ID {
		t.Errorf("alpha at the new root: %v, id %s want %s", err, got.ID, a.ID)
	}
	if _, err := s.Peek(ctx, from, Selector{Key: "beta"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("beta still at the old root: %v", err)
	}
	ps, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != to || ps[0].Root != "/new" || ps[0].Records != 2 {
		t.Errorf("projects after the move: %+v", ps)
	}
	if _, err := s.MoveProject(ctx, from, to, "/new"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second move: %v", err)
	}

	// A record of the new root's own with a moving key stops the move.
	third := scope.IdentityOf("/third")
	if _, _, err := s.Put(ctx, Project{ID: third}, Write{Type: Semantic, Key: "alpha", Body: "mine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MoveProject(ctx, to, third, "/third"); !errors.Is(err, ErrConflict) {
		t.Errorf("move onto a root with its own alpha: %v", err)
	}
	if got, _ := s.Peek(ctx, to, Selector{Key: "alpha", Type: Semantic}); got.ID != a.ID {
		t.Error("a refused move changed something")
	}
}

// TestRestoreFromSeenByAnotherProcess: a second store on the same file,
// like a server with it open, sees the restore through the change counters
// it compares.
func TestRestoreFromSeenByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.db")
	s1, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	// Records as the mirror's sync brings them in from their files.
	p := Project{ID: scope.IdentityOf("/w")}
	if _, err := s1.Import(ctx, p.ID, Record{Type: Semantic, Key: "alpha", Body: "a"}, FileState{Stem: "alpha", Hash: "ha"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "b.db")
	if err := s1.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode: %v %v", fi.Mode(), err)
	}
	if err := s1.Backup(ctx, backup); err == nil {
		t.Fatal("backup overwrote a file")
	}
	if _, err := s1.Import(ctx, p.ID, Record{Type: Semantic, Key: "beta", Body: "b"}, FileState{Stem: "beta", Hash: "hb"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	seen, err := s1.MirrorChangesSince(ctx, p.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	n1, err := s1.CountAll(ctx, p.ID)
	if err != nil || n1 != 2 {
		t.Fatalf("count before: %d %v", n1, err)
	}

	s2, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var pages int
	err = s2.RestoreFrom(ctx, backup, filepath.Join(dir, "kept.db"), func(done, total int) {
		if done > total || done < pages {
			t.Errorf("progress %d of %d after %d", done, total, pages)
		}
		pages = done
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages == 0 {
		t.Error("no progress reported")
	}
	ch, err := s1.MirrorChangesSince(ctx, p.ID, seen.Version)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Version <= seen.Version {
		t.Errorf("mirror version went from %d to %d", seen.Version, ch.Version)
	}
	if _, ok := ch.Changed["alpha"]; !ok {
		t.Errorf("alpha not reported changed: %+v", ch)
	}
	if len(ch.Gone) != 1 || ch.Gone[0] != "beta" {
		t.Errorf("beta not reported gone: %+v", ch.Gone)
	}
	if n, err := s1.CountAll(ctx, p.ID); err != nil || n != 1 {
		t.Errorf("the other store counts %d after the restore, want 1 (%v)", n, err)
	}
	kept, err := sqlite.CheckFile(ctx, filepath.Join(dir, "kept.db"))
	if err != nil || kept.Records != 2 {
		t.Errorf("kept database: %+v %v", kept, err)
	}
}

func TestCheckFileRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("not a database at all, just some text that is long enough"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.CheckFile(ctx, text); err == nil {
		t.Error("text file passed")
	}
	if _, err := sqlite.CheckFile(ctx, dir); err == nil {
		t.Error("directory passed")
	}
	if _, err := sqlite.CheckFile(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file passed")
	}
}

// A server that searched before a restore finds what the restore brought
// back, and nothing it took away, even where the restored file reuses the
// rowids and change numbers of the records it replaced.
func TestRestoreSeenBySearch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.db")
	s1, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	p := Project{ID: scope.IdentityOf("/w")}
	if _, _, err := s1.Put(ctx, p, Write{Type: Semantic, Key: "kept", Body: "the harbour lighthouse"}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "b.db")
	if err := s1.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Delete(ctx, p, Selector{Type: Semantic, Key: "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s1.Put(ctx, p, Write{Type: Semantic, Key: "later", Body: "a volcano erupting"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"volcano", "lighthouse"} {
		if _, err := s1.Search(ctx, p.ID, SearchOptions{Query: q}); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.RestoreFrom(ctx, backup, filepath.Join(dir, "kept.db"), nil); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"volcano": 0, "lighthouse": 1} {
		hits, err := s1.Search(ctx, p.ID, SearchOptions{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != want {
			t.Errorf("search %q after restore: %d hits, want %d", q, len(hits), want)
		}
	}
}
