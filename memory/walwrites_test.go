//go:build cgo

package memory

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStoreOpensWithTheGatheringVFS: the store's connections write their
// log through the gathering VFS.
func TestStoreOpensWithTheGatheringVFS(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "memory.db"))
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	name, err := connVFS(conn)
	if err != nil {
		t.Fatal(err)
	}
	if name != gatherVFS+"/unix" {
		t.Errorf("VFS %q, want %q over unix", name, gatherVFS)
	}
}

// walBody is the body a gathering test writes under key, round v.
func walBody(key string, v int) string {
	return strings.TrimSpace(strings.Repeat(fmt.Sprintf("%s, round %d: a body long enough to overflow a page. ", key, v), 40))
}

// TestGatheredCommitsReachAnotherProcess: another process writes single
// facts, rewrites some, runs a transaction of thousands that spills pages
// to the log and is rolled back, one that is committed, and a record of
// the largest size in characters of several bytes, while this
// process reads and writes the same database. Right after the rollback,
// this process writes where the rolled-back pages lay in the log, before
// the other writes again: what the other process had gathered for the
// rolled-back transaction never lands over them. Every record either
// process sees is whole, the rolled-back ones never appear, and the
// database checks out whole at the end, for a third process too. The
// test runs itself again as the other process.
func TestGatheredCommitsReachAnotherProcess(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_GATHER_DB"); path != "" {
		gatherWriter(t, path)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.db")
	goOn := filepath.Join(dir, "go-on")
	s := openPath(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGatheredCommitsReachAnotherProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MEMORY_TEST_GATHER_DB="+path, "MEMORY_TEST_GATHER_GO_ON="+goOn)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rolledBack := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if sc.Text() == "rolled back" {
				close(rolledBack)
			}
		}
		exited <- cmd.Wait()
	}()
	seen, mine := 0, 0
	check := func(key string, got Record, err error) {
		t.Helper()
		if errors.Is(err, ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if got.Body != walBody(key, 1) && got.Body != walBody(key, 2) {
			t.Fatalf("read %s: a body of %d bytes that neither round wrote", key, len(got.Body))
		}
		seen++
	}
	write := func() {
		key := fmt.Sprintf("reader-%d", mine)
		put(t, s, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 1)})
		mine++
	}
	for done := false; !done; {
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("writer process: %v\n%s", err, out.String())
			}
			done = true
		case <-rolledBack:
			rolledBack = nil
			for range 5 {
				write()
			}
			if err := os.WriteFile(goOn, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
		}
		for i := 0; i < 400; i += 37 {
			key := fmt.Sprintf("single-%d", i)
			got, err := s.Get(ctx, projA.ID, Selector{Key: key})
			check(key, got, err)
		}
		if n, err := s.CountAll(ctx, projA.ID); err != nil {
			t.Fatal(err)
		} else if n > 400+1500+1+mine {
			t.Fatalf("%d records seen: rolled-back ones among them", n)
		}
		write()
	}
	if rolledBack != nil {
		t.Fatalf("the writer process never rolled back\n%s", out.String())
	}
	if seen == 0 {
		t.Error("read no record of the other process while it wrote")
	}
	for _, st := range []*Store{s, openPath(t, path)} {
		for i := range 400 {
			key := fmt.Sprintf("single-%d", i)
			got, err := st.Get(ctx, projA.ID, Selector{Key: key})
			if err != nil {
				t.Fatalf("read %s after: %v", key, err)
			}
			if want := walBody(key, 1+boolInt(i%3 == 0)); got.Body != want {
				t.Fatalf("%s: %d bytes, want round %d's", key, len(got.Body), 1+boolInt(i%3 == 0))
			}
		}
		for i := range mine {
			key := fmt.Sprintf("reader-%d", i)
			if got, err := st.Get(ctx, projA.ID, Selector{Key: key}); err != nil || got.Body != walBody(key, 1) {
				t.Fatalf("%s, this process's: %d bytes, %v", key, len(got.Body), err)
			}
		}
		if got, err := st.Get(ctx, projA.ID, Selector{Key: "largest"}); err != nil || got.Body != largestBody() {
			t.Fatalf("the largest record, non-ASCII: %d bytes, %v; want %d", len(got.Body), err, len(largestBody()))
		}
		var bulk, gone int
		if err := st.db.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM records WHERE key LIKE 'bulk-%'),
			(SELECT count(*) FROM records WHERE key LIKE 'rolled-back-%')`).Scan(&bulk, &gone); err != nil {
			t.Fatal(err)
		}
		if bulk != 1500 || gone != 0 {
			t.Errorf("%d bulk records (want 1500), %d rolled back (want 0)", bulk, gone)
		}
		var ok string
		if err := st.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Errorf("integrity check: %q, %v", ok, err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gatherWriter is the other process of TestGatheredCommitsReachAnotherProcess.
func gatherWriter(t *testing.T, path string) {
	s := openPath(t, path)
	single := func(from, to int) {
		for i := from; i < to; i++ {
			key := fmt.Sprintf("single-%d", i)
			put(t, s, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 1)})
			if i%3 == 0 {
				put(t, s, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 2)})
			}
		}
	}
	many := func(prefix string, n int, fail error) error {
		return s.tx(ctx, func(tx *sql.Tx) error {
			for i := range n {
				key := fmt.Sprintf("%s-%d", prefix, i)
				if _, _, err := s.put(ctx, tx, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 1)}, ""); err != nil {
					return err
				}
			}
			return fail
		})
	}
	single(0, 200)
	stop := errors.New("rolled back on purpose")
	if err := many("rolled-back", 2000, stop); !errors.Is(err, stop) {
		t.Fatalf("the transaction to roll back: %v", err)
	}
	fmt.Println("rolled back")
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv("MEMORY_TEST_GATHER_GO_ON")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the other process never wrote after the rollback")
		}
	}
	single(200, 400)
	if err := many("bulk", 1500, nil); err != nil {
		t.Fatal(err)
	}
	put(t, s, projA, Write{Type: Semantic, Key: "largest", Body: largestBody()})
}

// largestBody is a body of the largest size a record takes, in characters
// of two to four bytes: its frames fill the gathering's buffer many times.
func largestBody() string {
	b := strings.Repeat("ü日𝄞", MaxBodyBytes/9)
	return b[:len(b)-len("𝄞")]
}

// TestCommitThatCannotBeWrittenFails: when the log cannot take a commit
// (here the process's file size limit; a full disk alike), the write
// returns the error and is not stored, while every write that returned
// success is, whole, for the next process to open the database. The
// test runs itself again as the process that writes.
func TestCommitThatCannotBeWrittenFails(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_FULL_DB"); path != "" {
		fullWriter(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	out := runSelf(t, "TestCommitThatCannotBeWrittenFails", "MEMORY_TEST_FULL_DB", path)
	var stored, refused []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "stored" {
			stored = append(stored, f[1])
		}
		if len(f) >= 2 && f[0] == "refused" {
			refused = append(refused, f[1])
		}
	}
	if len(stored) < 3 || len(refused) == 0 {
		t.Fatalf("%d writes stored, %d refused; want some of each\n%s", len(stored), len(refused), out)
	}
	s := openPath(t, path)
	for _, key := range stored {
		got, err := s.Get(ctx, projA.ID, Selector{Key: key})
		if err != nil || got.Body != walBody(key, 1) {
			t.Errorf("%s, whose write returned success: %d bytes, %v", key, len(got.Body), err)
		}
	}
	for _, key := range refused {
		if _, err := s.Get(ctx, projA.ID, Selector{Key: key}); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s, whose write failed: %v, want not found", key, err)
		}
	}
	checkWhole(t, s)
}

// fullWriter is the process of TestCommitThatCannotBeWrittenFails: it
// writes until the log reaches the file size limit it sets itself, and
// prints each key stored or refused.
func fullWriter(t *testing.T, path string) {
	s := openLimitedWriter(t, path)
	for i := range 3 {
		key := fmt.Sprintf("before-%d", i)
		put(t, s, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 1)})
		fmt.Printf("stored %s\n", key)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	lim := uint64(fi.Size() + 48<<10)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		t.Skip("cannot limit file sizes:", err)
	}
	refused := 0
	for i := 0; i < 200 && refused < 3; i++ {
		key := fmt.Sprintf("after-%d", i)
		if _, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: key, Body: walBody(key, 1)}); err != nil {
			fmt.Printf("refused %s %v\n", key, err)
			refused++
			continue
		}
		fmt.Printf("stored %s\n", key)
	}
	time.Sleep(10 * time.Millisecond)
}

// TestCommitAfterRewrittenChecksumsFails: a transaction that spills pages
// to the log and changes them again has SQLite write the frames' headers
// again after its commit frame, the last of them the commit frame's. The
// next commit, of one page, on that connection, whose header the log can
// take but not its page (the file size limit just past the header),
// fails, and another process finds the database whole without it. The
// test runs itself again as the process that writes.
func TestCommitAfterRewrittenChecksumsFails(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_RECKSUM_DB"); path != "" {
		recksumWriter(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	out := runSelf(t, "TestCommitAfterRewrittenChecksumsFails", "MEMORY_TEST_RECKSUM_DB", path)
	if !bytes.Contains(out, []byte("refused")) {
		t.Fatalf("the one-page commit past the limit did not fail:\n%s", out)
	}
	s := openPath(t, path)
	checkWhole(t, s)
	var n, x int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), (SELECT x FROM scratch WHERE rowid = 1) FROM scratch`).Scan(&n, &x); err != nil {
		t.Fatal(err)
	}
	if n != 3000 || x != 1 {
		t.Errorf("%d rows, the first holding %d; want 3000 and 1 (the refused update not applied)", n, x)
	}
}

// openLimitedWriter opens path in a process of its own that will write
// past a file size limit: such a write fails with EFBIG instead of the
// signal, and no checkpoint runs, so that the log only grows.
func openLimitedWriter(t *testing.T, path string) *Store {
	signal.Ignore(syscall.SIGXFSZ)
	s := openPath(t, path)
	s.stopCheckpoints()
	return s
}

// recksumWriter is the process of TestCommitAfterRewrittenChecksumsFails.
func recksumWriter(t *testing.T, path string) {
	s := openLimitedWriter(t, path)
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	execAll(t, conn, `PRAGMA cache_size = 10`, `CREATE TABLE scratch (x INTEGER, pad TEXT)`,
		`BEGIN`, scratchRows("0"), `UPDATE scratch SET x = 1`, `COMMIT`)
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	lim := uint64(fi.Size() + 24)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		t.Skip("cannot limit file sizes:", err)
	}
	if _, err := conn.ExecContext(ctx, `UPDATE scratch SET x = 2 WHERE rowid = 1`); err != nil {
		fmt.Println("refused", err)
		return
	}
	fmt.Println("stored")
}

// TestReaderLeavesAWritersGatheredBytesAlone: a connection that begins
// to read, while another of the same process holds gathered bytes of a
// transaction that spilled pages to the log, writes none of them: here
// the log can take nothing more at that moment, and a writer's bytes
// written then would have been dropped, leaving a hole in its commit.
// The writer commits once the log can grow again, and another process
// finds every row and the database whole. The test runs itself again as
// the process that writes.
func TestReaderLeavesAWritersGatheredBytesAlone(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_READER_DB"); path != "" {
		readerWriter(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	runSelf(t, "TestReaderLeavesAWritersGatheredBytesAlone", "MEMORY_TEST_READER_DB", path)
	s := openPath(t, path)
	checkWhole(t, s)
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM scratch`).Scan(&n); err != nil || n != 3000 {
		t.Errorf("%d rows, %v; want 3000", n, err)
	}
}

// readerWriter is the process of TestReaderLeavesAWritersGatheredBytesAlone.
func readerWriter(t *testing.T, path string) {
	s := openLimitedWriter(t, path)
	w, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	execAll(t, w, `PRAGMA cache_size = 10`, `CREATE TABLE scratch (x INTEGER, pad TEXT)`, `BEGIN`, scratchRows("i"))
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Skip(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(fi.Size()), Max: was.Max}); err != nil {
		t.Skip("cannot limit file sizes:", err)
	}
	var n int
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&n); err != nil {
		t.Fatalf("read while the log cannot grow: %v", err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, `COMMIT`); err != nil {
		t.Fatalf("commit once the log can grow: %v", err)
	}
}

// runSelf runs test name again in a child process, with env set to path,
// and returns what it printed; the child failing fails t.
func runSelf(t *testing.T, name, env, path string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("writer process: %v\n%s", err, out)
	}
	return out
}

// execAll runs each statement on conn.
func execAll(t *testing.T, conn *sql.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// checkWhole fails t unless s's database passes integrity_check.
func checkWhole(t *testing.T, s *Store) {
	t.Helper()
	var ok string
	if err := s.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity check: %q, %v", ok, err)
	}
}

// scratchRows is the statement that fills the scratch table with 3,000
// rows whose x is v (a column name: their number) and whose pages, at a
// cache of 10 pages, spill to the log.
func scratchRows(v string) string {
	return `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
			INSERT INTO scratch SELECT ` + v + `, hex(randomblob(100)) FROM n`
}
