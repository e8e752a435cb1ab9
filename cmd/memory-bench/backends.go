package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	stores "prom.codes/memory-mcp/memory/backend"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/postgres"
)

// A backend is the store a run measures the server on: the SQLite file (the
// default) or a PostgreSQL database of the run's own, made on the server
// -db names and dropped afterwards.
type backend struct {
	name string // "sqlite" or "postgres"
	url  string // the PostgreSQL database's URL
}

func (b backend) title() string {
	if b.name == "postgres" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// parseBackends reads -backends.
func parseBackends(list, db string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "sqlite", "postgres":
		default:
			return nil, fmt.Errorf("-backends: %q is not sqlite or postgres", f)
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("-backends: %s twice", f)
		}
		out = append(out, f)
	}
	if slices.Contains(out, "postgres") {
		l := strings.ToLower(db)
		if !strings.HasPrefix(l, "postgres://") && !strings.HasPrefix(l, "postgresql://") {
			return nil, fmt.Errorf("-backends postgres needs -db postgres://USER@HOST:PORT/DB, a role that may create databases")
		}
	}
	return out, nil
}

// openBackend readies name for one measurement; done drops what it made.
func openBackend(ctx context.Context, cfg config, name string, stderr io.Writer) (b backend, done func(), err error) {
	b = backend{name: name}
	if name != "postgres" {
		return b, func() {}, nil
	}
	u, err := url.Parse(cfg.dbURL)
	if err != nil {
		return b, nil, fmt.Errorf("-db: not a valid URL")
	}
	var rb [6]byte
	rand.Read(rb[:])
	db := "memory_bench_" + hex.EncodeToString(rb[:])
	if err := pgAdmin(ctx, cfg.dbURL, "CREATE DATABASE "+db); err != nil {
		return b, nil, fmt.Errorf("create a database for the benchmark on %s: %w", u.Host, err)
	}
	u.Path = "/" + db
	b.url = u.String()
	if cfg.keep {
		fmt.Fprintf(stderr, "memory-bench: keeping the database %s\n", db)
		return b, func() {}, nil
	}
	return b, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgAdmin(ctx, cfg.dbURL, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "memory-bench: drop the database %s: %v\n", db, err)
		}
	}, nil
}

func pgAdmin(ctx context.Context, server, stmt string) error {
	return postgres.Exec(ctx, server, stmt)
}

// pgSize is the size of the database at u, or 0 when it cannot be read.
func pgSize(ctx context.Context, u string) int64 {
	b, err := postgres.Open(ctx, u)
	if err != nil {
		return 0
	}
	defer b.Close()
	n, err := b.Size(ctx)
	if err != nil {
		return 0
	}
	return n
}

// env is the server's environment variable naming this backend's store,
// given the file the SQLite backend uses.
func (b backend) env(dbPath string) string {
	if b.name == "postgres" {
		return "PROMETHEUS_MEMORY_DB_URL=" + b.url
	}
	return "PROMETHEUS_MEMORY_DB_PATH=" + dbPath
}

// target is what openStore opens for this backend.
func (b backend) target(dbPath string) string {
	if b.name == "postgres" {
		return b.url
	}
	return dbPath
}

// writeSideBySide prints each operation's p50 and p99 on every backend in
// one table.
func writeSideBySide(w io.Writer, reps []*report) error {
	var b strings.Builder
	b.WriteString("### The backends side by side\n\n| operation |")
	for _, r := range reps {
		fmt.Fprintf(&b, " %s p50 | %s p99 |", r.backend.title(), r.backend.title())
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|--:|", len(reps)) + "\n")
	for i, s := range reps[0].samples {
		fmt.Fprintf(&b, "| %s |", s.name)
		for _, r := range reps {
			if i >= len(r.samples) || len(r.samples[i].durs) == 0 {
				b.WriteString(" – | – |")
				continue
			}
			d := slices.Clone(r.samples[i].durs)
			slices.Sort(d)
			fmt.Fprintf(&b, " %s | %s |", ms(percentile(d, 50)), ms(percentile(d, 99)))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String()+"\n")
	return err
}

// openStore opens the store at target (see memory/backend.Open).
func openStore(ctx context.Context, target string, opts *memory.Options) (*memory.Store, error) {
	return stores.Open(ctx, target, opts)
}
