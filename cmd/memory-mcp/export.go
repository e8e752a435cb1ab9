package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/memory"
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
