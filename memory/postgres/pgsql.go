package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The store's SQL is written for SQLite. On PostgreSQL each statement
// passes through pgTranslate once (the result is cached): the handful of
// constructs the two spell differently are rewritten here, in one place,
// so the store keeps one SQL layer over *sql.DB.
//
//   - placeholders: ?, ?N and @name (sql.Named) become $n, and named
//     arguments are put in $n order (pgx's driver takes positions only);
//   - scalar max(a, b) and min(a, b) become greatest and least (the
//     one-argument aggregates stay);
//   - INDEXED BY hints go; PostgreSQL's planner picks its own index;
//   - json_each(x) becomes jsonb_array_elements_text(x::jsonb), named
//     json_each with one column, value; rowid IN (SELECT value FROM
//     json_each(x)) becomes rowid = ANY of the array as bigints, which the
//     plan kept for a prepared statement reads by the primary key (a join
//     with the function's rows scans the table);
//   - LIMIT -1 becomes LIMIT ALL;
//   - LIKE becomes ILIKE, which ignores the case of ASCII letters as
//     SQLite's LIKE does (the columns are COLLATE "C": no more than those);
//   - PRAGMA user_version reads the PostgreSQL migrations' version.
//
// Constructs with no equivalent here (INSERT OR REPLACE, UPDATE OR IGNORE,
// VACUUM, other PRAGMAs) are refused, so a statement that would behave
// differently fails loudly in the store suite, which runs on both. The
// store writes upserts and insert-or-ignore in the syntax both accept:
// INSERT … ON CONFLICT ….

// pgQuery is a statement translated for PostgreSQL.
type pgQuery struct {
	sql string
	// names are the named parameters in $n order; nil when the
	// statement's parameters are positional.
	names []string
	// write is set for a statement that changes rows (see pgConn).
	write bool
}

// pgQueries caches translations. The store's statements carry their
// values as arguments, so there are a few hundred of them; should one be
// built with values in its text, the cache starts over when it grows past
// pgQueriesMax rather than grow without end.
var pgQueries struct {
	sync.RWMutex
	m map[string]*pgQuery
}

const pgQueriesMax = 4096

func pgTranslate(q string) (*pgQuery, error) {
	pgQueries.RLock()
	t, ok := pgQueries.m[q]
	pgQueries.RUnlock()
	if ok {
		return t, nil
	}
	t, err := translate(q)
	if err != nil {
		return nil, err
	}
	pgQueries.Lock()
	if pgQueries.m == nil || len(pgQueries.m) >= pgQueriesMax {
		pgQueries.m = map[string]*pgQuery{}
	}
	pgQueries.m[q] = t
	pgQueries.Unlock()
	return t, nil
}

// translate's patterns, compiled when a PostgreSQL store first needs them:
// a process on SQLite never does.
var (
	pgIndexedBy = lazyRegexp(`(?i)\s+INDEXED\s+BY\s+\w+`)
	pgRowidIn   = lazyRegexp(`(?i)\b(\w+\.)?rowid\s+IN\s*\(\s*SELECT\s+value\s+FROM\s+json_each\(([^()]*)\)\s*\)`)
	pgLimitAll  = lazyRegexp(`(?i)\bLIMIT\s+-1\b`)
	pgRefused   = lazyRegexp(`(?i)\b(INSERT\s+OR\s+\w+|UPDATE\s+OR\s+\w+|REPLACE\s+INTO|VACUUM|PRAGMA)\b`)
	// A write: INSERT, UPDATE or DELETE, after any comments, or in a WITH.
	pgWrite = lazyRegexp(`(?is)^(\s|--[^\n]*\n)*((INSERT|UPDATE|DELETE)\b|WITH\b.*\b(INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b)`)
)

// lazyRegexp compiles pattern the first time it is used.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

func translate(q string) (*pgQuery, error) {
	s := q
	if strings.TrimSpace(s) == "PRAGMA user_version" {
		s = `SELECT coalesce(max(version), 0) FROM memory_migrations`
	}
	if m := pgRefused().FindString(s); m != "" {
		return nil, fmt.Errorf("%s has no PostgreSQL translation", m)
	}
	s = pgIndexedBy().ReplaceAllString(s, "")
	s = pgLimitAll().ReplaceAllString(s, "LIMIT ALL")
	s = pgRowidIn().ReplaceAllString(s, "${1}rowid = ANY (CAST(ARRAY(SELECT jsonb_array_elements_text((${2})::jsonb)) AS BIGINT[]))")
	s, err := rewriteCalls(s)
	if err != nil {
		return nil, err
	}
	out, names, err := placeholders(s)
	if err != nil {
		return nil, err
	}
	return &pgQuery{sql: out, names: names, write: pgWrite().MatchString(out)}, nil
}

// rewriteCalls renames scalar max and min, rewrites json_each and LIKE,
// outside string literals and quoted names.
func rewriteCalls(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\'' || c == '"' {
			j := skipQuoted(s, i)
			b.WriteString(s[i:j])
			i = j
			continue
		}
		if isIdent(c) && (i == 0 || !isIdent(s[i-1])) {
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := strings.ToLower(s[i:j])
			if j < len(s) && s[j] == '(' && (word == "max" || word == "min" || word == "json_each") {
				end, commas := matchParen(s, j)
				if end < 0 {
					return "", fmt.Errorf("unbalanced parentheses in %q", s)
				}
				inner, err := rewriteCalls(s[j+1 : end])
				if err != nil {
					return "", err
				}
				switch {
				case word == "json_each":
					b.WriteString("jsonb_array_elements_text((" + inner + ")::jsonb) AS json_each(value)")
				case commas > 0 && word == "max":
					b.WriteString("greatest(" + inner + ")")
				case commas > 0:
					b.WriteString("least(" + inner + ")")
				default:
					b.WriteString(s[i:j] + "(" + inner + ")")
				}
				i = end + 1
				continue
			}
			if word == "like" {
				// SQLite's LIKE ignores the case of ASCII letters; so does
				// ILIKE over the schema's COLLATE "C" columns, and no more.
				b.WriteString("ILIKE")
			} else {
				b.WriteString(s[i:j])
			}
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), nil
}

// matchParen returns the index of the parenthesis closing the one at
// open, and how many commas it holds at its own depth; -1 if none.
func matchParen(s string, open int) (end, commas int) {
	depth := 0
	for i := open; i < len(s); {
		switch s[i] {
		case '\'', '"':
			i = skipQuoted(s, i)
			continue
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i, commas
			}
		case ',':
			if depth == 1 {
				commas++
			}
		}
		i++
	}
	return -1, 0
}

// skipQuoted returns the index past the literal or quoted name at i.
func skipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// placeholders numbers the parameters $1, $2, … . A statement uses either
// positional (? and ?N) or named (@name) parameters, not both.
func placeholders(s string) (string, []string, error) {
	var b strings.Builder
	var names []string
	at := map[string]int{}
	next, positional := 0, false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := skipQuoted(s, i)
			b.WriteString(s[i:j])
			i = j
			continue
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		case c == '?':
			positional = true
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j > i+1 {
				n, _ := strconv.Atoi(s[i+1 : j])
				b.WriteString("$" + strconv.Itoa(n))
				next = max(next, n)
			} else {
				next++
				b.WriteString("$" + strconv.Itoa(next))
			}
			i = j
			continue
		case c == '@' && i+1 < len(s) && isIdent(s[i+1]):
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			name := s[i+1 : j]
			n, ok := at[name]
			if !ok {
				names = append(names, name)
				n = len(names)
				at[name] = n
			}
			b.WriteString("$" + strconv.Itoa(n))
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	if positional && names != nil {
		return "", nil, fmt.Errorf("statement mixes positional and named parameters: %q", s)
	}
	return b.String(), names, nil
}
