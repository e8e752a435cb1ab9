package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/agent"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/dburl"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/memory/teamsync"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// check is one finding of doctor.
type check struct {
	Area   string `json:"area"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

type doctor struct {
	checks []check
}

func (d *doctor) ok(area, format string, args ...any) {
	d.checks = append(d.checks, check{Area: area, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (d *doctor) problem(area, detail, fix string) {
	d.checks = append(d.checks, check{Area: area, Detail: detail, Fix: fix})
}

func runDoctor(c *cli, args []string) error {
	f := newFlags(c, "doctor").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(c.getenv)
	if err != nil {
		return err
	}
	var d doctor
	d.database(c.ctx, cfg)
	d.project(cfg, c.getenv("PROMETHEUS_WORKSPACE_ROOT") != "")
	d.mirror(cfg)
	d.agents(cfg.Root)
	d.embeddings(c.ctx, cfg)
	d.sync(c.ctx, cfg, c.getenv)

	bad := 0
	for _, ch := range d.checks {
		if !ch.OK {
			bad++
		}
	}
	if f.JSON() {
		if err := printJSON(c.stdout, struct {
			OK     bool    `json:"ok"`
			Checks []check `json:"checks"`
		}{bad == 0, d.checks}); err != nil {
			return err
		}
	} else {
		for _, ch := range d.checks {
			mark := "ok     "
			if !ch.OK {
				mark = "PROBLEM"
			}
			fmt.Fprintf(c.stdout, "%s  %-10s  %s\n", mark, ch.Area, ch.Detail)
			if ch.Fix != "" {
				fmt.Fprintf(c.stdout, "%s  %-10s  fix: %s\n", strings.Repeat(" ", 7), "", ch.Fix)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("doctor: %s found", server.Plural(bad, "problem", "problems"))
	}
	return nil
}

// database checks the file without opening it for writing, and without
// creating it: a corrupt file is reported, never touched, and a missing
// one is left for the first command that needs it.
func (d *doctor) database(ctx context.Context, cfg Config) {
	const area = "database"
	if cfg.Postgres() {
		d.postgres(ctx, cfg)
		return
	}
	fi, err := os.Stat(cfg.DBPath)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		d.creatable(cfg.DBPath)
		return
	}
	if err != nil {
		d.problem(area, err.Error(), "make the directories on the way to it readable by you, or point PROMETHEUS_MEMORY_DB_PATH (or --db) elsewhere")
		return
	}
	if !fi.Mode().IsRegular() {
		d.problem(area, fmt.Sprintf("%s is not a file", cfg.DBPath), "point PROMETHEUS_MEMORY_DB_PATH (or --db) at a file, or move what is there aside")
		return
	}
	// Windows has no file modes to check: the user profile's access list
	// protects the database there (docs/install.md).
	if runtime.GOOS != "windows" {
		d.openDir(filepath.Dir(cfg.DBPath))
		if fi.Mode().Perm()&0o077 != 0 {
			d.problem(area, fmt.Sprintf("%s is readable by others (mode %o)", cfg.DBPath, fi.Mode().Perm()), "chmod 600 "+cfg.DBPath)
		}
		if fi.Mode().Perm()&0o600 != 0o600 {
			d.problem(area, fmt.Sprintf("%s is not readable and writable by you (mode %o)", cfg.DBPath, fi.Mode().Perm()), "chmod 600 "+cfg.DBPath)
			return
		}
	}
	chk, err := sqlite.CheckFile(ctx, cfg.DBPath)
	if err != nil {
		d.problem(area, err.Error(), "restore a backup with \"memory-mcp restore FILE\"; or move the file aside and a new, empty database is made on next use")
		return
	}
	d.ok(area, "%s: integrity ok, schema %d of %d, %d records, %s", cfg.DBPath, chk.Schema, sqlite.SchemaVersion(), chk.Records, progress.Size(fi.Size()))
}

// openDir reports the database's directory when others may look into it.
// A shared directory with the sticky bit (/tmp) is theirs as much as
// yours: no chmod of it is advised.
func (d *doctor) openDir(dir string) {
	fi, err := os.Stat(dir)
	if err == nil && fi.Mode().Perm()&0o077 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		d.problem("database", fmt.Sprintf("directory %s is open to others (mode %o)", dir, fi.Mode().Perm()), "chmod 700 "+dir)
	}
}

// creatable reports whether the missing database at path could be made:
// the nearest directory on its way that exists must take new files, and
// nothing on the way may be a file.
func (d *doctor) creatable(path string) {
	const area = "database"
	elsewhere := "point PROMETHEUS_MEMORY_DB_PATH (or --db) at a path in a directory you can write"
	dir := filepath.Dir(path)
	for {
		fi, err := os.Stat(dir)
		if err == nil && !fi.IsDir() {
			d.problem(area, fmt.Sprintf("%s cannot be created: %s is a file, not a directory", path, dir), "move "+dir+" aside, or "+elsewhere)
			return
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			d.problem(area, fmt.Sprintf("%s cannot be created: %v", path, err), elsewhere)
			return
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	// Permission bits cannot tell: root passes every check, and a file
	// system like /proc takes no new files whatever its modes say. An
	// empty file made and removed at once can; nothing of it stays.
	probe, err := os.CreateTemp(dir, ".memory-mcp-doctor-*")
	if err != nil {
		fix := elsewhere
		if errors.Is(err, fs.ErrPermission) {
			fix = "make " + dir + " writable by you (chmod u+w " + dir + "), or " + elsewhere
		}
		d.problem(area, fmt.Sprintf("%s cannot be created: %s takes no new files (%v)", path, dir, errors.Unwrap(err)), fix)
		return
	}
	probe.Close()
	os.Remove(probe.Name())
	if dir == filepath.Dir(path) {
		d.openDir(dir)
		d.ok(area, "%s does not exist yet; the first command that needs it creates it", path)
		return
	}
	d.ok(area, "%s does not exist yet; the first command that needs it creates it, with the directories under %s", path, dir)
}

func (d *doctor) project(cfg Config, fromEnv bool) {
	const area = "project"
	fi, err := os.Stat(cfg.Root)
	if err != nil || !fi.IsDir() {
		d.problem(area, fmt.Sprintf("root %s is not a directory", cfg.Root), "run memory-mcp in your project, or set PROMETHEUS_WORKSPACE_ROOT to it")
		return
	}
	how := "git top-level or working directory"
	if fromEnv {
		how = "PROMETHEUS_WORKSPACE_ROOT"
	}
	d.ok(area, "root %s (from %s), identity %s", cfg.Root, how, cfg.Project)
}

// relMemories is where a project's markdown files are, from its root.
const relMemories = ".prometheus/memories"

// mirror reads the project's markdown files and checks each as a sync
// would import it, without the database: doctor changes nothing.
func (d *doctor) mirror(cfg Config) {
	const area = "mirror"
	dir, err := mirror.Open(cfg.Root)
	if err != nil {
		d.problem(area, err.Error(), "make .prometheus and .prometheus/memories plain directories inside the project")
		return
	}
	defer dir.Close()
	entries, err := os.ReadDir(dir.Path())
	if errors.Is(err, fs.ErrNotExist) {
		d.ok(area, "%s: no memory files yet; they are written with the first project fact", dir.Path())
		return
	}
	if err != nil {
		d.problem(area, fmt.Sprintf("read %s: %v", dir.Path(), errors.Unwrap(err)), "make "+dir.Path()+" readable by you (chmod u+rwx "+dir.Path()+")")
		return
	}
	files, bad := 0, 0
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || stem == "" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files++
		rel := relMemories + "/" + e.Name()
		if reason, fix := memoryFileProblem(filepath.Join(dir.Path(), e.Name()), stem); reason != "" {
			bad++
			d.problem(area, fmt.Sprintf("%s not accepted: %s", rel, reason), fix+"; it is read again on the next call")
		}
	}
	if bad == 0 {
		d.ok(area, "%s: every file accepted (%s)", dir.Path(), server.Plural(files, "file", "files"))
	}
}

// memoryFileProblem says what keeps the memory file at path from being
// imported, and how to fix that; "" when nothing does.
func memoryFileProblem(path, stem string) (reason, fix string) {
	fi, err := os.Lstat(path)
	if err != nil {
		return err.Error(), "check the file"
	}
	if !fi.Mode().IsRegular() {
		return "is not a regular file (a symlink is not followed)", "put the memory itself in the file"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("read: %v", errors.Unwrap(err)), "make the file readable by you (chmod u+rw)"
	}
	rec, err := mirror.Decode(stem, data)
	if err != nil {
		return err.Error(), "fix the file (its front matter, encoding or name)"
	}
	w := memory.Write{Scope: scope.Project, Type: rec.Type, Key: rec.Key, Description: rec.Description, Body: rec.Body,
		Tags: rec.Tags, Confidence: &rec.Confidence, Metadata: rec.Metadata}
	err = memory.Check(w)
	switch {
	case errors.Is(err, memory.ErrSecretRejected):
		return err.Error(), "fix the file: remove the secret from it"
	case errors.Is(err, memory.ErrTooLarge):
		return err.Error(), "fix the file: shorten it"
	case err != nil:
		return err.Error(), "fix the file"
	case rec.Type != memory.Semantic && rec.Type != memory.Procedural:
		return fmt.Sprintf("type: %q cannot live in a markdown file (semantic or procedural only)", rec.Type), "fix the file: give it type semantic or procedural"
	}
	return "", ""
}

// agents looks at the agent configs of the project and the user.
func (d *doctor) agents(root string) {
	home, _ := os.UserHomeDir()
	for _, f := range agent.Check(root, home) {
		d.checks = append(d.checks, check{Area: "agents", OK: f.OK, Detail: f.Detail, Fix: f.Fix})
	}
}

// embeddings checks that the endpoint answers (any HTTP response will do,
// since the path and method a health check would need differ between
// servers), then that it embeds a probe text with the configured model.
func (d *doctor) embeddings(ctx context.Context, cfg Config) {
	const area = "embeddings"
	url := cfg.EmbeddingsURL
	if url == "" {
		d.ok(area, "not configured (PROMETHEUS_MEMORY_EMBEDDINGS_URL unset); keyword search only")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		d.problem(area, "PROMETHEUS_MEMORY_EMBEDDINGS_URL is not a valid URL", "set it to the endpoint's base URL, like http://localhost:11434/v1")
		return
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		d.problem(area, fmt.Sprintf("%s does not answer: %v", dburl.ShownURL(req.URL), errors.Unwrap(err)), "start the embeddings server, or unset PROMETHEUS_MEMORY_EMBEDDINGS_URL")
		return
	}
	resp.Body.Close()
	if cfg.EmbeddingsModel == "" {
		d.problem(area, fmt.Sprintf("%s answers, but PROMETHEUS_MEMORY_EMBEDDINGS_MODEL is not set", dburl.ShownURL(req.URL)), "set it to the name of the embeddings model the endpoint serves, like nomic-embed-text")
		return
	}
	d.embedProbe(ctx, cfg)
}

// postgres checks that the PostgreSQL server answers and that the schema is
// this build's: opening the store migrates an older one, and refuses one
// newer than this build knows.
func (d *doctor) postgres(ctx context.Context, cfg Config) {
	const area = "database"
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := openStore(ctx, cfg.DB(), nil)
	if err != nil {
		d.problem(area, cfg.dbError(err).Error(), "start the server or open the network path to "+dburl.Addr(cfg.DBURL)+"; check the user, password and database in PROMETHEUS_MEMORY_DB_URL (or --db)")
		return
	}
	defer st.Close()
	if err := st.Ping(ctx); err != nil {
		d.problem(area, cfg.dbError(err).Error(), "check that "+dburl.Addr(cfg.DBURL)+" is up and reachable from here")
		return
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		d.problem(area, cfg.redact(fmt.Errorf("read the schema of %s: %w", cfg.DBName(), err)).Error(), "grant the user of PROMETHEUS_MEMORY_DB_URL the rights of the database's owner")
		return
	}
	// Opening brought an older schema up to date, and refused a newer one.
	d.ok(area, "%s: PostgreSQL answers, schema %d (this build's), %d records", cfg.DBName(), stats.Schema, stats.Records)
}

// sync reports the team sync's health, when a team is joined.
func (d *doctor) sync(ctx context.Context, cfg Config, getenv func(string) string) {
	ok, detail, fix := teamsync.Doctor(ctx, getenv, func() (*memory.Store, error) { return openStore(ctx, cfg.DB(), nil) })
	if detail != "" {
		d.checks = append(d.checks, check{Area: "sync", OK: ok, Detail: detail, Fix: fix})
	}
}
