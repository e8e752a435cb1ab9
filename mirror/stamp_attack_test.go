package mirror

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// seenEverywhere checks that the writer w, a watching process and a new
// one all import key's file, which holds body, and that the tools can then
// write the fact again (a file the store does not know is a conflict on
// every write).
func seenEverywhere(t *testing.T, w, watching *ws, key, body string) {
	t.Helper()
	for _, s := range []struct {
		name string
		w    *ws
	}{{"the writer", w}, {"a watching process", watching}, {"a new process", newWSAt(t, w.root, w.st)}} {
		s.w.sync()
		if got := s.w.body(key); got != body {
			t.Errorf("%s: the record holds %q, the file %q", s.name, got, body)
		}
	}
	if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: "Written again."}); err != nil {
		t.Errorf("write after the file changed: %v", err)
	}
}

func (w *ws) body(key string) string {
	w.tb.Helper()
	r, err := w.peek(key)
	if err != nil {
		w.tb.Fatalf("peek %s: %v", key, err)
	}
	return r.Body
}

// TestStampAttackRestoreAsWriteLands: a person puts back an older version
// of a file, one the server wrote and so stamped, kept with its times (cp
// -p in place, or mv of a kept copy, as an rsync -a restore does) the
// moment after the server's write renamed its new version into place and
// before written's lstat. The state would record the restored file's size
// and times with the hash of what the server wrote; written sees a stamp
// not its write's and records it so that every process's next sync reads
// and imports the person's file.
func TestStampAttackRestoreAsWriteLands(t *testing.T) {
	needStamps(t)
	for _, how := range []string{"in place", "renamed in"} {
		t.Run(how, func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.sync()
			other.sync() // both watch
			v1 := w.read("deploy.md")
			fi1, err := os.Stat(w.path("deploy.md"))
			if err != nil {
				t.Fatal(err)
			}
			kept := filepath.Join(t.TempDir(), "deploy.md") // cp -p deploy.md ~/kept/
			if err := os.WriteFile(kept, v1, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(kept, fi1.ModTime(), fi1.ModTime()); err != nil {
				t.Fatal(err)
			}
			w.dir.hook = func(at, key string) {
				if at != "renamed" || key != "deploy" {
					return
				}
				if how == "in place" {
					w.writeWithMtime("deploy.md", string(v1), fi1.ModTime())
				} else if err := os.Rename(kept, w.path("deploy.md")); err != nil {
					t.Error(err)
				}
			}
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Friday.")
			w.dir.hook = nil
			if got := string(w.read("deploy.md")); got != string(v1) {
				t.Fatalf("the file holds %q, want the person's restored version", got)
			}
			seenEverywhere(t, w, other, "deploy", "Deploy on Monday.")
		})
	}
}

// TestStampAttackExactStampPutBack: an edit of the same size that puts
// back the exact stamp of the version it replaces (touch -r, cp -p from a
// copy taken a moment before), later than the write's ctime tick, is
// imported, in place and after a chmod, by the writer and by another
// process: the file's ctime, queried when the state was recorded, moves.
func TestStampAttackExactStampPutBack(t *testing.T) {
	needStamps(t)
	for _, how := range []string{"in place", "chmod first"} {
		t.Run(how, func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.sync()
			other.sync()
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.sync()
			other.sync()
			fi, err := os.Stat(w.path("deploy.md"))
			if err != nil {
				t.Fatal(err)
			}
			stamp := fi.ModTime()
			edited := []byte(strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1))
			target := w.path("deploy.md")
			switch how {
			case "chmod first":
				if err := os.Chmod(target, 0o600); err != nil {
					t.Fatal(err)
				}
				w.sync()
				other.sync()
			}
			if err := os.WriteFile(target, edited, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(target, stamp, stamp); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*ws{other, w} {
				s.sync()
				if got := s.body("deploy"); got != "Deploy on Friday." {
					t.Errorf("after an edit that kept the stamp the record holds %q", got)
				}
			}
		})
	}
}

// TestStampAttackSiblingCopiedOver: cp -p of another stamped file of the
// same size over a file, or mv of it over the file, is imported, and the
// record of a file moved away goes.
func TestStampAttackSiblingCopiedOver(t *testing.T) {
	needStamps(t)
	for _, mv := range []bool{false, true} {
		t.Run(fmt.Sprint("mv=", mv), func(t *testing.T) {
			w := newWS(t)
			w.sync()
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.put(memory.Semantic, "deplo2", "When we deploy", "Deploy on Friday.")
			w.sync()
			if mv {
				if err := os.Rename(w.path("deplo2.md"), w.path("deploy.md")); err != nil {
					t.Fatal(err)
				}
			} else {
				fi, err := os.Stat(w.path("deplo2.md"))
				if err != nil {
					t.Fatal(err)
				}
				w.writeWithMtime("deploy.md", string(w.read("deplo2.md")), fi.ModTime())
			}
			w.sync()
			if got := w.body("deploy"); got != "Deploy on Friday." {
				t.Errorf("deploy holds %q", got)
			}
			if _, err := w.peek("deplo2"); mv != errors.Is(err, memory.ErrNotFound) {
				t.Errorf("deplo2 after mv=%v: %v", mv, err)
			}
		})
	}
}

// TestStampAttackRolledBackWriteThenKeptTimes: a cancelled write puts the
// old version back with its old stamp; an edit of the same size that then
// keeps that stamp is imported, and the file is never left as the
// cancelled write had it.
func TestStampAttackRolledBackWriteThenKeptTimes(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	w.sync()
	before := w.read("deploy.md")
	fi, err := os.Stat(w.path("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.st.Put(w.cancelAt(1), w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "deploy", Description: "When we deploy", Body: "Deploy on Sunday."}); err == nil {
		t.Fatal("the cancelled write succeeded")
	}
	w.dir.hook = nil
	if got := w.read("deploy.md"); string(got) != string(before) {
		t.Fatalf("after the rollback the file holds %q", got)
	}
	fi2, err := os.Stat(w.path("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("mtime after the rollback %s, want the old stamp %s", fi2.ModTime(), fi.ModTime())
	}
	w.sync()
	w.writeWithMtime("deploy.md", strings.Replace(string(before), "Monday", "Friday", 1), fi.ModTime())
	w.sync()
	if got := w.body("deploy"); got != "Deploy on Friday." {
		t.Errorf("after an edit keeping the put-back stamp the record holds %q", got)
	}
}

// TestStampAttackManyChangedFiles: another process writes more facts than
// the old maxLooks (64) between two syncs of a watching process, and a
// person edits one of them right after, same size; the watching process's
// quick check of every changed file still imports it.
func TestStampAttackManyChangedFiles(t *testing.T) {
	needStamps(t)
	for _, n := range []int{100, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.put(memory.Semantic, "seed", "", "Seed.")
			w.sync()
			other.sync()
			for i := range n {
				other.put(memory.Semantic, fmt.Sprintf("fact-%03d", i), "", "Value on Monday.")
			}
			victim := fmt.Sprintf("fact-%03d", n/2)
			w.write(victim+".md", strings.Replace(string(w.read(victim+".md")), "Monday", "Friday", 1))
			w.sync()
			if got := w.body(victim); got != "Value on Friday." {
				t.Errorf("after %d writes and an edit the record holds %q", n, got)
			}
			for i := range n {
				if k := fmt.Sprintf("fact-%03d", i); k != victim && w.body(k) != "Value on Monday." {
					t.Errorf("%s holds %q", k, w.body(k))
				}
			}
		})
	}
}

// TestStampAttackEditThroughHardLinkOutside: a person links a memory file
// from outside the memories directory (ln deploy.md ~/notes/) and edits it
// there, in place. The inode's mtime and ctime move, but inotify reports
// the write only to the directory of the name it went through. Once a full
// sync has seen the file's second name (a process's first sync, and one a
// minute after), no sync of that process is skipped, so the edit, with or
// without its stamp kept, is imported at its next call; when the second
// name is gone, syncs are skipped again.
func TestStampAttackEditThroughHardLinkOutside(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keepStamp=", keep), func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			link := filepath.Join(t.TempDir(), "deploy.md")
			if err := os.Link(w.path("deploy.md"), link); err != nil {
				t.Skip(err)
			}
			watching := newWSAt(t, w.root, w.st)
			watching.sync() // a full sync: it sees the second name
			watching.sync()
			fi, err := os.Stat(link)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1)
			if err := os.WriteFile(link, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			if keep {
				if err := os.Chtimes(link, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			}
			quick := watching.dir.quickSyncs
			watching.sync()
			if got := watching.body("deploy"); got != "Deploy on Friday." {
				t.Errorf("the watching process: the record holds %q", got)
			}
			if watching.dir.quickSyncs != quick {
				t.Error("a sync was skipped while a file had a second name")
			}
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			watching.sync() // full: finds no second name
			watching.sync()
			if watching.dir.quickSyncs == quick {
				t.Error("syncs are still not skipped after the second name went")
			}
		})
	}
}

// TestStampAttackStampCopiedOntoNewInode: a tool that saves by writing a
// new file, giving it the times of the one it replaces, and renaming it
// over (a "safe save" that keeps the mtime), right after the server's
// write. Multigrain ctimes (Linux 6.13+) make an inode's ctime move on
// every change once it was queried, but a new inode gets a coarse ctime,
// which can equal the recorded ctime of the file it replaces when both
// fall in one clock tick: size, stamp and ctime all match. The stamp
// carries its file's inode digits, so it is not taken for the new file's
// and the edit is imported; tried several times, as it takes one tick.
func TestStampAttackStampCopiedOntoNewInode(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.sync()
	for i := range 40 {
		body := fmt.Sprintf("Deploy on Monday %02d.", i)
		w.put(memory.Semantic, "deploy", "When we deploy", body)
		fi, err := os.Stat(w.path("deploy.md"))
		if err != nil {
			t.Fatal(err)
		}
		edited := []byte(strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1))
		tmp := filepath.Join(w.dir.Path(), ".deploy.md.swp")
		if err := os.WriteFile(tmp, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, w.path("deploy.md")); err != nil {
			t.Fatal(err)
		}
		w.sync()
		if got, want := w.body("deploy"), strings.Replace(body, "Monday", "Friday", 1); got != want {
			nfi, _ := os.Stat(w.path("deploy.md"))
			t.Fatalf("attempt %d: the record holds %q, the file %q (ctime before %d, after %d)", i, got, want, ctime(fi), ctime(nfi))
		}
	}
}
