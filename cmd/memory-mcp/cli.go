package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
)

// cli is one run of a command: its environment and streams.
type cli struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand. Adding a command is adding a row to commands.
type command struct {
	name    string
	args    string // the usage line after the name
	summary string
	run     func(c *cli, args []string) error
}

// commands are listed in the usage in this order.
var commands []command

func init() {
	commands = []command{
		{"serve", "[--http ADDR [--tls-cert F --tls-key F] [--root DIR --tenant T]]", "serve MCP on stdin/stdout (the default), or a team over HTTP", runServe},
		{"token", "create|list|revoke", "manage the team server's bearer tokens", runToken},
		{"read", "[--query Q] [--max-tokens N] [--json]", "print the woven recall block (session-start hook)", runRead},
		{"capture", "[--json]", "record a session from a payload on stdin (session-end hook)", runCapture},
		{"list", "[--type T] [--scope S] [--tag X] [--limit N] [--json]", "list the memories this project sees", runList},
		{"search", "QUERY [--type T] [--scope S] [--limit N] [--mode M] [--json]", "search memories by keyword, or by meaning with embeddings", runSearch},
		{"show", "KEY [--type T] [--scope S] | --id ID [--json]", "print one memory in full", runShow},
		{"write", "KEY [--type T] [--scope S] [--description D] [--tag T]... [--confidence C] [--ttl DURATION] [--body B] [--json]", "store a memory, its body from stdin or --body", runWrite},
		{"rm", "KEY [--type T] [--scope S] | --id ID [--json]", "delete a memory (and its markdown file)", runRm},
		{"export", "[--out FILE] [--all-projects] [--json]", "write memories as JSON lines (with --out and --json, a JSON summary on stdout)", runExport},
		{"import", "FILE [--format memory-mcp|server-memory] [--keep-projects] [--dry-run] [--json]", "read memories from JSON lines", runImport},
		{"backup", "FILE [--json]", "copy the database consistently, even while servers write", runBackup},
		{"restore", "FILE [--json]", "replace the database with a checked backup, keeping the old one", runRestore},
		{"embed", "[--prune] [--json]", "embed every record still waiting, with the configured embeddings model", runEmbed},
		{"doctor", "[--json]", "check the database, project, mirror, agent configs and embeddings", runDoctor},
		{"stats", "[--json]", "count memories by scope and type; database size and age", runStats},
		{"projects", "[--json] | move OLD_ROOT NEW_ROOT", "list projects, or carry one to a new root", runProjects},
		{"setup", "claude-code|cursor|vscode|codex [--no-hooks] [--json]", "write an agent's MCP config into this project", runSetup},
		{"sync", "[status | restore ID | clear] [--json]", "sync with the team server: push, then pull; or show the state, restore a lost version, forget what was set aside", runSync},
		{"team", "join URL | leave", "join a team server (the token on stdin), or stop syncing", runTeam},
		{"version", "[--json]", "print the version and revision", runVersion},
		{"help", "", "print this help", func(c *cli, _ []string) error { fmt.Fprint(c.stdout, usage()); return nil }},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage() string {
	var b strings.Builder
	b.WriteString("memory-mcp: memory for coding agents, served over MCP on stdio.\n\nUsage:\n")
	for _, c := range commands {
		line := "  memory-mcp " + c.name
		if c.args != "" {
			line += " " + c.args
		}
		fmt.Fprintf(&b, "%s\n      %s\n", line, c.summary)
	}
	b.WriteString(`
Every command takes --help. Output is for people; --json gives JSON for scripts.
Every command takes --db FILE|URL: the SQLite file, or a postgres:// URL, to
work on instead of the environment's.

Environment:
  PROMETHEUS_MEMORY_DB_PATH        database file (default ~/.prometheus/memory.db)
  PROMETHEUS_MEMORY_DB_URL         postgres://USER:PASSWORD@HOST:PORT/DATABASE: use PostgreSQL
                                   instead of the file (a team server's replicas share it)
  PROMETHEUS_WORKSPACE_ROOT        workspace root (default: git top-level, else working directory)
  PROMETHEUS_MEMORY_TOKEN_BUDGET   recall budget in tokens (default 1500)
  PROMETHEUS_MEMORY_CONFIRMATIONS  sessions confirming a statement before it becomes a fact (default 2)
  PROMETHEUS_MEMORY_EMBEDDINGS_URL   OpenAI-compatible embeddings API for semantic search;
                                     unset, nothing is sent anywhere (e.g. http://localhost:11434/v1)
  PROMETHEUS_MEMORY_EMBEDDINGS_MODEL the embeddings model, like nomic-embed-text
  PROMETHEUS_MEMORY_EMBEDDINGS_KEY   its API key, sent as a bearer token (optional)
  PROMETHEUS_MEMORY_TEAM_URL, _TOKEN  the team server to sync with (else what team join stored)
  PROMETHEUS_MEMORY_SYNC_INTERVAL  how often the stdio server syncs (default 30s; 0: off)
  PROMETHEUS_MEMORY_LOG_LEVEL      debug, info, warn or error (default info for serve, warn for
                                   the other commands); logs go to stderr
`)
	return b.String()
}

// flags is a command's flag set. Its usage goes to stdout for --help and
// to stderr for a mistake.
type flags struct {
	*flag.FlagSet
	cmd  command
	json *bool
	c    *cli
}

func newFlags(c *cli, name string) *flags {
	cmd, _ := lookup(name)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{FlagSet: fs, cmd: cmd, c: c}
}

// withJSON adds --json.
func (f *flags) withJSON() *flags {
	f.json = f.Bool("json", false, "print JSON for scripts")
	return f
}

func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: memory-mcp %s %s\n\n%s.\n", f.cmd.name, f.cmd.args, upperFirst(f.cmd.summary))
	if ex := examples[f.cmd.name]; ex != "" {
		fmt.Fprintf(w, "\nExample:\n%s", ex)
	}
	var any bool
	f.VisitAll(func(*flag.Flag) { any = true })
	if any {
		fmt.Fprintln(w, "\nFlags:")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// errHelp is returned by parse after printing help; the command then exits 0.
var errHelp = errors.New("help shown")

// parse parses flags anywhere among args and returns the positional
// arguments. It wants between min and max of them (max < 0: any number).
func (f *flags) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.usage(f.c.stdout)
				return nil, errHelp
			}
			f.usage(f.c.stderr)
			if memory.ScanKey("argument", err.Error()) != nil {
				// The flag package quotes what it refuses.
				return nil, fmt.Errorf("%s: a flag or its value is not valid; it is not shown, being shaped like a secret", f.cmd.name)
			}
			return nil, fmt.Errorf("%s: %w", f.cmd.name, err)
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		f.usage(f.c.stderr)
		switch {
		case len(pos) < min:
			return nil, fmt.Errorf("%s: missing argument (want %s)", f.cmd.name, f.cmd.args)
		default:
			return nil, fmt.Errorf("%s: unexpected argument %q", f.cmd.name, schema.Clip(pos[max]))
		}
	}
	return pos, nil
}

// JSON reports whether --json was given.
func (f *flags) JSON() bool { return f.json != nil && *f.json }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// app opens the app for a command; hooks and commands log only warnings
// unless asked.
func (c *cli) app(fn func(*app, *slog.Logger) error) error {
	return withApp(c.ctx, defaulting(c.getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn"), c.stderr, fn)
}

var examples = map[string]string{
	"read":     "  memory-mcp read --query \"database migrations\"\n",
	"capture":  "  echo '{\"session_id\":\"s1\",\"statements\":[\"tests run with make test\"]}' | memory-mcp capture\n",
	"list":     "  memory-mcp list --type semantic --tag go\n",
	"search":   "  memory-mcp search \"how do we run tests\"\n",
	"show":     "  memory-mcp show test-runner\n",
	"write":    "  echo 'Run make test; it sets up the fixtures.' | memory-mcp write test-runner --tag testing\n",
	"rm":       "  memory-mcp rm test-runner --type semantic\n",
	"export":   "  memory-mcp export --out memories.jsonl\n",
	"import":   "  memory-mcp import memories.jsonl\n  memory-mcp import memory.json --format server-memory --dry-run\n",
	"backup":   "  memory-mcp backup ~/memory-backup.db\n",
	"restore":  "  memory-mcp restore ~/memory-backup.db\n",
	"doctor":   "  memory-mcp doctor\n",
	"stats":    "  memory-mcp stats --json\n",
	"projects": "  memory-mcp projects\n  memory-mcp projects move ~/old/checkout ~/new/checkout\n",
	"setup":    "  memory-mcp setup claude-code\n",
	"version":  "  memory-mcp version\n",
}

func printProblems(w io.Writer, ps []server.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "memory-mcp: %s not accepted: %s\n", p.Path, p.Reason)
	}
}
