package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// serverName is the name memory-mcp takes in an agent's MCP config.
const serverName = "memory"

// agent is where one coding agent keeps its project MCP config.
type agent struct {
	name string
	file string // relative to the project root
	kind string // "json" or "toml"
	key  string // the JSON object holding servers
	// entry is the server entry written for memory-mcp, run as command.
	entry func(command string) map[string]any
}

// workspaceEnv points the server at the editor's open folder: Cursor and
// VS Code may start it elsewhere, and memories would land in the project
// of wherever that is.
var workspaceEnv = map[string]any{"PROMETHEUS_WORKSPACE_ROOT": "${workspaceFolder}"}

var agents = []agent{
	{name: "claude-code", file: ".mcp.json", kind: "json", key: "mcpServers",
		entry: func(cmd string) map[string]any {
			return map[string]any{"type": "stdio", "command": cmd, "args": []any{}}
		}},
	{name: "cursor", file: filepath.Join(".cursor", "mcp.json"), kind: "json", key: "mcpServers",
		entry: func(cmd string) map[string]any {
			return map[string]any{"command": cmd, "args": []any{}, "env": workspaceEnv}
		}},
	{name: "vscode", file: filepath.Join(".vscode", "mcp.json"), kind: "json", key: "servers",
		entry: func(cmd string) map[string]any {
			return map[string]any{"type": "stdio", "command": cmd, "args": []any{}, "env": workspaceEnv}
		}},
	{name: "codex", file: filepath.Join(".codex", "config.toml"), kind: "toml"},
}

// claudeSettings holds Claude Code's project hooks.
var claudeSettings = filepath.Join(".claude", "settings.json")

// hooks are the Claude Code hooks setup adds: event and subcommand.
var hooks = [][2]string{{"SessionStart", "read"}, {"SessionEnd", "capture"}}

// selfCommand is the command an agent is to run: "memory-mcp" when that
// name on PATH is this very binary, else this binary's absolute path, so
// that the config runs what setup ran, wherever it was built.
func selfCommand() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("setup: find this binary: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	if found, err := exec.LookPath("memory-mcp"); err == nil {
		a, errA := os.Stat(found)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "memory-mcp", nil
		}
	}
	return exe, nil
}

// shellWord is s as one word of a shell command line: a hook's command is
// run by the shell.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func agentNamed(name string) (agent, bool) {
	for _, a := range agents {
		if a.name == name {
			return a, true
		}
	}
	return agent{}, false
}

// change is what setup did to one file.
type change struct {
	Path   string   `json:"path"`
	Action string   `json:"action"` // created, updated or unchanged
	Added  []string `json:"added"`
	// Command is what the entries added run; empty when nothing was added.
	Command string `json:"command,omitempty"`
}

func runSetup(c *cli, args []string) error {
	f := newFlags(c, "setup").withJSON()
	noHooks := f.Bool("no-hooks", false, "for claude-code, leave out the SessionStart and SessionEnd hooks")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ag, ok := agentNamed(pos[0])
	if !ok {
		f.usage(c.stderr)
		return fmt.Errorf("setup: unknown agent %q (want claude-code, cursor, vscode or codex)", server.ClipArg(pos[0]))
	}
	cfg, err := loadConfig(c.getenv)
	if err != nil {
		return err
	}
	cmd, err := selfCommand()
	if err != nil {
		return err
	}
	var changes []change
	ch, err := setupServer(cfg.Root, ag, cmd)
	if err != nil {
		return err
	}
	changes = append(changes, ch)
	if ag.name == "claude-code" && !*noHooks {
		ch, err := setupHooks(cfg.Root, cmd)
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

// setupServer adds memory-mcp to ag's config under root, keeping every
// other setting, and leaving an existing memory entry as the user made it.
func setupServer(root string, ag agent, cmd string) (change, error) {
	path := filepath.Join(root, ag.file)
	if ag.kind == "toml" {
		return setupTOML(path, cmd)
	}
	doc, existed, err := readJSONObject(path)
	if err != nil {
		return change{}, err
	}
	ch := change{Path: path, Action: "unchanged", Added: []string{}}
	servers, ok := doc[ag.key].(map[string]any)
	if doc[ag.key] != nil && !ok {
		return ch, fmt.Errorf("setup: %s: %q is not an object; fix the file by hand", path, ag.key)
	}
	if servers == nil {
		servers = map[string]any{}
		doc[ag.key] = servers
	}
	if _, ok := servers[serverName]; ok {
		return ch, nil
	}
	servers[serverName] = ag.entry(cmd)
	ch.Added = append(ch.Added, ag.key+"."+serverName)
	ch.Command = cmd
	return ch, writeJSON(path, doc, existed, &ch)
}

func setupHooks(root, cmd string) (change, error) {
	path := filepath.Join(root, claudeSettings)
	doc, existed, err := readJSONObject(path)
	if err != nil {
		return change{}, err
	}
	ch := change{Path: path, Action: "unchanged", Added: []string{}}
	hs, ok := doc["hooks"].(map[string]any)
	if doc["hooks"] != nil && !ok {
		return ch, fmt.Errorf("setup: %s: \"hooks\" is not an object; fix the file by hand", path)
	}
	if hs == nil {
		hs = map[string]any{}
	}
	for _, h := range hooks {
		groups, ok := hs[h[0]].([]any)
		if hs[h[0]] != nil && !ok {
			return ch, fmt.Errorf("setup: %s: hooks.%s is not a list; fix the file by hand", path, h[0])
		}
		if _, ok := hookCommand(groups, h[1]); ok {
			continue
		}
		line := shellWord(cmd) + " " + h[1]
		hs[h[0]] = append(groups, map[string]any{"hooks": []any{map[string]any{"type": "command", "command": line}}})
		ch.Added = append(ch.Added, "hooks."+h[0]+" ("+line+")")
		ch.Command = cmd
	}
	if len(ch.Added) == 0 {
		return ch, nil
	}
	doc["hooks"] = hs
	return ch, writeJSON(path, doc, existed, &ch)
}

// hookCommand finds a hook in groups that runs memory-mcp's subcommand sub
// (with any arguments after it) and returns the program it names.
func hookCommand(groups []any, sub string) (string, bool) {
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		list, _ := gm["hooks"].([]any)
		for _, h := range list {
			hm, _ := h.(map[string]any)
			line, _ := hm["command"].(string)
			words := shellWords(line)
			if len(words) >= 2 && filepath.Base(words[0]) == "memory-mcp" && words[1] == sub {
				return words[0], true
			}
		}
	}
	return "", false
}

// shellWords splits a command line into words as far as a hook needs:
// blanks separate, single quotes and backslashes quote.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			w.WriteByte(ch)
		case ch == '\'':
			quoted, in = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			in = true
		case ch == ' ' || ch == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

func readJSONObject(path string) (map[string]any, bool, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]any{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("setup: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, true, nil
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, true, fmt.Errorf("setup: %s is not a JSON object (%s); fix it or move it aside, nothing was changed", path, jsonReason(err))
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, true, nil
}

func writeJSON(path string, doc map[string]any, existed bool, ch *change) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	ch.Action = "updated"
	if !existed {
		ch.Action = "created"
	}
	return writeAtomic(path, buf.Bytes())
}

// writeAtomic replaces path with data through a temporary file beside it,
// keeping an existing file's mode.
func writeAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("setup: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("setup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// tomlTable finds a [mcp_servers.memory] table header, however quoted.
var tomlTable = regexp.MustCompile(`(?m)^\s*\[\s*mcp_servers\s*\.\s*("memory"|'memory'|memory)\s*\]`)

// tomlEntry is the memory server's table, running cmd.
func tomlEntry(cmd string) string {
	q := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(cmd)
	return "[mcp_servers.memory]\ncommand = \"" + q + "\"\nargs = []\n"
}

// setupTOML appends the memory server's table to a Codex config unless
// one is there; the rest of the file is kept byte for byte.
func setupTOML(path, cmd string) (change, error) {
	ch := change{Path: path, Action: "unchanged", Added: []string{}}
	data, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !os.IsNotExist(err) {
		return ch, fmt.Errorf("setup: %w", err)
	}
	if tomlTable.Match(data) {
		return ch, nil
	}
	out := append([]byte{}, data...)
	if len(out) > 0 {
		if out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, '\n')
	}
	out = append(out, tomlEntry(cmd)...)
	ch.Added = append(ch.Added, "[mcp_servers.memory]")
	ch.Command = cmd
	ch.Action = "updated"
	if !existed {
		ch.Action = "created"
	}
	return ch, writeAtomic(path, out)
}
