package semantic

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
)

// queued counts the embedding queue's rows as the database holds them.
func queued(t *testing.T, s *testStore) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM embed_queue`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWritesQueueForEmbeddingOnceAsked: a store never asked about
// embeddings queues nothing on a write. The first question queues every
// record written so far, once; from then on writes queue as they come,
// in this process and in another that opened the database before, and a
// changed record goes back in the queue with its vector dropped.
func TestWritesQueueForEmbeddingOnceAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i := range 5 {
		put(t, s, projA, sem(fmt.Sprintf("fact-%d", i), fmt.Sprintf("ship release %d", i)))
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("queued before anyone asked: %d", n)
	}
	_, c := standIn(t, "toy")
	st, err := s.EmbedStatus(ctx, "toy")
	if err != nil || st.Pending != 5 {
		t.Fatalf("status on first asking = %+v, %v; want all 5 records pending", st, err)
	}
	if _, err := s.EmbedStatus(ctx, "toy"); err != nil || queued(t, s) != 5 {
		t.Fatalf("asking again queued more: %d", queued(t, s))
	}
	put(t, other, projA, sem("from-other", "written by another process"))
	put(t, s, projB, sem("fact-b", "in another project"))
	if n := queued(t, s); n != 7 {
		t.Fatalf("queued after two more writes: %d, want 7", n)
	}
	if res := embedAll(t, s, c); res.Embedded != 7 {
		t.Fatalf("embedded %+v, want 7", res)
	}
	body := "a kitten on the sofa"
	if _, err := other.Update(ctx, projA, memory.Selector{Key: "fact-0"}, memory.Patch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Vectors != 6 || st.Pending != 1 {
		t.Fatalf("after another process's update: %+v, want 6 vectors and 1 pending", st)
	}
}

// TestQueueingBeginsWhileAnotherProcessWrites: one process writes without
// pause while another asks about embeddings for the first time. Every
// record ends up queued exactly once: none written just before the
// question is missed, none just after it is queued twice.
func TestQueueingBeginsWhileAnotherProcessWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writer, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	done := make(chan int)
	go func() {
		n := 0
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); n++ {
			if _, _, err := writer.Put(ctx, projA, memory.Write{Type: memory.Working, Key: fmt.Sprintf("note-%d", n), Body: "a note"}); err != nil {
				t.Error(err)
				break
			}
		}
		done <- n
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := s.EmbedQueued(ctx, "toy"); err != nil {
		t.Fatal(err)
	}
	n := <-done
	var rows, distinct int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT rid) FROM embed_queue`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Errorf("%d records written, %d queue rows for %d records; want each once", n, rows, distinct)
	}
}

// TestUpgradeKeepsQueueingWhereEmbeddingsWereUsed: a database from before
// queueing on demand that holds vectors goes on queueing every write; one
// that never embedded queues from the first question, records queued
// under the old schema included, each once.
func TestUpgradeKeepsQueueingWhereEmbeddingsWereUsed(t *testing.T) {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	for _, embedded := range []bool{true, false} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			// Up to the one before queueing on demand.
			if err := migrateTo(db, names, slices.Index(names, "migrations/0020_embed_on_demand.sql")); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := db.Exec(`INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at) VALUES (?, ?, 0, 'semantic', ?, 'kept', 1, 1)`,
					fmt.Sprintf("01OLD%d", i), string(projA.ID), fmt.Sprintf("old-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if embedded {
				if _, err := db.Exec(`INSERT INTO embed_vectors (rid, model, dims, vec) SELECT rowid, 'toy', 1, x'0000803f' FROM records WHERE key = 'old-0'`); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			s, err := openTarget(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			put(t, s, projA, sem("new", "written after the upgrade"))
			// The old records were queued by the old triggers.
			want := 2
			if embedded {
				want = 3 // and the new one, as before the upgrade
			}
			if n := queued(t, s); n != want {
				t.Fatalf("queued after a write on the upgraded database: %d, want %d", n, want)
			}
			if _, err := s.EmbedQueued(ctx, "toy"); err != nil {
				t.Fatal(err)
			}
			var rows, distinct int
			if err := s.DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT rid) FROM embed_queue`).Scan(&rows, &distinct); err != nil {
				t.Fatal(err)
			}
			if rows != 3 || distinct != 3 {
				t.Errorf("queue after the first question: %d rows for %d records, want each of 3 once", rows, distinct)
			}
		})
	}
}

// BenchmarkFirstEmbedQuestion is the first question about embeddings on a
// database of n records that queued none: it marks the database and
// queues every record, in one write transaction.
func BenchmarkFirstEmbedQuestion(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s, err := openTarget(ctx, filepath.Join(b.TempDir(), "memory.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				if _, _, err := s.Put(ctx, projA, memory.Write{Type: memory.Working, Key: fmt.Sprintf("note-%d", i), Body: "a note"}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				b.StopTimer()
				if _, err := s.DB().ExecContext(ctx, `DELETE FROM embed_wanted; DELETE FROM embed_queue`); err != nil {
					b.Fatal(err)
				}
				s.wanted.Store(false)
				b.StartTimer()
				if got, err := s.EmbedQueued(ctx, "toy"); err != nil || got != n {
					b.Fatalf("queued %d of %d records: %v", got, n, err)
				}
			}
		})
	}
}

// TestFirstEmbedQuestionThatFailsLeavesNothingHalfDone: a first question
// that fails (its caller gone) neither marks the database nor queues part
// of it, and the next one queues every record once.
func TestFirstEmbedQuestionThatFailsLeavesNothingHalfDone(t *testing.T) {
	s, _ := mustOpen(t)
	for i := range 20 {
		put(t, s, projA, sem(fmt.Sprintf("fact-%d", i), "ship it"))
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.EmbedStatus(gone, "toy"); err == nil {
		t.Fatal("a question whose caller is gone answered")
	}
	var wanted int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM embed_wanted`).Scan(&wanted); err != nil || wanted != 0 || queued(t, s) != 0 {
		t.Fatalf("after the failed question: wanted %d, %d queued, %v", wanted, queued(t, s), err)
	}
	if n, err := s.EmbedQueued(ctx, "toy"); err != nil || n != 20 || queued(t, s) != 20 {
		t.Fatalf("the next question: %d queued (%d rows), %v; want 20", n, queued(t, s), err)
	}
}
