package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/mirror"
)

// treeSums maps every path under root (relative, slash-separated) to a
// digest of what it is: a file's bytes and mode, a symlink's target, or
// "dir".
func treeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "symlink:" + target
		case fi.IsDir():
			out[rel] = "dir"
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("%v:%s", fi.Mode(), hex.EncodeToString(sum[:]))
		default:
			out[rel] = fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, v := range before {
		if after[p] != v {
			t.Errorf("%s: %s changed (%q -> %q)", what, p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s appeared", what, p)
		}
	}
}

// problemPaths collects the paths a tool result reports as problems.
func problemPaths(out map[string]any) []string {
	var ps []string
	list, _ := out["problems"].([]any)
	for _, p := range list {
		if m, ok := p.(map[string]any); ok {
			ps = append(ps, fmt.Sprint(m["path"]))
		}
	}
	slices.Sort(ps)
	return ps
}

// problemReason is the reason reported for path, or "".
func problemReason(out map[string]any, path string) string {
	list, _ := out["problems"].([]any)
	for _, p := range list {
		if m, ok := p.(map[string]any); ok && m["path"] == path {
			return fmt.Sprint(m["reason"])
		}
	}
	return ""
}

// TestHostileKeysRefused sends keys that try to leave the memories
// directory, or to be something a file name should not be, through the
// real server. Each is refused with invalid_argument naming the key, and
// nothing appears anywhere on disk.
func TestHostileKeysRefused(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "sentinel.txt"), []byte("do not touch\n"), 0o644)
	parent := filepath.Dir(e.root)
	beforeOutside, beforeParent := treeSums(t, outside), treeSums(t, parent)
	cs := connect(t, e, nil)

	bad := []string{
		"../evil", "../../" + filepath.Base(outside) + "/sentinel.txt", "..", ".", "...", "a..b", "a/../b",
		"a/b", "/etc/passwd", `a\b`, `..\evil`, `C:\evil`, "c:", "a:b", "con:", "nul:stream",
		"a\x00b", "\x00", "a\x1b[31mb", "a\x7fb", "a\u0085b", "a\u200bb", "a\u2215b", "a\uff0fb",
		".hidden", "-dash", "_under", "%2e%2e%2fevil", "a%2fb", "ключ", "emoji-\U0001F600",
		"", "   ", "\t\n", strings.Repeat("a", 101), "a\xffb",
	}
	for _, k := range bad {
		for _, typ := range []string{"semantic", "procedural", "working"} {
			msg := fails(t, cs, "memory_write", map[string]any{"type": typ, "key": k, "body": "hostile key"})
			if !strings.HasPrefix(msg, "invalid_argument:") || !strings.Contains(msg, "key") {
				t.Errorf("write key %q (%s): %q, want invalid_argument naming the key", k, typ, msg)
			}
		}
		for _, tool := range []string{"memory_read", "memory_delete", "memory_update"} {
			if tool == "memory_read" && strings.TrimSpace(k) == "" {
				continue // no key asks for the recall block
			}
			args := map[string]any{"key": k}
			if tool == "memory_update" {
				args["body"] = "x"
			}
			res := call(t, cs, tool, args)
			if !res.IsError {
				t.Errorf("%s key %q succeeded: %s", tool, k, text(res))
			} else if msg := text(res); !strings.HasPrefix(msg, "invalid_argument:") && !strings.HasPrefix(msg, "not_found:") {
				t.Errorf("%s key %q: %q, want invalid_argument or not_found", tool, k, msg)
			}
		}
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	if n := len(out["records"].([]any)); n != 0 {
		t.Errorf("hostile keys left %d records", n)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus")); !os.IsNotExist(err) {
		t.Errorf("refused writes created the .prometheus directory: %v", err)
	}
	sameTree(t, "outside", beforeOutside, treeSums(t, outside))
	sameTree(t, "workspace parent", beforeParent, treeSums(t, parent))
	t.Logf("hostile keys refused: %d (x3 types for write, + read/delete/update each)", len(bad))
}

// TestKeysThatNormalise checks keys that are accepted after
// normalisation, case collisions among them, and the Windows device names
// the key rule allows.
func TestKeysThatNormalise(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")

	first := ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "Foo", "body": "upper"})
	again := ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "foo", "body": "lower"})
	third := ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "  FOO ", "body": "padded"})
	id := first["record"].(map[string]any)["id"]
	if first["record"].(map[string]any)["key"] != "foo" || first["created"] != true {
		t.Errorf("key Foo stored as %v", first)
	}
	for _, o := range []map[string]any{again, third} {
		if o["created"] != false || o["record"].(map[string]any)["id"] != id {
			t.Errorf("a case variant of foo made another record: %v", o)
		}
	}
	// U+212A KELVIN SIGN lower-cases to an ASCII k.
	kelvin := ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "\u212Aelvin", "body": "kelvin sign"})
	if kelvin["record"].(map[string]any)["key"] != "kelvin" {
		t.Errorf("kelvin-sign key stored as %v", kelvin["record"])
	}
	spaced := ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "Run  The  Tests ", "body": "spaces"})
	if spaced["record"].(map[string]any)["key"] != "run-the-tests" {
		t.Errorf("spaced key stored as %v", spaced["record"])
	}
	if got := bodyOf(t, cs, "FOO"); got != "padded" {
		t.Errorf("read FOO: %q", got)
	}

	// Windows device names are valid keys. A file con.md is harmless on
	// Linux and macOS but cannot be checked out on Windows; whether the
	// store refuses them or not, a file must never land outside the
	// directory.
	var accepted, refused []string
	for _, k := range []string{"con", "nul", "aux", "prn", "com1", "lpt1", "con.txt", "nul.md"} {
		res := call(t, cs, "memory_write", map[string]any{"type": "semantic", "key": k, "body": "device name " + k})
		if res.IsError {
			if msg := text(res); !strings.HasPrefix(msg, "invalid_argument:") {
				t.Errorf("write %q: %s", k, msg)
			}
			refused = append(refused, k)
			continue
		}
		accepted = append(accepted, k)
		if _, err := os.Lstat(filepath.Join(dir, k+".md")); err != nil {
			t.Errorf("accepted key %q has no file: %v", k, err)
		}
	}
	t.Logf("Windows device names accepted: %v; refused: %v", accepted, refused)

	names := dirNames(t, dir)
	want := append([]string{"foo.md", "kelvin.md", "run-the-tests.md"}, mdNames(accepted)...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("memories directory holds %v, want %v", names, want)
	}

	// A hand-made file whose name differs from a key only by case is
	// reported, left alone, and changes nothing (on a case-insensitive file
	// system it is foo.md itself, so only check where the two can coexist).
	upper := filepath.Join(dir, "Foo.md")
	if err := os.WriteFile(upper, []byte("# Shadow\n\nshadow body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "foo.md")); err == nil && len(dirNames(t, dir)) == len(want)+1 {
		out := ok(t, cs, "memory_list", map[string]any{})
		if r := problemReason(out, ".prometheus/memories/Foo.md"); !strings.Contains(r, "foo.md") {
			t.Errorf("Foo.md reported as %q, want advice to rename it to foo.md (problems %v)", r, problemPaths(out))
		}
		if got := bodyOf(t, cs, "foo"); got != "padded" {
			t.Errorf("Foo.md changed foo: %q", got)
		}
		if b, _ := os.ReadFile(upper); string(b) != "# Shadow\n\nshadow body\n" {
			t.Errorf("Foo.md was rewritten")
		}
	}
}

func mdNames(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + ".md"
	}
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if e.Name() == ".tmp" && e.IsDir() {
			continue // the writes' temporary files, ignored by git
		}
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// yamlBomb is a "billion laughs" front matter: nine levels of aliases, each
// nine times the one before.
func yamlBomb() string {
	var b strings.Builder
	b.WriteString("---\n")
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for _, c := range "bcdefghi" {
		name := string(c)
		fmt.Fprintf(&b, "%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	b.WriteString("type: semantic\n---\n\nboom\n")
	return b.String()
}

// yamlTagBomb hides the aliases inside a known field.
func yamlTagBomb() string {
	var b strings.Builder
	b.WriteString("---\ntags: &a [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\"]\n")
	b.WriteString("description: &d [*a, *a, *a, *a, *a, *a, *a, *a]\n")
	b.WriteString("---\n\nboom\n")
	return b.String()
}

// TestHostileMarkdownFiles puts files in the memories directory that the
// mirror must refuse: symlinks in and out of the workspace, hard links, a
// FIFO, a directory, huge, binary and non-UTF-8 files, YAML alias bombs and
// file names that are not keys. Over the real server each is reported as a
// problem in the tool result, left exactly as it is, and nothing outside
// the memories directory changes.
func TestHostileMarkdownFiles(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "sentinel.txt")
	os.WriteFile(sentinel, []byte("do not touch\n"), 0o644)
	hardTarget := filepath.Join(outside, "hard-target.md")
	os.WriteFile(hardTarget, []byte("# Hard\n\nlinked from outside\n"), 0o644)
	os.MkdirAll(filepath.Join(outside, "subdir"), 0o755)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "good", "body": "a good fact"})
	dir := filepath.Join(e.root, ".prometheus", "memories")

	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("huge.md", "# Huge\n\n"+strings.Repeat("a", 300<<10))
	write("binary.md", "# Bin\n\x00\x01\x02\x03 body\n")
	write("latin1.md", "# Caf\xe9\n\nnot UTF-8\n")
	write("bomb.md", yamlBomb())
	write("tagbomb.md", yamlTagBomb())
	write("working.md", "---\ntype: working\n---\n\nscratch\n")
	write("Bad Name.md", "# Bad name\n")
	write("a:b.md", "# Colon\n")
	write("..md", "# Dots\n") // a dotfile: ignored, like .gitkeep
	write("-lead.md", "# Leading dash\n")
	write("tags.md", "---\ntags: ["+strings.TrimSuffix(strings.Repeat(`"t",`, 40), ",")+"]\n---\n\nmany tags\n")
	write("notes.MD", "# Not a memory: wrong extension\n")
	write(".gitkeep", "")
	write(".fresh.md.0123456789ab.tmp", "# Looks like a temp file\n")
	must(t, os.Symlink(sentinel, filepath.Join(dir, "link.md")))
	must(t, os.Symlink(filepath.Join(outside, "subdir"), filepath.Join(dir, "dirlink.md")))
	must(t, os.Symlink("good.md", filepath.Join(dir, "inside-link.md")))
	must(t, os.Symlink("/nonexistent/x.md", filepath.Join(dir, "dangling.md")))
	must(t, os.Mkdir(filepath.Join(dir, "folder.md"), 0o755))
	if err := mkfifo(filepath.Join(dir, "fifo.md")); err != nil {
		t.Logf("no FIFO: %v", err)
	}
	hardOK := os.Link(hardTarget, filepath.Join(dir, "hard.md")) == nil

	beforeOutside := treeSums(t, outside)
	beforeDir := treeSums(t, dir)

	start := time.Now()
	out := ok(t, cs, "memory_list", map[string]any{})
	took := time.Since(start)
	refusedFiles := map[string]string{
		"huge.md": "256 KiB", "binary.md": "binary", "latin1.md": "UTF-8", "bomb.md": "", "tagbomb.md": "",
		"working.md": "working", "Bad Name.md": "", "a:b.md": "", "-lead.md": "", "tags.md": "tags",
		"link.md": "symlink", "dirlink.md": "symlink", "inside-link.md": "symlink", "dangling.md": "symlink", "folder.md": "regular",
	}
	if _, err := os.Lstat(filepath.Join(dir, "fifo.md")); err == nil {
		refusedFiles["fifo.md"] = "regular"
	}
	for name, want := range refusedFiles {
		r := problemReason(out, ".prometheus/memories/"+name)
		if r == "" {
			t.Errorf("%s is not reported as a problem (problems: %v)", name, problemPaths(out))
		} else if !strings.Contains(r, want) {
			t.Errorf("%s reported as %q, want it to mention %q", name, r, want)
		}
	}
	t.Logf("alias bombs refused as: %q; %q", problemReason(out, ".prometheus/memories/bomb.md"), problemReason(out, ".prometheus/memories/tagbomb.md"))
	var keys []string
	for _, r := range out["records"].([]any) {
		keys = append(keys, r.(map[string]any)["key"].(string))
	}
	slices.Sort(keys)
	wantKeys := []string{"good"}
	if hardOK {
		// A hard link is a regular file in the directory; its content is
		// imported like any other.
		wantKeys = []string{"good", "hard"}
	}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("records after the sync: %v, want %v", keys, wantKeys)
	}
	if took > 10*time.Second {
		t.Errorf("the sync over hostile files took %v", took)
	}

	// Writing or deleting a key whose file is a symlink never goes through
	// the link.
	msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "link", "body": "overwrite the sentinel?"})
	if !strings.Contains(msg, "link.md") {
		t.Errorf("write over a symlinked file: %q, want it named", msg)
	}
	t.Logf("write over a symlinked file: %s", msg)
	fails(t, cs, "memory_delete", map[string]any{"key": "link"})
	if hardOK {
		// Writing the hard-linked record replaces the directory entry, not
		// the inode it shares with the file outside.
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "hard", "body": "rewritten inside"})
		ok(t, cs, "memory_delete", map[string]any{"key": "hard"})
		delete(beforeDir, "hard.md")
	}
	// A second sync reports the same files and changes nothing.
	again := ok(t, cs, "memory_list", map[string]any{})
	if !slices.Equal(problemPaths(again), problemPaths(out)) {
		t.Errorf("problems changed between syncs: %v then %v", problemPaths(out), problemPaths(again))
	}
	sameTree(t, "outside", beforeOutside, treeSums(t, outside))
	afterDir := treeSums(t, dir)
	for name, sum := range beforeDir {
		if name == "good.md" || name == "." {
			continue
		}
		if afterDir[name] != sum {
			t.Errorf("%s in the memories directory changed", name)
		}
	}
	if b, _ := os.ReadFile(sentinel); string(b) != "do not touch\n" {
		t.Errorf("the sentinel outside changed: %q", b)
	}
	t.Logf("hostile files reported: %d; sync over them took %v", len(refusedFiles), took.Round(time.Millisecond))
}

// TestMemoriesDirSymlinkedOutside replaces .prometheus/memories, under a
// running server, by a symlink out of the workspace: every call that would
// touch it fails with a message naming it, and nothing is written there.
func TestMemoriesDirSymlinkedOutside(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "sentinel.txt"), []byte("do not touch\n"), 0o644)
	before := treeSums(t, outside)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "inside", "body": "in the workspace"})
	dir := filepath.Join(e.root, ".prometheus", "memories")
	must(t, os.Rename(dir, dir+".moved"))
	must(t, os.Symlink(outside, dir))

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"memory_write", map[string]any{"type": "semantic", "key": "escape", "body": "must not land outside"}},
		{"memory_read", map[string]any{"key": "inside"}},
		{"memory_list", map[string]any{}},
		{"memory_delete", map[string]any{"key": "inside"}},
	} {
		msg := fails(t, cs, c.tool, c.args)
		if !strings.Contains(msg, "symlink") || !strings.Contains(msg, "outside the workspace") {
			t.Errorf("%s with the directory symlinked outside: %q", c.tool, msg)
		}
	}
	sameTree(t, "outside", before, treeSums(t, outside))
	// Once the link is gone the record is still there.
	must(t, os.Remove(dir))
	must(t, os.Rename(dir+".moved", dir))
	if got := bodyOf(t, cs, "inside"); got != "in the workspace" {
		t.Errorf("after restoring the directory: %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMirroredBodyMatchesDatabase writes bodies with the white space the
// markdown format normalises (trailing newlines and spaces, leading blank
// lines, CRLF) and checks that the file decodes to the body the database
// holds: the two must agree, or the next import from the file (another
// clone, a sync that re-reads it) silently changes the record.
func TestMirroredBodyMatchesDatabase(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	bodies := map[string]string{
		"plain":           "one line",
		"trailing-nl":     "ends with a newline\n",
		"trailing-blank":  "ends with blank lines\n\n\n",
		"trailing-spaces": "ends with spaces   ",
		"leading-blank":   "\n\nstarts with blank lines",
		"crlf":            "windows\r\nline ends\r\n",
		"inner-spaces":    "keeps  inner   spaces\n\n\nand blank lines",
	}
	var mismatched []string
	for key, body := range bodies {
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": key, "body": body})
		stored := bodyOf(t, cs, key)
		data, err := os.ReadFile(filepath.Join(dir, key+".md"))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := mirror.Decode(key, data)
		if err != nil {
			t.Fatalf("%s.md: %v", key, err)
		}
		if rec.Body != stored {
			mismatched = append(mismatched, fmt.Sprintf("%s: database %q, file %q", key, stored, rec.Body))
		}
	}
	slices.Sort(mismatched)
	if len(mismatched) > 0 {
		// Fix: the store normalises bodies of mirrored records as the file
		// format does (see the report).
		regressed(t, "%d bodies differ between the database and their files: %v", len(mismatched), mismatched)
	}
}
