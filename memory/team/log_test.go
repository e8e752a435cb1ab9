package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/memory/team"
	"prom.codes/memory-mcp/scope"
)

var ctx = context.Background()

var alice = memory.Token{Tenant: "acme", User: "alice", Profile: "default"}

// replicas opens two stores on one database: two SQLite connections to one
// file, or two replicas of one PostgreSQL database.
func replicas(t *testing.T, pg bool) (*team.Log, *team.Log) {
	target := filepath.Join(t.TempDir(), "memory.db")
	if pg {
		if os.Getenv(storetest.PostgresEnv) == "" {
			t.Skipf("%s is not set", storetest.PostgresEnv)
		}
		target = storetest.NewPostgres(t)
	}
	a, b := team.New(storetest.Open(t, target, nil)), team.New(storetest.Open(t, target, nil))
	if err := a.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func put(key, body string, base int64) team.Change {
	return team.Change{ID: team.NewID(), Machine: "m1", Base: base, Scope: "tenant", Type: "semantic", Key: key, Op: team.OpPut,
		Record: &team.Version{Body: body}}
}

func both(t *testing.T, fn func(t *testing.T, a, b *team.Log)) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			a, b := replicas(t, pg)
			fn(t, a, b)
		})
	}
}

// A change pushed twice is stored once and answered with its first seq,
// on either replica; a change that replaces one its machine had not seen
// carries that version in pulls.
func TestPushOnceAndConflict(t *testing.T) {
	both(t, func(t *testing.T, a, b *team.Log) {
		c := put("k", "first", 0)
		r1, err := a.Push(ctx, alice, []team.Change{c})
		if err != nil || r1[0].Status != team.Stored {
			t.Fatalf("push: %+v %v", r1, err)
		}
		r2, err := b.Push(ctx, alice, []team.Change{c})
		if err != nil || r2[0].Status != team.Stored || r2[0].Seq != r1[0].Seq {
			t.Fatalf("pushed again: %+v %v, first %+v", r2, err, r1)
		}
		other := put("k", "second, made without seeing the first", 0)
		other.Machine = "m2"
		r3, err := b.Push(ctx, alice, []team.Change{other})
		if err != nil || r3[0].Status != team.Stored {
			t.Fatal(r3, err)
		}
		page, err := a.Pull(ctx, alice, 0, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) != 2 || page.Changes[1].Replaced == nil || page.Changes[1].Replaced.Record.Body != "first" ||
			page.Changes[0].Replaced != nil {
			t.Fatalf("pulled %+v", page.Changes)
		}
	})
}

// Writers on both replicas at once, and a reader pulling after its
// cursor meanwhile: the reader meets every change, none below its cursor
// after it has passed it, so none is skipped.
func TestConcurrentPushesNeverSkipped(t *testing.T) {
	both(t, func(t *testing.T, a, b *team.Log) {
		const writers, each = 6, 15
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := a
				if w%2 == 1 {
					l = b
				}
				for i := range each {
					if _, err := l.Push(ctx, alice, []team.Change{put(fmt.Sprintf("w%d-%d", w, i), "body", 0)}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		seen := map[int64]bool{}
		var cursor int64
		for finished := false; ; {
			select {
			case <-done:
				finished = true
			default:
			}
			page, err := b.Pull(ctx, alice, cursor, "", 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range page.Changes {
				if c.Seq <= cursor || seen[c.Seq] {
					t.Fatalf("seq %d after cursor %d", c.Seq, cursor)
				}
				seen[c.Seq] = true
				cursor = c.Seq
			}
			if finished && !page.More {
				break
			}
		}
		all, err := a.Pull(ctx, alice, 0, "", team.MaxPull)
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Changes) != writers*each || len(seen) != writers*each {
			t.Fatalf("the log holds %d changes, the reader met %d; want %d", len(all.Changes), len(seen), writers*each)
		}
	})
}

// Replicas starting the log for the first time at once put the shared
// records already stored in it once each, not once per replica.
func TestFirstStartOnReplicasAtOnce(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			if pg && os.Getenv(storetest.PostgresEnv) == "" {
				t.Skipf("%s is not set", storetest.PostgresEnv)
			}
			for round := range 5 {
				target := filepath.Join(t.TempDir(), "memory.db")
				if pg {
					target = storetest.NewPostgres(t)
				}
				sa, sb := storetest.Open(t, target, nil), storetest.Open(t, target, nil)
				for i := range 10 {
					w := memory.Write{Scope: scope.System, Type: memory.Semantic, Key: fmt.Sprintf("rule-%d", i), Body: "Kept."}
					if _, _, err := sa.Put(ctx, memory.Project{ID: scope.IdentityOf("/work/x")}, w); err != nil {
						t.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				for _, st := range []*memory.Store{sa, sb} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := team.New(st).Enable(ctx); err != nil {
							t.Error(err)
						}
					}()
				}
				wg.Wait()
				page, err := team.New(sa).Pull(ctx, alice, 0, "", team.MaxPull)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Changes) != 10 {
					t.Fatalf("round %d: the log holds %d changes for 10 records", round, len(page.Changes))
				}
			}
		})
	}
}

// A put of the version the team holds already (a machine joining again
// pushes what it has) is answered with that version's seq: nothing new
// is logged, and no teammate is told their version lost.
func TestPushOfTheHeldVersionChangesNothing(t *testing.T) {
	both(t, func(t *testing.T, a, b *team.Log) {
		first := put("k", "the same words", 0)
		r1, err := a.Push(ctx, alice, []team.Change{first})
		if err != nil || r1[0].Status != team.Stored {
			t.Fatalf("push: %+v %v", r1, err)
		}
		again := put("k", "the same words", 0)
		again.Machine = "m2"
		r2, err := b.Push(ctx, alice, []team.Change{again})
		if err != nil || r2[0].Status != team.Stored || r2[0].Seq != r1[0].Seq {
			t.Fatalf("the held version pushed again: %+v %v; want stored at seq %d", r2, err, r1[0].Seq)
		}
		page, err := a.Pull(ctx, alice, 0, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) != 1 || page.Changes[0].Replaced != nil {
			t.Fatalf("pulled %+v; want the one first change", page.Changes)
		}
	})
}

// A cursor whose change is not in the log (the server's database restored
// from an older copy, another server at the URL) is answered Lost, with
// no changes; one whose change is there is answered as usual.
func TestPullAfterAChangeNotInTheLog(t *testing.T) {
	both(t, func(t *testing.T, a, b *team.Log) {
		c1, c2 := put("one", "1", 0), put("two", "2", 0)
		rs, err := a.Push(ctx, alice, []team.Change{c1, c2})
		if err != nil || len(rs) != 2 {
			t.Fatal(rs, err)
		}
		page, err := b.Pull(ctx, alice, rs[0].Seq, c1.ID, 10)
		if err != nil || page.Lost || len(page.Changes) != 1 || page.Changes[0].ID != c2.ID {
			t.Fatalf("after the first change: %+v, %v", page, err)
		}
		for _, after := range []struct {
			seq int64
			id  string
		}{{rs[0].Seq, c2.ID}, {rs[1].Seq + 100, c2.ID}} {
			page, err := b.Pull(ctx, alice, after.seq, after.id, 10)
			if err != nil || !page.Lost || len(page.Changes) != 0 {
				t.Errorf("after %d (%s): %+v, %v; want lost and no changes", after.seq, after.id, page, err)
			}
		}
	})
}
