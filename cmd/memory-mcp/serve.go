package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory/teamsync"
)

// runServe serves MCP on stdin/stdout, or with flags a team over HTTP.
func runServe(c *cli, args []string) error {
	if len(args) > 0 && !wantsHelp(args) {
		return serveCmd(c.ctx, args, c.getenv, c.stderr)
	}
	if wantsHelp(args) {
		fmt.Fprint(c.stdout, "Usage: memory-mcp serve\n\nServes MCP on stdin/stdout, as an agent launches it.\n\n")
		serveFlags(&httpOptions{}, c.stdout).Usage()
		return errHelp
	}
	f := newFlags(c, "serve")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if progress.IsTerminal(c.stdin) {
		fmt.Fprint(c.stderr, `memory-mcp is an MCP server and is waiting for an agent on stdin/stdout.
An agent launches it for you: run "memory-mcp setup claude-code" (or cursor,
vscode, codex) in your project. To look at memory yourself, try
"memory-mcp list", "memory-mcp search QUERY" or "memory-mcp help".
Press Ctrl-C to stop.
`)
	}
	return withApp(c.ctx, c.getenv, c.stderr, func(a *app, log *slog.Logger) error {
		stop, err := teamsync.Start(a.Store, c.getenv, log)
		if err != nil {
			log.Warn("team sync is off", "err", err)
		}
		defer stop()
		return server.ServeStdio(c.ctx, a.App, log, c.stdin, c.stdout)
	})
}

// httpOptions are serve --http's flags.
type httpOptions struct {
	addr, certFile, keyFile string
	root, tenant            string        // with a root, the one repository served, to the one tenant
	rate                    float64       // requests per second per token
	timeout                 time.Duration // to read a request's header, and then its body
	allowed                 []string      // host names besides the listen address's and loopback
}

const serveUsage = `Usage: memory-mcp serve --http ADDR [--tls-cert FILE --tls-key FILE] [--rate N] [--timeout D]
                        [--root DIR --tenant T] [--allowed-host NAME]...

Serves MCP over Streamable HTTP at http://ADDR/mcp to callers bearing a token
made with "memory-mcp token create"; GET /healthz answers 200 while the
database does. SIGTERM or Ctrl-C finishes the requests in flight and exits.

Each token's profile has its own project memory, and no markdown mirror.
With --root DIR --tenant T the server serves the one repository checked out
at DIR to team T instead: project memory is the repository's, shared by
every token of T and mirrored to DIR/.prometheus/memories as on stdio, and
tokens of any other tenant are refused.

The store is the SQLite file, or PostgreSQL with PROMETHEUS_MEMORY_DB_URL (or
--db) set to a postgres:// URL: then several replicas may serve one database,
behind a load balancer that keeps each session (its Mcp-Session-Id) on one
replica (clients of MCP 2026-07-28 keep no session: any replica serves
them). /healthz answers 503 while the database does not.

A request must name the server by a loopback name, its address, the host
of --http, or an --allowed-host (or PROMETHEUS_MEMORY_ALLOWED_HOSTS, split
at commas) in its Host header, and in its Origin header if it has one:
behind a proxy, allow the name clients reach it by. Others get 403.
`

// serveFlags is serve's flag set, filling o; its usage goes to w.
func serveFlags(o *httpOptions, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { fmt.Fprint(w, serveUsage, "\nFlags:\n"); fs.PrintDefaults() }
	fs.StringVar(&o.addr, "http", "", "serve MCP over HTTP on this address (host:port)")
	fs.StringVar(&o.certFile, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, serve HTTPS")
	fs.StringVar(&o.keyFile, "tls-key", "", "TLS private key file (PEM)")
	fs.Float64Var(&o.rate, "rate", 20, "requests per second allowed to each token, in bursts of up to 5 seconds' worth")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long a client may take to send a request's header, and then its body")
	fs.StringVar(&o.root, "root", "", "serve this repository's project memory, with its markdown mirror (needs --tenant)")
	fs.StringVar(&o.tenant, "tenant", "", "accept only tokens of this tenant")
	fs.Func("allowed-host", "a host name clients may reach the server by, as through a proxy (repeatable)", func(s string) error {
		o.allowed = append(o.allowed, s)
		return nil
	})
	return fs
}

// serveCmd is "serve" with flags: today only --http.
func serveCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var o httpOptions
	fs := serveFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.addr == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("serve: want --http ADDR")
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if o.rate <= 0 || o.timeout <= 0 {
		return errors.New("serve: --rate and --timeout must be positive")
	}
	o.allowed = append(o.allowed, getenv("PROMETHEUS_MEMORY_ALLOWED_HOSTS"))
	if o.root != "" {
		// One repository's memory shared by every tenant would let each
		// see the others': a root is served to one team only.
		if o.tenant == "" {
			return errors.New("serve: --root needs --tenant, the one team whose tokens share the repository's memory")
		}
		fi, err := os.Stat(o.root)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("serve: --root %s is not a directory", o.root)
		}
		abs, err := filepath.Abs(o.root)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		env := getenv
		getenv = func(k string) string {
			if k == "PROMETHEUS_WORKSPACE_ROOT" {
				return abs
			}
			return env(k)
		}
	}
	return withApp(ctx, getenv, stderr, func(a *app, log *slog.Logger) error {
		return server.ServeHTTP(ctx, a.App, log, server.HTTPOptions{
			Addr: o.addr, CertFile: o.certFile, KeyFile: o.keyFile, Tenant: o.tenant, Repo: o.root != "",
			Rate: o.rate, Timeout: o.timeout, AllowedHosts: o.allowed,
		})
	})
}
