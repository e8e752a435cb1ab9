package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory/sqlite"
)

func runRestore(c *cli, args []string) error {
	f := newFlags(c, "restore").withJSON()
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(c.getenv)
	if err != nil {
		return err
	}
	if cfg.Postgres() {
		return cfg.sqliteOnly("restore", `restore a pg_dump of it with pg_restore, or load records exported from any store with "memory-mcp import --keep-projects FILE"`)
	}
	src := pos[0]
	keep := cfg.DBPath + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
	for i := 2; ; i++ {
		if _, err := os.Lstat(keep); os.IsNotExist(err) {
			break
		}
		keep = fmt.Sprintf("%s.before-restore-%s-%d", cfg.DBPath, time.Now().UTC().Format("20060102T150405Z"), i)
	}
	chk, err := sqlite.CheckFile(c.ctx, src)
	if err != nil {
		return fmt.Errorf("restore refused, nothing changed: %s", backupProblem(src, err))
	}
	st, openErr := openStore(c.ctx, cfg.DBPath, nil)
	if openErr == nil {
		bar := progress.New(c.stderr, "restoring", 0, "pages")
		err = st.RestoreFrom(c.ctx, src, keep, func(done, total int) { bar.Set(int64(done), int64(total)) })
		bar.Finish()
		st.Close()
		if err != nil {
			return err
		}
	} else {
		// The current database cannot be opened (corrupt, or not a
		// database): set it aside as it is and put a copy of src in its place.
		if err := replaceFile(cfg.DBPath, src, keep); err != nil {
			return fmt.Errorf("restore: the current database does not open (%v), and replacing it failed: %w", openErr, err)
		}
		st, err := openStore(c.ctx, cfg.DBPath, nil)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		st.Close()
	}
	// The restored records of this project whose files are gone get their
	// files back, rather than being deleted by the next sync for lack of
	// them; files on disk stay canonical.
	err = c.app(func(a *app, log *slog.Logger) error {
		dir := a.Dir.Path()
		if _, err := a.Store.ReleaseMissingFiles(c.ctx, a.cfg.Project, func(stem string) bool {
			_, err := os.Lstat(filepath.Join(dir, stem+".md"))
			return os.IsNotExist(err)
		}); err != nil {
			return err
		}
		rep, err := a.Sync(c.ctx)
		printProblems(c.stderr, server.Problems(rep))
		return err
	})
	if err != nil {
		return fmt.Errorf("restore: bring the markdown files up to date: %w", err)
	}
	out := struct {
		Restored string `json:"restored"`
		Into     string `json:"into"`
		Records  int    `json:"records"`
		Kept     string `json:"kept"`
	}{src, cfg.DBPath, chk.Records, keep}
	if f.JSON() {
		return printJSON(c.stdout, out)
	}
	fmt.Fprintf(c.stdout, "restored %d records from %s into %s\nthe replaced database is kept at %s\n", out.Records, src, cfg.DBPath, keep)
	return nil
}

// backupProblem says what is wrong with src as a backup to restore. The
// store's own advice is for a live database ("move it aside, or point
// PROMETHEUS_MEMORY_DB_PATH elsewhere") and is left out: src is not that.
func backupProblem(src string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s does not exist", src)
	}
	cause := err
	for u := errors.Unwrap(cause); u != nil; u = errors.Unwrap(cause) {
		cause = u
	}
	why := strings.TrimPrefix(cause.Error(), "check "+src+": ")
	return fmt.Sprintf("%s is not a backup this build can restore (%s); give restore a file that \"memory-mcp backup\" made", src, why)
}

// replaceFile moves db (and its -wal and -shm files) to keep and copies src
// to db, 0600.
func replaceFile(db, src, keep string) error {
	if _, err := os.Lstat(keep); err == nil {
		return fmt.Errorf("%s exists", keep)
	}
	if _, err := os.Stat(db); err == nil {
		if err := os.Rename(db, keep); err != nil {
			return err
		}
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(db + sfx); err == nil {
			if err := os.Rename(db+sfx, keep+sfx); err != nil {
				return err
			}
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(db, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
