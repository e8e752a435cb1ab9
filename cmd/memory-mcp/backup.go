package main

import (
	"fmt"
	"log/slog"
	"os"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/memory/sqlite"
)

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
		chk, err := sqlite.CheckFile(c.ctx, pos[0])
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
