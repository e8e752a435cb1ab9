package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/postgres"
	"prom.codes/memory-mcp/memory/sqlite"
)

// The database a command works on is a SQLite file (the default, for one
// machine) or a PostgreSQL database named by a postgres:// URL (for a team
// server, whose replicas share it). The URL may hold a password: it is never
// shown whole, in an error, a log or an answer.

// isDBURL reports whether target names a PostgreSQL database rather than a
// file.
func isDBURL(target string) bool {
	t := strings.ToLower(target)
	return strings.HasPrefix(t, "postgres://") || strings.HasPrefix(t, "postgresql://")
}

// checkDBURL refuses what cannot be a PostgreSQL URL, without repeating it.
func checkDBURL(v string) error {
	if !isDBURL(v) {
		return errors.New("want a postgres:// or postgresql:// URL, like postgres://memory@db.example.com:5432/memory (the value is not shown: it may hold a password)")
	}
	u, err := url.Parse(v)
	if err != nil && !strings.Contains(hostPart(v), ",") { // several hosts are pgx's to parse
		return errors.New("not a valid URL (the value is not shown: it may hold a password)")
	}
	if err == nil && u.Opaque != "" {
		return errors.New("not a valid URL: want postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	return nil
}

// parseDBURL parses a database URL, refusing one whose fragment holds an
// @: that is the rest of a password holding # and @ unescaped, and what
// parsed as its host is a piece of the password.
func parseDBURL(v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err == nil && strings.Contains(u.Fragment, "@") {
		return nil, errors.New("a # before the last @")
	}
	return u, err
}

// hostPart is what lies between a URL's "//" and the path, query or end.
func hostPart(v string) string {
	_, rest, _ := strings.Cut(v, "://")
	// Past the last @ anywhere: a password may hold a slash, and hiding
	// too much is safe where showing a piece of one is not.
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// dbShown is a database URL fit to show (see shownURL); one that does not
// parse shows its scheme and host only.
func dbShown(v string) string {
	u, err := parseDBURL(v)
	if err != nil {
		return strings.SplitN(v, "://", 2)[0] + "://" + hostPart(v) + "/…"
	}
	return shownURL(u)
}

// shownURL is u as errors, logs and doctor show it: its scheme, host and
// path. Its user, password, query and fragment are left out: each may
// carry a credential (a key in the user part, a password in the query).
func shownURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// dbAddr is the host:port a database URL connects to, for saying what
// could not be reached.
func dbAddr(v string) string {
	h := hostPart(v)
	if h == "" {
		if u, err := url.Parse(v); err == nil && u.Query().Get("host") != "" {
			return u.Query().Get("host")
		}
		return "the local PostgreSQL socket"
	}
	if strings.Contains(h, ",") {
		return h
	}
	if _, _, err := net.SplitHostPort(h); err != nil {
		return net.JoinHostPort(strings.Trim(h, "[]"), "5432")
	}
	return h
}

// dbSecrets are the passwords a database URL holds, in every spelling an
// error from the driver might repeat.
func dbSecrets(v string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 {
			out = append(out, s, url.QueryEscape(s), url.PathEscape(s))
		}
	}
	if u, err := parseDBURL(v); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		add(u.Query().Get("password"))
	} else if _, rest, _ := strings.Cut(v, "://"); strings.Contains(rest, "@") {
		// Unparsable: take all between the scheme and the last @ as the
		// user part, and all after its first colon as the password.
		userinfo := rest[:strings.LastIndexByte(rest, '@')]
		if _, p, ok := strings.Cut(userinfo, ":"); ok {
			add(p)
			if q, err := url.PathUnescape(p); err == nil {
				add(q)
			}
		}
	}
	return out
}

// redactedError is an error whose text had a password taken out; errors.Is
// and errors.As still see what it wraps.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact takes every one of secrets out of err's text, and puts it on one
// line (the driver tells of each address it tried on a line of its own).
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

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
	url := isDBURL(db)
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
		return dbShown(c.DBURL)
	}
	return c.DBPath
}

// dbError says what went wrong opening the database: on PostgreSQL, which
// server could not be reached, and never the password.
func (c Config) dbError(err error) error {
	if err == nil || c.DBURL == "" {
		return err
	}
	if addr := dbAddr(c.DBURL); !strings.Contains(err.Error(), addr) {
		err = fmt.Errorf("PostgreSQL at %s: %w", addr, err)
	}
	return redact(err, dbSecrets(c.DBURL))
}

// sqliteOnly is the error of a command that works on the database file
// when the database is PostgreSQL.
func (c Config) sqliteOnly(cmd, instead string) error {
	return fmt.Errorf("%s: the database is PostgreSQL (%s), not a file: %s", cmd, c.DBName(), instead)
}

// openStore opens the store at target: the SQLite file, or the PostgreSQL
// database a postgres:// URL names.
func openStore(ctx context.Context, target string, opts *memory.Options) (*memory.Store, error) {
	var b memory.Backend
	var err error
	if memory.IsURL(target) {
		b, err = postgres.Open(ctx, target)
	} else {
		b, err = sqlite.Open(ctx, target)
	}
	if err != nil {
		return nil, err
	}
	return memory.New(ctx, b, opts)
}
