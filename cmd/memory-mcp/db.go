package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/dburl"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/backend"
)

// The database a command works on is a SQLite file (the default, for one
// machine) or a PostgreSQL database named by a postgres:// URL (see
// package dburl).

// dbFlag takes the global --db flag (--db X, --db=X, -db X or -db=X) out of
// args, wherever it is before a "--": every command takes it. The last one
// given wins, as with any flag.
func dbFlag(args []string) (db string, rest []string, err error) {
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		if name != "--db" && name != "-db" {
			rest = append(rest, a)
			if takesValue(a) && i+1 < len(args) {
				// The next argument is this flag's value, whatever it
				// reads (a body of "--db=x.db" is a body).
				i++
				rest = append(rest, args[i])
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, errors.New("--db: want a database file or a postgres:// URL")
			}
			i++
			value = args[i]
		}
		if strings.TrimSpace(value) == "" {
			return "", nil, errors.New("--db: want a database file or a postgres:// URL, not nothing")
		}
		db = value
	}
	return db, rest, nil
}

// boolFlags are the commands' flags that take no value.
var boolFlags = map[string]bool{
	"admin": true, "all-projects": true, "dry-run": true, "json": true,
	"keep-projects": true, "no-hooks": true, "prune": true, "update": true,
	"h": true, "help": true,
}

// takesValue reports whether a, an argument, is a flag whose value is the
// next argument. A flag missing from boolFlags is taken to have one: a
// --db after it is then refused by the command as a flag it does not
// know, rather than read as this one's value.
func takesValue(a string) bool {
	if len(a) < 2 || a[0] != '-' || strings.Contains(a, "=") || a == "--" {
		return false
	}
	return !boolFlags[strings.TrimLeft(a, "-")]
}

// withDB is getenv with the database --db named in place of the
// environment's: a URL for PostgreSQL, anything else a SQLite file.
func withDB(getenv func(string) string, db string) func(string) string {
	if db == "" {
		return getenv
	}
	url := dburl.IsURL(db)
	return func(k string) string {
		switch k {
		case "PROMETHEUS_MEMORY_DB_URL":
			if url {
				return db
			}
			return ""
		case "PROMETHEUS_MEMORY_DB_PATH":
			if url {
				return ""
			}
			return db
		}
		return getenv(k)
	}
}

// DB is what the store opens: the PostgreSQL URL, else the file.
func (c Config) DB() string {
	if c.DBURL != "" {
		return c.DBURL
	}
	return c.DBPath
}

// Postgres reports whether the store is PostgreSQL.
func (c Config) Postgres() bool { return c.DBURL != "" }

// DBName is the database as messages and logs show it: the file, or the
// URL without its password.
func (c Config) DBName() string {
	if c.DBURL != "" {
		return dburl.Shown(c.DBURL)
	}
	return c.DBPath
}

// dbError says what went wrong opening the database: on PostgreSQL, which
// server could not be reached, and never the password.
func (c Config) dbError(err error) error {
	if err == nil || c.DBURL == "" {
		return err
	}
	if addr := dburl.Addr(c.DBURL); !strings.Contains(err.Error(), addr) {
		err = fmt.Errorf("PostgreSQL at %s: %w", addr, err)
	}
	return dburl.Redact(err, dburl.Secrets(c.DBURL))
}

// sqliteOnly is the error of a command that works on the database file
// when the database is PostgreSQL.
func (c Config) sqliteOnly(cmd, instead string) error {
	return fmt.Errorf("%s: the database is PostgreSQL (%s), not a file: %s", cmd, c.DBName(), instead)
}

// openStore opens the store at target (see backend.Open).
func openStore(ctx context.Context, target string, opts *memory.Options) (*memory.Store, error) {
	return backend.Open(ctx, target, opts)
}
