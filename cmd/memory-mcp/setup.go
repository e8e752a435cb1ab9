package main

import (
	"fmt"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/agent"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
)

// runSetup writes memory-mcp into an agent's MCP config in this project.
func runSetup(c *cli, args []string) error {
	f := newFlags(c, "setup").withJSON()
	noHooks := f.Bool("no-hooks", false, "for claude-code, leave out the SessionStart and SessionEnd hooks")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ag, ok := agent.Named(pos[0])
	if !ok {
		f.usage(c.stderr)
		return fmt.Errorf("setup: unknown agent %q (want claude-code, cursor, vscode or codex)", schema.Clip(pos[0]))
	}
	cfg, err := loadConfig(c.getenv)
	if err != nil {
		return err
	}
	cmd, err := agent.Self()
	if err != nil {
		return err
	}
	var changes []agent.Change
	ch, err := agent.SetupServer(cfg.Root, ag, cmd)
	if err != nil {
		return err
	}
	changes = append(changes, ch)
	if ag.Name == "claude-code" && !*noHooks {
		ch, err := agent.SetupHooks(cfg.Root, cmd)
		if err != nil {
			return err
		}
		changes = append(changes, ch)
	}
	if f.JSON() {
		return printJSON(c.stdout, changes)
	}
	added := false
	for _, ch := range changes {
		switch ch.Action {
		case "unchanged":
			fmt.Fprintf(c.stdout, "%s: already set up, left unchanged\n", ch.Path)
		default:
			added = true
			fmt.Fprintf(c.stdout, "%s: %s, added %s\n", ch.Path, ch.Action, strings.Join(ch.Added, ", "))
		}
	}
	if added {
		fmt.Fprintf(c.stdout, "the agent runs %s\n", cmd)
		if cmd != "memory-mcp" {
			fmt.Fprintln(c.stdout, "(memory-mcp is not on PATH, or is another binary there: the config names this one by its full path)")
		}
	}
	return nil
}
