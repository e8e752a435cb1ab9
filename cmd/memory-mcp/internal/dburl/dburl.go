// Package dburl handles the postgres:// URL that names a team server's
// database, shared by its replicas. The URL may hold a password: it is
// never shown whole, in an error, a log or an answer. The package checks
// a URL without repeating it, shows it without its credentials, and takes
// its password out of errors. It imports the standard library only.
package dburl

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// IsURL reports whether target names a PostgreSQL database rather than a
// file.
func IsURL(target string) bool {
	t := strings.ToLower(target)
	return strings.HasPrefix(t, "postgres://") || strings.HasPrefix(t, "postgresql://")
}

// Check refuses what cannot be a PostgreSQL URL, without repeating it.
func Check(v string) error {
	if !IsURL(v) {
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

// parse parses a database URL, refusing one whose fragment holds an
// @: that is the rest of a password holding # and @ unescaped, and what
// parsed as its host is a piece of the password.
func parse(v string) (*url.URL, error) {
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

// Shown is a database URL fit to show (see ShownURL); one that does not
// parse shows its scheme and host only.
func Shown(v string) string {
	u, err := parse(v)
	if err != nil {
		return strings.SplitN(v, "://", 2)[0] + "://" + hostPart(v) + "/…"
	}
	return ShownURL(u)
}

// ShownURL is u as errors, logs and doctor show it: its scheme, host and
// path. Its user, password, query and fragment are left out: each may
// carry a credential (a key in the user part, a password in the query).
func ShownURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// Addr is the host:port a database URL connects to, for saying what
// could not be reached.
func Addr(v string) string {
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

// Secrets are the passwords a database URL holds, in every spelling an
// error from the driver might repeat.
func Secrets(v string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 {
			out = append(out, s, url.QueryEscape(s), url.PathEscape(s))
		}
	}
	if u, err := parse(v); err == nil {
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

// Redact takes every one of secrets out of err's text, and puts it on one
// line (the driver tells of each address it tried on a line of its own).
func Redact(err error, secrets []string) error {
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
