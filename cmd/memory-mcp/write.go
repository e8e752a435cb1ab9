package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
)

// maxStdinBody is the most runWrite reads of a body on stdin: past the
// store's limit, so that the store refuses an oversized body as it does a
// tool's, and bounded, so that a stream without end cannot fill memory.
const maxStdinBody = 4 * memory.MaxBodyBytes

// tagList is a flag that may be given several times.
type tagList []string

func (t *tagList) String() string     { return strings.Join(*t, ",") }
func (t *tagList) Set(v string) error { *t = append(*t, v); return nil }

// runWrite stores one memory through the memory_write tool's own handler:
// the same checks, secrets refused by rule and field, and the markdown
// file written for a project fact or procedure.
func runWrite(c *cli, args []string) error {
	f := newFlags(c, "write").withJSON()
	typ := f.String("type", "semantic", "working, episodic, semantic or procedural")
	sc := f.String("scope", "project", "project, workspace, tenant or system")
	desc := f.String("description", "", "one line saying what it is")
	var tags tagList
	f.Var(&tags, "tag", "a tag; give it again for more")
	conf := f.String("confidence", "", "how sure, 0 to 1 (default 0.5)")
	ttlFlag := f.String("ttl", "", "forget it after this long, like 24h or 720h (default: the type's)")
	body := f.String("body", "", "the body (default: read from stdin)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	in := server.WriteIn{Type: *typ, Scope: *sc, Key: pos[0], Description: *desc, Tags: tags}
	if *conf != "" {
		v, err := strconv.ParseFloat(*conf, 64)
		if err != nil {
			return fmt.Errorf("write: --confidence wants a number from 0 to 1")
		}
		in.Confidence = &v
	}
	if *ttlFlag != "" {
		d, err := time.ParseDuration(*ttlFlag)
		if err != nil || d < time.Second {
			return fmt.Errorf("write: --ttl wants a duration of at least 1s, like 24h or 90m")
		}
		sec := int64(d / time.Second)
		in.TTLSeconds = &sec
	}
	given := false
	f.FlagSet.Visit(func(fl *flag.Flag) { given = given || fl.Name == "body" })
	in.Body = *body
	if !given {
		if progress.IsTerminal(c.stdin) {
			fmt.Fprintln(c.stderr, "reading the body from stdin; end it with Ctrl-D")
		}
		data, err := io.ReadAll(io.LimitReader(c.stdin, maxStdinBody+1))
		if err != nil {
			return fmt.Errorf("write: read the body: %w", err)
		}
		if len(data) > maxStdinBody {
			return memory.Errorf(memory.CodeTooLarge, "body", "is over %d bytes; the limit is %d (64 KiB)", maxStdinBody, memory.MaxBodyBytes)
		}
		in.Body = string(data)
	}
	if strings.TrimSpace(in.Body) == "" {
		return errors.New("write: the body is empty; give it on stdin or with --body")
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		_, out, err := srv.Write(c.ctx, in)
		if err != nil {
			return err
		}
		printProblems(c.stderr, out.Problems)
		if f.JSON() {
			return printJSON(c.stdout, out)
		}
		r := out.Record
		verb := "updated"
		if out.Created {
			verb = "stored"
		}
		fmt.Fprintf(c.stdout, "%s %s %s %q (id %s)\n", verb, r.Scope, r.Type, r.Key, r.ID)
		if a.Dir != nil {
			file := filepath.Join(a.Dir.Path(), r.Key+".md")
			if _, err := os.Lstat(file); err == nil && r.Scope == "project" && (r.Type == "semantic" || r.Type == "procedural") {
				fmt.Fprintf(c.stdout, "file %s\n", file)
			}
		}
		return nil
	})
}
