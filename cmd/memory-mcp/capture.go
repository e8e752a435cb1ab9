package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory/transcript"
	"prom.codes/memory-mcp/scope"
)

// captureCLI reads a memory_capture payload, or a Claude Code hook payload
// whose transcript it distils, from stdin, and records it in the project
// the session ran in: the payload's cwd, else CLAUDE_PROJECT_DIR, else the
// workspace this process is in. A transcript with nothing in it records
// nothing.
func captureCLI(ctx context.Context, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, asJSON bool) error {
	data, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("capture: read stdin: %w", err)
	}
	in, dir, err := transcript.Parse(data)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if transcript.Empty(in) {
		if asJSON {
			return printJSON(stdout, map[string]any{"captured": false, "reason": "the session holds no conversation"})
		}
		_, err := io.WriteString(stdout, "Nothing to capture: the session holds no conversation.\n")
		return err
	}
	if dir == "" {
		dir = getenv("CLAUDE_PROJECT_DIR")
	}
	if dir != "" {
		root, err := sessionRoot(dir, getenv("PROMETHEUS_WORKSPACE_ROOT"))
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		// Set as the workspace root, so that where this process runs
		// plays no part, even a directory removed since.
		env := getenv
		getenv = func(k string) string {
			if k == "PROMETHEUS_WORKSPACE_ROOT" {
				return root
			}
			return env(k)
		}
	}
	return withApp(ctx, getenv, stderr, func(a *app, _ *slog.Logger) error {
		if _, err := a.Sync(ctx); err != nil {
			return err
		}
		res, err := a.Capture(ctx, in)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if asJSON {
			return printJSON(stdout, server.CaptureView(res))
		}
		_, err = io.WriteString(stdout, server.CaptureText(server.CaptureView(res)))
		return err
	})
}

// sessionRoot is the workspace root of a session that ran in dir: the git
// top-level above it, as a server started there would find. A root set
// explicitly still wins for sessions inside it.
func sessionRoot(dir, explicit string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("session directory %q is not an absolute path", dir)
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("session directory: %w", err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("session directory %s is not a directory", dir)
	}
	root, err := scope.Root("", dir)
	if err != nil {
		return "", err
	}
	if explicit != "" {
		if top, err := scope.Root(explicit, ""); err == nil {
			real := dir
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				real = r
			}
			if rel, err := filepath.Rel(top, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return top, nil
			}
		}
	}
	return root, nil
}

func runCapture(c *cli, args []string) error {
	f := newFlags(c, "capture").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return captureCLI(c.ctx, defaulting(c.getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn"), c.stdin, c.stdout, c.stderr, f.JSON())
}
