package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// serverName is the name memory-mcp takes in an agent's MCP config.
const serverName = "memory"

// agent is where one coding agent keeps its project MCP config.
type agent struct {
	name string
	file string // relative to the project root
	kind string // "json" or "toml"
	key  string // the JSON object holding servers
	// entry is the server entry written for memory-mcp.
	entry map[string]any
}

var agents = []agent{
	{name: "claude-code", file: ".mcp.json", kind: "json", key: "mcpServers",
		entry: map[string]any{"type": "stdio", "command": "memory-mcp", "args": []any{}}},
	{name: "cursor", file: filepath.Join(".cursor", "mcp.json"), kind: "json", key: "mcpServers",
		entry: map[string]any{"command": "memory-mcp", "args": []any{}}},
	{name: "vscode", file: filepath.Join(".vscode", "mcp.json"), kind: "json", key: "servers",
		entry: map[string]any{"type": "stdio", "command": "memory-mcp", "args": []any{}}},
	{name: "codex", file: filepath.Join(".codex", "config.toml"), kind: "toml"},
}

// claudeSettings holds Claude Code's project hooks.
var claudeSettings = filepath.Join(".claude", "settings.json")

// hooks are the Claude Code hooks setup adds: event and command.
var hooks = [][2]string{{"SessionStart", "memory-mcp read"}, {"SessionEnd", "memory-mcp capture"}}

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
		return fmt.Errorf("setup: unknown agent %q (want claude-code, cursor, vscode or codex)", clipArg(pos[0]))
	}
	cfg, err := loadConfig(c.getenv)
	if err != nil {
		return err
	}
	var changes []change
	ch, err := setupServer(cfg.Root, ag)
	if err != nil {
		return err
	}
	changes = append(changes, ch)
	if ag.name == "claude-code" && !*noHooks {
		ch, err := setupHooks(cfg.Root)
		if err != nil {
			return err
		}
		changes = append(changes, ch)
	}
	if f.JSON() {
		return printJSON(c.stdout, changes)
	}
	for _, ch := range changes {
		switch ch.Action {
		case "unchanged":
			fmt.Fprintf(c.stdout, "%s: already set up, left unchanged\n", ch.Path)
		default:
			fmt.Fprintf(c.stdout, "%s: %s, added %s\n", ch.Path, ch.Action, strings.Join(ch.Added, ", "))
		}
	}
	return nil
}

// setupServer adds memory-mcp to ag's config under root, keeping every
// other setting, and leaving an existing memory entry as the user made it.
func setupServer(root string, ag agent) (change, error) {
	path := filepath.Join(root, ag.file)
	if ag.kind == "toml" {
		return setupTOML(path)
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
	servers[serverName] = ag.entry
	ch.Added = append(ch.Added, ag.key+"."+serverName)
	return ch, writeJSON(path, doc, existed, &ch)
}

func setupHooks(root string) (change, error) {
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
		if hasHook(groups, h[1]) {
			continue
		}
		hs[h[0]] = append(groups, map[string]any{"hooks": []any{map[string]any{"type": "command", "command": h[1]}}})
		ch.Added = append(ch.Added, "hooks."+h[0]+" ("+h[1]+")")
	}
	if len(ch.Added) == 0 {
		return ch, nil
	}
	doc["hooks"] = hs
	return ch, writeJSON(path, doc, existed, &ch)
}

// hasHook reports whether a hook in groups runs command (with any
// arguments after it).
func hasHook(groups []any, command string) bool {
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		list, _ := gm["hooks"].([]any)
		for _, h := range list {
			hm, _ := h.(map[string]any)
			cmd, _ := hm["command"].(string)
			if hookRuns(cmd, command) {
				return true
			}
		}
	}
	return false
}

// hookRuns reports whether cmd runs command, perhaps by a full path.
func hookRuns(cmd, command string) bool {
	cmd = strings.TrimSpace(cmd)
	name, sub, _ := strings.Cut(command, " ")
	fields := strings.Fields(cmd)
	return len(fields) >= 2 && filepath.Base(fields[0]) == name && fields[1] == sub
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

const tomlEntry = "[mcp_servers.memory]\ncommand = \"memory-mcp\"\nargs = []\n"

// setupTOML appends the memory server's table to a Codex config unless
// one is there; the rest of the file is kept byte for byte.
func setupTOML(path string) (change, error) {
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
	out = append(out, tomlEntry...)
	ch.Added = append(ch.Added, "[mcp_servers.memory]")
	ch.Action = "updated"
	if !existed {
		ch.Action = "created"
	}
	return ch, writeAtomic(path, out)
}
