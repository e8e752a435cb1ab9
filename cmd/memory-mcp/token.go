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
	"text/tabwriter"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/token"
)

const tokenUsage = `Usage:
  memory-mcp token create --tenant T --user U [--profile P] [--admin] [--name N] [--json]
                        print a new bearer token, once, alone on a line
  memory-mcp token list [--json]
                        id, name, tenant, user, profile, created and last used of each token
  memory-mcp token revoke [--json] ID|TOKEN
                        revoke a token; its next request is refused
`

// tokenCmd manages the bearer tokens of a team server.
func tokenCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return errors.New("token: want create, list or revoke")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tokenUsage); fs.PrintDefaults() }
	switch sub {
	case "create":
		var nt token.Spec
		fs.StringVar(&nt.Tenant, "tenant", "", "the team")
		fs.StringVar(&nt.User, "user", "", "the user, within the team")
		fs.StringVar(&nt.Profile, "profile", memory.DefaultProfile, "the user's profile, whose project memory is its own")
		fs.BoolVar(&nt.Admin, "admin", false, "may write system memory, which every token reads")
		fs.StringVar(&nt.Name, "name", "", "a note saying what the token is for")
		asJSON := fs.Bool("json", false, "print the token and its row as JSON")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			fs.Usage()
			return fmt.Errorf("token create: unexpected %q", clipSecret(fs.Arg(0)))
		}
		if nt.Tenant == "" || nt.User == "" {
			fs.Usage()
			return errors.New("token create: --tenant and --user are required")
		}
		return withApp(ctx, getenv, stderr, func(a *app, _ *slog.Logger) error {
			secret, tok, err := token.Of(a.Store).Create(ctx, nt)
			if err != nil {
				return fmt.Errorf("token create: %w", err)
			}
			if *asJSON {
				return printJSON(stdout, struct {
					Token   string    `json:"token"`
					ID      string    `json:"id"`
					Name    string    `json:"name,omitempty"`
					Tenant  string    `json:"tenant"`
					User    string    `json:"user"`
					Profile string    `json:"profile"`
					Admin   bool      `json:"admin"`
					Created time.Time `json:"created_at"`
				}{secret, tok.ID, tok.Name, tok.Tenant, tok.User, tok.Profile, tok.Admin, tok.CreatedAt})
			}
			fmt.Fprintf(stderr, "created %s for tenant %s, user %s, profile %s%s; it is shown only this once:\n",
				tok.ID, tok.Tenant, tok.User, tok.Profile, map[bool]string{true: " (admin)"}[tok.Admin])
			_, err = fmt.Fprintln(stdout, secret)
			return err
		})
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return withApp(ctx, getenv, stderr, func(a *app, _ *slog.Logger) error {
			toks, err := token.Of(a.Store).List(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				if toks == nil {
					toks = []memory.Token{}
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(toks)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tTENANT\tUSER\tPROFILE\tADMIN\tCREATED\tLAST USED")
			for _, t := range toks {
				last := "never"
				if t.LastUsedAt != nil {
					last = t.LastUsedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", t.ID, t.Name, t.Tenant, t.User, t.Profile, t.Admin, t.CreatedAt.Format(time.RFC3339), last)
			}
			return tw.Flush()
		})
	case "revoke":
		asJSON := fs.Bool("json", false, "print the revoked token's row as JSON")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			fs.Usage()
			return errors.New("token revoke: want one token id or token")
		}
		return withApp(ctx, getenv, stderr, func(a *app, _ *slog.Logger) error {
			tok, err := token.Of(a.Store).Revoke(ctx, fs.Arg(0))
			if errors.Is(err, memory.ErrNotFound) {
				return errors.New("token revoke: no such token")
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, tok)
			}
			_, err = fmt.Fprintf(stdout, "revoked %s (tenant %s, user %s, profile %s)\n", tok.ID, tok.Tenant, tok.User, tok.Profile)
			return err
		})
	case "help", "--help", "-h":
		fmt.Fprint(stdout, tokenUsage)
		return nil
	}
	fmt.Fprint(stderr, tokenUsage)
	return fmt.Errorf("token: unknown command %q", clipSecret(sub))
}

// clipSecret is an argument fit for an error message: a token typed in the
// wrong place is not repeated.
func clipSecret(s string) string {
	if strings.HasPrefix(s, memory.TokenPrefix) {
		return memory.TokenPrefix + "…"
	}
	return schema.Clip(s)
}

func runToken(c *cli, args []string) error {
	if wantsHelp(args) {
		fmt.Fprint(c.stdout, tokenUsage)
		return errHelp
	}
	return tokenCmd(c.ctx, args, defaulting(c.getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn"), c.stdout, c.stderr)
}
