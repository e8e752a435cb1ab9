package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

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
	Moved     int       `json:"moved_from_other_projects"` // records of another project's export taken into this one
	// FromFiles counts lines whose record the first step, a sync of the
	// markdown files, had just read in (a fresh database in a checkout).
	FromFiles int  `json:"read_from_markdown_first"`
	Projects  int  `json:"other_projects"` // other projects records went to (--keep-projects)
	approx    bool // a dry run with no scratch copy (PostgreSQL): checked, not rehearsed
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
		return fmt.Errorf("import: unknown --format %q (want memory-mcp or server-memory)", schema.Clip(*format))
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
		if *dry {
			// Rehearsed on a copy without the mirror: every refusal a write finds.
			tmp, err := os.MkdirTemp("", "memory-mcp-dry-run-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			scratch := filepath.Join(tmp, "memory.db")
			err = a.Store.Backup(c.ctx, scratch)
			if res.approx = errors.Is(err, errors.ErrUnsupported); err != nil && !res.approx {
				return fmt.Errorf("copy the database to rehearse on: %w", err)
			}
			if !res.approx {
				st, err := openStore(c.ctx, scratch, nil)
				if err != nil {
					return err
				}
				defer st.Close()
				copied := *a.App
				copied.Store, copied.Proj, copied.Dir = st, memory.Project{ID: a.Proj.ID}, nil
				a = &app{App: &copied, cfg: a.cfg}
			}
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
		return jsonl.Read(in, func(n int, line []byte, bad string) error {
			bar.Add(int64(len(line)))
			if err := c.ctx.Err(); err != nil {
				return err
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 && bad == "" {
				return nil
			}
			res.Lines++
			if bad != "" {
				res.Refused = append(res.Refused, refusal{n, bad})
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
			if res.approx {
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
