package mirror

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// benchWS is a workspace holding n imported files with old mtimes.
func benchWS(b *testing.B, n int) *ws {
	w := newWS(b)
	if err := os.MkdirAll(w.dir.Path(), 0o755); err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for i := range n {
		key := fmt.Sprintf("fact-%05d", i)
		rec := memory.Record{
			Scope: scope.Project, Type: memory.Semantic, Key: key, Description: "Fact number " + strconv.Itoa(i),
			Body: fmt.Sprintf("# Fact %d\n\nThe build uses `make test` for package %d.\n", i, i), Tags: []string{"bench"}, Confidence: 0.5,
		}
		name := w.path(key + ".md")
		if err := os.WriteFile(name, Encode(rec), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(name, old, old); err != nil {
			b.Fatal(err)
		}
	}
	rep := w.sync() // warm-up: imports everything
	if len(rep.Imported) != n || len(rep.Problems) != 0 {
		b.Fatalf("warm-up imported %d of %d, problems %v", len(rep.Imported), n, rep.Problems)
	}
	return w
}

// BenchmarkSyncUnchanged is the sync before every read when nobody touched
// the files: a directory listing, an lstat per file and one query.
func BenchmarkSyncUnchanged(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			w := benchWS(b, n)
			b.ResetTimer()
			for range b.N {
				rep, err := Sync(w.ctx, w.st, w.p, w.dir)
				if err != nil || rep.changed() || len(rep.Problems) > 0 {
					b.Fatal(rep, err)
				}
			}
		})
	}
}

// BenchmarkSyncChanged edits one file of 1,000 per iteration and syncs it in.
func BenchmarkSyncChanged(b *testing.B) {
	const n = 1000
	w := benchWS(b, n)
	base := time.Now().Add(-30 * time.Minute)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		key := fmt.Sprintf("fact-%05d", i%n)
		rec := memory.Record{
			Scope: scope.Project, Type: memory.Semantic, Key: key, Description: "Edited fact",
			Body: fmt.Sprintf("Edit %d of package %d.\n", i, i%n), Confidence: 0.5,
		}
		name := w.path(key + ".md")
		if err := os.WriteFile(name, Encode(rec), 0o644); err != nil {
			b.Fatal(err)
		}
		// An edit made a moment ago would also be re-hashed by the next
		// syncs (see racyWindow); date it so only this one file changed.
		t := base.Add(time.Duration(i) * time.Millisecond)
		if err := os.Chtimes(name, t, t); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := Sync(w.ctx, w.st, w.p, w.dir)
		if err != nil || len(rep.Imported) != 1 {
			b.Fatal(rep, err)
		}
	}
}

// BenchmarkPutMirrored is a tool's write of a mirrored record: the
// transaction, the file written and recorded.
func BenchmarkPutMirrored(b *testing.B) {
	w := newWS(b)
	for i := range b.N {
		key := fmt.Sprintf("fact-%03d", i%100)
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: fmt.Sprintf("Write %d.", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutNewFile is a tool's write of a new project fact: the
// transaction and a new file, written under a temporary name and linked in.
func BenchmarkPutNewFile(b *testing.B) {
	w := newWS(b)
	w.put(memory.Semantic, "first", "", "The first.")
	i := 0
	for b.Loop() {
		i++
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: fmt.Sprintf("fact-%d", i), Body: fmt.Sprintf("Write %d.", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncAfterWrite is the sync of the call after a write of a fact:
// by this process ("own") or by another process on the same workspace
// ("other"). The file just written is within the racy window, so it is
// read and hashed.
func BenchmarkSyncAfterWrite(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, who := range []string{"own", "other"} {
			b.Run(fmt.Sprintf("%s/%d", who, n), func(b *testing.B) {
				w := benchWS(b, n)
				writer := w
				if who == "other" {
					writer = newWSAt(b, w.root, w.st)
				}
				w.sync()
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					key := fmt.Sprintf("fact-%05d", i%n)
					if _, _, err := writer.st.Put(writer.ctx, writer.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: fmt.Sprintf("Write %d.", i)}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if rep := w.sync(); len(rep.Imported)+len(rep.Problems) > 0 {
						b.Fatalf("sync after a write: %+v", rep)
					}
				}
			})
		}
	}
}

// BenchmarkSyncAfterBurst is the sync of a process whose last call came
// before another process wrote 100 facts, as with several agents writing
// at once on a busy machine.
func BenchmarkSyncAfterBurst(b *testing.B) {
	w := benchWS(b, 1000)
	writer := newWSAt(b, w.root, w.st)
	w.sync()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range 100 {
			key := fmt.Sprintf("fact-%05d", (i*100+j)%1000)
			if _, _, err := writer.st.Put(writer.ctx, writer.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: fmt.Sprintf("Burst %d.", i)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if rep := w.sync(); len(rep.Imported)+len(rep.Problems) > 0 {
			b.Fatalf("sync after a burst: %+v", rep)
		}
	}
}

// BenchmarkSyncNoDirectory is the sync before each call in a workspace
// that has no memories directory (a project whose tools have written notes
// only), after a note was written.
func BenchmarkSyncNoDirectory(b *testing.B) {
	w := newWS(b)
	w.sync()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Working, Key: "note", Body: fmt.Sprintf("Note %d.", i)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := Sync(w.ctx, w.st, w.p, w.dir)
		if err != nil || rep.changed() {
			b.Fatal(rep, err)
		}
	}
}
