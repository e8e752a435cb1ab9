package main

import (
	"fmt"
	"log/slog"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// selectFlags are the flags that pick one record.
func selectFlags(f *flags) (typ, sc, id *string) {
	return f.String("type", "", "the record's type, when the key names several"),
		f.String("scope", "", "this scope only, instead of the narrowest"),
		f.String("id", "", "the record's id, instead of a key")
}

func selection(name string, pos []string, typ, sc, id string) (server.SelectIn, error) {
	in := server.SelectIn{ID: id, Type: typ, Scope: sc}
	if len(pos) == 1 {
		in.Key = pos[0]
	}
	switch {
	case in.Key == "" && in.ID == "":
		return in, fmt.Errorf("%s: which record? give its KEY, or --id ID", name)
	case in.Key != "" && in.ID != "":
		return in, fmt.Errorf("%s: give a KEY or --id, not both", name)
	}
	return in, nil
}

func runShow(c *cli, args []string) error {
	f := newFlags(c, "show").withJSON()
	typ, sc, id := selectFlags(f)
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	in, err := selection("show", pos, *typ, *sc, *id)
	if err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		text, out, err := srv.Read(c.ctx, server.ReadIn{Key: in.Key, ID: in.ID, Type: in.Type, Scope: in.Scope})
		if err != nil {
			return err
		}
		if f.JSON() {
			return printJSON(c.stdout, out.Record)
		}
		printProblems(c.stderr, out.Problems)
		if i := strings.Index(text, "\n\nMarkdown files not accepted"); i >= 0 {
			text = text[:i]
		}
		_, err = fmt.Fprintln(c.stdout, text)
		return err
	})
}
