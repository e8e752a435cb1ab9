package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

func runExport(c *cli, args []string) error {
	f := newFlags(c, "export").withJSON()
	out := f.String("out", "", "write to this file (default stdout); it is made 0600")
	all := f.Bool("all-projects", false, "every project's records, not only this project's")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		if _, err := a.Sync(c.ctx); err != nil {
			return err
		}
		w := c.stdout
		var file *os.File
		tmp := ""
		if *out != "" && *out != "-" {
			if err := safeOut(*out, a.cfg.DBPath); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			// Write beside the target and rename, so a failed export never
			// leaves half a file where a good one was.
			var err error
			file, err = os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*")
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			tmp = file.Name()
			defer os.Remove(tmp)
			defer file.Close()
			w = file
		}
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		// Lines written to the terminal itself would break the bar's line.
		bar := progress.New(c.stderr, "exporting", 0, "records")
		if file == nil && progress.IsTerminal(c.stdout) {
			bar = progress.New(io.Discard, "", 0, "")
		}
		n := 0
		err := a.Store.Export(c.ctx, a.cfg.Project, *all, func(project string, r memory.Record) error {
			n++
			bar.Add(1)
			return enc.Encode(jsonl.Of(project, r))
		})
		bar.Finish()
		if err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if file != nil {
			if err := file.Sync(); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := file.Close(); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := os.Rename(tmp, *out); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if f.JSON() {
				return printJSON(c.stdout, struct {
					Out     string `json:"out"`
					Records int    `json:"records"`
				}{*out, n})
			}
			fmt.Fprintf(c.stderr, "exported %d records to %s\n", n, *out)
		}
		return nil
	})
}

// refusal is one import line not taken.
type refusal struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

type importResult struct {
	File      string    `json:"file"`
	Format    string    `json:"format"`
	DryRun    bool      `json:"dry_run"`
	Lines     int       `json:"lines"`
	Created   int       `json:"created"`
	Updated   int       `json:"updated"`
	Unchanged int       `json:"unchanged"`
	Refused   []refusal `json:"refused"`
	// Moved counts the records exported from another project that went
	// into this one (without --keep-projects).
	Moved int `json:"moved_from_other_projects"`
	// FromFiles counts the lines whose record the import's first step, a
	// sync of the project's markdown files, had just read in: a fresh
	// database in a checkout that has the files.
	FromFiles int `json:"read_from_markdown_first"`
	// Projects counts the other projects records went to (with
	// --keep-projects).
	Projects int `json:"other_projects"`
}

// reason is an error's text as an import reports it: the store's errors
// name the rule and the field, never the value.
func reason(err error) string {
	var me *memory.Error
	if errors.As(err, &me) {
		return me.Error()
	}
	return "internal: " + err.Error()
}

func runImport(c *cli, args []string) error {
	f := newFlags(c, "import").withJSON()
	format := f.String("format", "memory-mcp", "memory-mcp (an export) or server-memory (the reference MCP memory server's JSONL graph)")
	dry := f.Bool("dry-run", false, "check every line and report, writing nothing")
	keep := f.Bool("keep-projects", false, "put each record back in the project it was exported from (its \"project\" field), as for an export --all-projects; without it, project records go to this project")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *format != "memory-mcp" && *format != "server-memory" {
		return fmt.Errorf("import: unknown --format %q (want memory-mcp or server-memory)", clipArg(*format))
	}
	if *keep && *format != "memory-mcp" {
		return fmt.Errorf("import: --keep-projects is for memory-mcp exports; a server-memory graph has no projects")
	}
	var in io.Reader = c.stdin
	var total int64
	if pos[0] != "-" {
		file, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer file.Close()
		fi, err := file.Stat()
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if fi.IsDir() {
			return fmt.Errorf("import: %s is a directory", pos[0])
		}
		in, total = file, fi.Size()
	}
	res := importResult{File: pos[0], Format: *format, DryRun: *dry, Refused: []refusal{}}
	others := map[scope.Identity]bool{}
	err = c.app(func(a *app, log *slog.Logger) error {
		rep, err := a.Sync(c.ctx)
		if err != nil {
			return err
		}
		fromFiles := map[string]bool{}
		for _, k := range rep.Imported {
			fromFiles[k] = true
		}
		bar := progress.New(c.stderr, "importing", total, "bytes")
		defer bar.Finish()
		if *format == "server-memory" {
			return importGraph(c, a, in, bar, &res)
		}
		return jsonl.Read(in, func(n int, line []byte, tooLong bool) error {
			bar.Add(int64(len(line)))
			if err := c.ctx.Err(); err != nil {
				return err
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 && !tooLong {
				return nil
			}
			res.Lines++
			if tooLong {
				res.Refused = append(res.Refused, refusal{n, fmt.Sprintf("too_large: the line is longer than %d bytes", jsonl.MaxLine)})
				return nil
			}
			var l jsonl.Line
			var given struct {
				Confidence *float64 `json:"confidence"`
			}
			err := json.Unmarshal(line, &l)
			if err == nil {
				err = json.Unmarshal(line, &given)
			}
			if err != nil {
				res.Refused = append(res.Refused, refusal{n, jsonl.Reason(err)})
				return nil
			}
			if l.Key == "" && bytes.Contains(line, []byte(`"entityType"`)) {
				res.Refused = append(res.Refused, refusal{n, "looks like a server-memory graph line; use --format server-memory"})
				return nil
			}
			rec := l.Record()
			if given.Confidence == nil {
				// A line written by hand takes the default, as a tool write does.
				rec.Confidence = 0.5
			}
			into := a.Proj
			moved := false
			if *keep {
				id, ok := jsonl.Identity(a.cfg.Project, l.Project, l.Scope)
				if !ok {
					res.Refused = append(res.Refused, refusal{n, fmt.Sprintf("invalid_argument: project: is not the project of a %s record", l.Scope)})
					return nil
				}
				if id != a.cfg.Project {
					// Another project's records get their files from that
					// project's own next sync; this one has no mirror of them.
					into = memory.Project{ID: id}
					if !others[id] && l.Scope == scope.Project {
						others[id] = true
						res.Projects++
					}
				}
			} else if l.Project != "" && l.Project != string(a.cfg.Project) && l.Scope == scope.Project {
				moved = true
			}
			refused := len(res.Refused)
			if *dry {
				res.dryRun(c.ctx, a.Store, into.ID, n, memory.Write{Scope: rec.Scope, Type: rec.Type, Key: rec.Key, Description: rec.Description,
					Body: rec.Body, Tags: rec.Tags, Confidence: &rec.Confidence, SessionID: rec.SessionID, Source: rec.Source, Metadata: rec.Metadata})
			} else {
				start := time.Now()
				got, created, err := a.Store.Restore(c.ctx, into, rec)
				res.count(n, got, created, start, err)
				if err == nil && !created && into.ID == a.cfg.Project && got.Scope == scope.Project && fromFiles[got.Key] {
					res.FromFiles++
				}
			}
			if moved && len(res.Refused) == refused {
				res.Moved++ // only a record taken went into this project
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", pos[0], err)
	}
	sort.SliceStable(res.Refused, func(i, j int) bool { return res.Refused[i].Line < res.Refused[j].Line })
	if f.JSON() {
		if err := printJSON(c.stdout, res); err != nil {
			return err
		}
	} else {
		verb := "imported"
		if res.DryRun {
			verb = "would import"
		}
		fmt.Fprintf(c.stdout, "%s %d new, %d updated, %d unchanged; %d refused (of %d lines)\n",
			verb, res.Created, res.Updated, res.Unchanged, len(res.Refused), res.Lines)
		for _, r := range res.Refused {
			fmt.Fprintf(c.stderr, "line %d refused: %s\n", r.Line, r.Reason)
		}
		if res.Projects > 0 {
			fmt.Fprintf(c.stdout, "%d other projects got their own records back; \"memory-mcp projects\" lists them\n", res.Projects)
		}
		if res.FromFiles > 0 {
			fmt.Fprintf(c.stdout, "%s already here: the project's markdown files (%s) were read in first\n",
				server.Plural(res.FromFiles, "record was", "records were"), relMemories)
		}
		if res.Moved > 0 {
			fmt.Fprintf(c.stderr, "note: %s exported from other projects went into this one; import --keep-projects keeps such records in their own\n",
				server.Plural(res.Moved, "project record", "project records"))
		}
	}
	if len(res.Refused) > 0 {
		return fmt.Errorf("import %s: %d of %d lines refused", pos[0], len(res.Refused), res.Lines)
	}
	return nil
}

func runBackup(c *cli, args []string) error {
	f := newFlags(c, "backup").withJSON()
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if cfg, err := loadConfig(c.getenv); err == nil && cfg.Postgres() {
		return cfg.sqliteOnly("backup", `back it up with pg_dump (pg_dump -Fc -f memory.dump "$PROMETHEUS_MEMORY_DB_URL"), or take a portable copy of its records with "memory-mcp export --all-projects"`)
	}
	return c.app(func(a *app, log *slog.Logger) error {
		// The copy's size is near the database's: the bar follows it.
		var total int64
		for _, f := range []string{a.cfg.DBPath, a.cfg.DBPath + "-wal"} {
			if fi, err := os.Stat(f); err == nil {
				total += fi.Size()
			}
		}
		bar := progress.New(c.stderr, "backing up", total, "bytes")
		err := bar.WatchFile(pos[0], func() error { return a.Store.Backup(c.ctx, pos[0]) })
		bar.Finish()
		if err != nil {
			return err
		}
		chk, err := memory.CheckFile(c.ctx, pos[0])
		if err != nil {
			return fmt.Errorf("the backup does not check out: %w", err)
		}
		fi, _ := os.Stat(pos[0])
		out := struct {
			Path    string `json:"path"`
			Bytes   int64  `json:"bytes"`
			Records int    `json:"records"`
			Schema  int    `json:"schema_version"`
		}{pos[0], fi.Size(), chk.Records, chk.Schema}
		if f.JSON() {
			return printJSON(c.stdout, out)
		}
		fmt.Fprintf(c.stdout, "backed up %d records (%s) to %s; integrity ok\n", out.Records, progress.Size(out.Bytes), out.Path)
		return nil
	})
}

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
	chk, err := memory.CheckFile(c.ctx, src)
	if err != nil {
		return fmt.Errorf("restore refused, nothing changed: %s", backupProblem(src, err))
	}
	st, openErr := memory.Open(c.ctx, cfg.DBPath, nil)
	if openErr == nil {
		bar := progress.New(c.stderr, "restoring", 0, "pages")
		_, err = st.RestoreFrom(c.ctx, src, keep, func(done, total int) { bar.Set(int64(done), int64(total)) })
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
		st, err := memory.Open(c.ctx, cfg.DBPath, nil)
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

// count adds one write's outcome: a record whose content did not change
// keeps its old updated_at.
// dryRun counts what importing w as line would do, writing nothing: refused,
// new, or, against the record of the same scope, type and key, updated or
// unchanged.
func (res *importResult) dryRun(ctx context.Context, st *memory.Store, p scope.Identity, line int, w memory.Write) {
	w, err := memory.Normalize(w)
	if err != nil {
		res.Refused = append(res.Refused, refusal{line, reason(err)})
		return
	}
	old, err := st.Peek(ctx, p, memory.Selector{Key: w.Key, Type: w.Type, Scope: &w.Scope})
	switch {
	case err != nil:
		res.Created++
	case old.Description == w.Description && old.Body == w.Body && slices.Equal(old.Tags, w.Tags) &&
		(w.Confidence == nil || old.Confidence == *w.Confidence) && (w.SessionID == "" || old.SessionID == w.SessionID) &&
		maps.Equal(old.Metadata, w.Metadata):
		res.Unchanged++
	default:
		res.Updated++
	}
}

func (res *importResult) count(line int, got memory.Record, created bool, start time.Time, err error) {
	switch {
	case err != nil:
		res.Refused = append(res.Refused, refusal{line, reason(err)})
	case created:
		res.Created++
	case got.UpdatedAt.Before(start):
		res.Unchanged++
	default:
		res.Updated++
	}
}

// safeOut refuses an export target that is the database, one of its
// companion files, or any SQLite database: replacing it would lose it.
func safeOut(out, db string) error {
	fi, err := os.Stat(out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", out)
	}
	for _, f := range []string{db, db + "-wal", db + "-shm", db + "-journal"} {
		if dfi, err := os.Stat(f); err == nil && os.SameFile(fi, dfi) {
			return fmt.Errorf("%s is the database itself; choose another file", out)
		}
	}
	head := make([]byte, 16)
	if f, err := os.Open(out); err == nil {
		n, _ := io.ReadFull(f, head)
		f.Close()
		if string(head[:n]) == "SQLite format 3\x00" {
			return fmt.Errorf("%s is a SQLite database, not an export; choose another file", out)
		}
	}
	return nil
}
