package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDBFlag(t *testing.T) {
	for _, c := range []struct {
		args     []string
		db       string
		rest     []string
		hasError bool
	}{
		{args: []string{"list"}, rest: []string{"list"}},
		{args: []string{"--db", "x.db", "list"}, db: "x.db", rest: []string{"list"}},
		{args: []string{"serve", "--http", ":0", "--db=postgres://h/d"}, db: "postgres://h/d", rest: []string{"serve", "--http", ":0"}},
		{args: []string{"-db", "a", "token", "list", "-db=b"}, db: "b", rest: []string{"token", "list"}},
		{args: []string{"search", "--", "--db", "x"}, rest: []string{"search", "--", "--db", "x"}},
		{args: []string{"list", "--db"}, hasError: true},
		{args: []string{"list", "--db="}, hasError: true},
		{args: []string{"--dbx", "y"}, rest: []string{"--dbx", "y"}},
		// The value of another flag, however it reads, is that flag's.
		{args: []string{"write", "--key", "k", "--body", "--db=x.db", "--type", "semantic"}, rest: []string{"write", "--key", "k", "--body", "--db=x.db", "--type", "semantic"}},
		{args: []string{"search", "--tag", "--db", "q"}, rest: []string{"search", "--tag", "--db", "q"}},
		{args: []string{"export", "--all-projects", "--db", "x.db"}, db: "x.db", rest: []string{"export", "--all-projects"}},
		{args: []string{"list", "--json=true", "--db", "x.db"}, db: "x.db", rest: []string{"list", "--json=true"}},
	} {
		db, rest, err := dbFlag(c.args)
		if (err != nil) != c.hasError {
			t.Errorf("%q: error %v", c.args, err)
			continue
		}
		if db != c.db || (err == nil && !cmp.Equal(rest, c.rest)) {
			t.Errorf("%q: db %q rest %q, want %q %q", c.args, db, rest, c.db, c.rest)
		}
	}
}

func TestConfigDatabase(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	load := func(vars map[string]string) (Config, error) {
		vars["PROMETHEUS_WORKSPACE_ROOT"] = t.TempDir()
		return loadConfig(func(k string) string { return vars[k] })
	}
	// The URL wins over the file; the flag over both.
	url := "postgres://memory:" + pw + "@db.example.com/memory?sslmode=require"
	c, err := load(map[string]string{"PROMETHEUS_MEMORY_DB_URL": url, "PROMETHEUS_MEMORY_DB_PATH": "/tmp/x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Postgres() || c.DB() != url || c.DBPath != "" {
		t.Errorf("with a URL: %+v", c)
	}
	if got, want := c.DBName(), "postgres://db.example.com/memory"; got != want {
		t.Errorf("shown as %q, want %q", got, want)
	}
	env := map[string]string{"PROMETHEUS_MEMORY_DB_URL": url}
	getenv := withDB(func(k string) string { return env[k] }, "/tmp/flag.db")
	env["PROMETHEUS_WORKSPACE_ROOT"] = t.TempDir()
	if c, err := loadConfig(getenv); err != nil || c.Postgres() || c.DB() != "/tmp/flag.db" {
		t.Errorf("--db FILE over the URL: %+v %v", c, err)
	}
	getenv = withDB(func(k string) string {
		return map[string]string{"PROMETHEUS_MEMORY_DB_PATH": "/tmp/x.db", "PROMETHEUS_WORKSPACE_ROOT": env["PROMETHEUS_WORKSPACE_ROOT"]}[k]
	}, url)
	if c, err := loadConfig(getenv); err != nil || c.DB() != url {
		t.Errorf("--db URL over the file: %+v %v", c, err)
	}

	// Bad values are refused without being repeated.
	for _, bad := range []map[string]string{
		{"PROMETHEUS_MEMORY_DB_URL": "mysql://root:" + pw + "@h/d"},
		{"PROMETHEUS_MEMORY_DB_URL": "postgres://u:" + pw + "@h:notaport/d"},
		{"PROMETHEUS_MEMORY_DB_URL": "host=h password=" + pw},
		{"PROMETHEUS_MEMORY_DB_PATH": "postgres://u:" + pw + "@h/d"},
	} {
		_, err := load(bad)
		if err == nil {
			t.Errorf("%v accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
