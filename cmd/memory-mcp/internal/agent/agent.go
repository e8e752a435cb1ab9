// Package agent knows where each coding agent keeps its project MCP
// config (Claude Code, Cursor, VS Code, Codex) and Claude Code's hooks,
// and writes memory-mcp into them without disturbing anything else; it
// also reads back what command a config runs. It imports only the
// standard library.
package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
)

// serverName is the name memory-mcp takes in an agent's MCP config.
const serverName = "memory"

// Agent is where one coding agent keeps its project MCP config.
type Agent struct {
	Name string
	File string // relative to the project root
	Kind string // "json" or "toml"
	Key  string // the JSON object holding servers
	// Entry is the server entry written for memory-mcp, run as command.
	Entry func(command string) map[string]any
}

// workspaceEnv points the server at the editor's open folder: Cursor and
// VS Code may start it elsewhere, and memories would land in the project
// of wherever that is.
var workspaceEnv = map[string]any{"PROMETHEUS_WORKSPACE_ROOT": "${workspaceFolder}"}

// Agents are the agents setup knows, by name.
var Agents = []Agent{
	{Name: "claude-code", File: ".mcp.json", Kind: "json", Key: "mcpServers",
		Entry: func(cmd string) map[string]any {
			return map[string]any{"type": "stdio", "command": cmd, "args": []any{}}
		}},
	{Name: "cursor", File: filepath.Join(".cursor", "mcp.json"), Kind: "json", Key: "mcpServers",
		Entry: func(cmd string) map[string]any {
			return map[string]any{"command": cmd, "args": []any{}, "env": workspaceEnv}
		}},
	{Name: "vscode", File: filepath.Join(".vscode", "mcp.json"), Kind: "json", Key: "servers",
		Entry: func(cmd string) map[string]any {
			return map[string]any{"type": "stdio", "command": cmd, "args": []any{}, "env": workspaceEnv}
		}},
	{Name: "codex", File: filepath.Join(".codex", "config.toml"), Kind: "toml"},
}

// ClaudeSettings holds Claude Code's project hooks.
var ClaudeSettings = filepath.Join(".claude", "settings.json")

// Hooks are the Claude Code hooks setup adds: event and subcommand.
var Hooks = [][2]string{{"SessionStart", "read"}, {"SessionEnd", "capture"}}

// Self is the command an agent is to run: "memory-mcp" when that
// name on PATH is this very binary, else this binary's absolute path, so
// that the config runs what setup ran, wherever it was built.
func Self() (string, error) {
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

// Named is the agent called name.
func Named(name string) (Agent, bool) {
	for _, a := range Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// Change is what setup did to one file.
type Change struct {
	Path   string   `json:"path"`
	Action string   `json:"action"` // created, updated or unchanged
	Added  []string `json:"added"`
	// Command is what the entries added run; empty when nothing was added.
	Command string `json:"command,omitempty"`
}

// SetupServer adds memory-mcp to ag's config under root, keeping every
// other setting, and leaving an existing memory entry as the user made it.
func SetupServer(root string, ag Agent, cmd string) (Change, error) {
	path := filepath.Join(root, ag.File)
	if ag.Kind == "toml" {
		return setupTOML(path, cmd)
	}
	doc, existed, err := readJSONObject(path)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Path: path, Action: "unchanged", Added: []string{}}
	servers, ok := doc[ag.Key].(map[string]any)
	if doc[ag.Key] != nil && !ok {
		return ch, fmt.Errorf("setup: %s: %q is not an object; fix the file by hand", path, ag.Key)
	}
	if servers == nil {
		servers = map[string]any{}
		doc[ag.Key] = servers
	}
	if _, ok := servers[serverName]; ok {
		return ch, nil
	}
	servers[serverName] = ag.Entry(cmd)
	ch.Added = append(ch.Added, ag.Key+"."+serverName)
	ch.Command = cmd
	return ch, writeJSON(path, doc, existed, &ch)
}

// SetupHooks adds the SessionStart and SessionEnd hooks that run cmd to
// Claude Code's project settings under root, keeping every other hook.
func SetupHooks(root, cmd string) (Change, error) {
	path := filepath.Join(root, ClaudeSettings)
	doc, existed, err := readJSONObject(path)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Path: path, Action: "unchanged", Added: []string{}}
	hs, ok := doc["hooks"].(map[string]any)
	if doc["hooks"] != nil && !ok {
		return ch, fmt.Errorf("setup: %s: \"hooks\" is not an object; fix the file by hand", path)
	}
	if hs == nil {
		hs = map[string]any{}
	}
	for _, h := range Hooks {
		groups, ok := hs[h[0]].([]any)
		if hs[h[0]] != nil && !ok {
			return ch, fmt.Errorf("setup: %s: Hooks.%s is not a list; fix the file by hand", path, h[0])
		}
		if _, ok := HookCommand(groups, h[1]); ok {
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

// HookCommand finds a hook in groups that runs memory-mcp's subcommand sub
// (with any arguments after it) and returns the program it names.
func HookCommand(groups []any, sub string) (string, bool) {
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
		return nil, true, fmt.Errorf("setup: %s is not a JSON object (%s); fix it or move it aside, nothing was changed", path, jsonl.Reason(err))
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, true, nil
}

func writeJSON(path string, doc map[string]any, existed bool, ch *Change) error {
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
func setupTOML(path, cmd string) (Change, error) {
	ch := Change{Path: path, Action: "unchanged", Added: []string{}}
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

// ServerCommand finds the command of the memory-mcp server in an agent
// config: the entry named memory, or any entry whose command is memory-mcp.
func ServerCommand(ag Agent, data []byte) (string, bool, error) {
	if ag.Kind == "toml" {
		if !tomlTable.Match(data) {
			return "", false, nil
		}
		loc := tomlTable.FindIndex(data)
		rest := string(data[loc[1]:])
		if i := strings.Index(rest, "\n["); i >= 0 {
			rest = rest[:i]
		}
		for _, line := range strings.Split(rest, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if ok && strings.TrimSpace(k) == "command" {
				v = strings.TrimSpace(v)
				if strings.HasPrefix(v, `"`) {
					v = strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(strings.Trim(v, `"`))
				}
				return strings.Trim(v, `'`), true, nil
			}
		}
		return "", true, errors.New("the memory server has no command")
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", false, errors.New(jsonl.Reason(err))
	}
	servers, _ := doc[ag.Key].(map[string]any)
	if e, ok := servers[serverName].(map[string]any); ok {
		cmd, _ := e["command"].(string)
		if cmd == "" {
			return "", true, errors.New("the memory server has no command")
		}
		return cmd, true, nil
	}
	for _, e := range servers {
		em, _ := e.(map[string]any)
		if cmd, _ := em["command"].(string); filepath.Base(cmd) == "memory-mcp" {
			return cmd, true, nil
		}
	}
	return "", false, nil
}

// Finding is what Check found in one place: all is well, or a problem
// and its fix.
type Finding struct {
	OK          bool
	Detail, Fix string
}

// Check looks at the agent configs of the project at root and of the
// user's home (none when home is ""): which run memory-mcp, and whether
// what they run is found.
func Check(root, home string) []Finding {
	var out []Finding
	ok := func(format string, args ...any) {
		out = append(out, Finding{OK: true, Detail: fmt.Sprintf(format, args...)})
	}
	problem := func(detail, fix string) { out = append(out, Finding{Detail: detail, Fix: fix}) }
	found := 0
	type place struct {
		path string
		ag   Agent
	}
	var places []place
	for _, ag := range Agents {
		places = append(places, place{filepath.Join(root, ag.File), ag})
	}
	if home != "" {
		places = append(places,
			place{filepath.Join(home, ".cursor", "mcp.json"), Agents[1]},
			place{filepath.Join(home, ".codex", "config.toml"), Agents[3]},
			place{filepath.Join(home, ".claude.json"), Agents[0]})
	}
	for _, p := range places {
		data, err := os.ReadFile(p.path)
		if err != nil {
			continue
		}
		found++
		cmd, has, err := ServerCommand(p.ag, data)
		switch {
		case err != nil:
			problem(fmt.Sprintf("%s (%s): %v", p.path, p.ag.Name, err), "fix the file, or move it aside and run memory-mcp setup "+p.ag.Name)
		case !has:
			ok("%s (%s): no memory-mcp server in it", p.path, p.ag.Name)
		default:
			if !runnable(cmd) {
				problem(fmt.Sprintf("%s (%s) runs %q, which is not found", p.path, p.ag.Name, cmd), "put memory-mcp on PATH, or give its full path in the config")
			} else {
				ok("%s (%s): runs %s", p.path, p.ag.Name, cmd)
			}
		}
	}
	settings := filepath.Join(root, ClaudeSettings)
	if data, err := os.ReadFile(settings); err == nil {
		found++
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			problem(fmt.Sprintf("%s: %s", settings, jsonl.Reason(err)), "fix the JSON; Claude Code ignores a settings file it cannot read")
		} else {
			hs, _ := doc["hooks"].(map[string]any)
			var missing []string
			lost := false
			for _, h := range Hooks {
				groups, _ := hs[h[0]].([]any)
				cmd, has := HookCommand(groups, h[1])
				switch {
				case !has:
					missing = append(missing, h[0])
				case !runnable(cmd):
					lost = true
					problem(fmt.Sprintf("%s: the %s hook runs %q, which is not found", settings, h[0], cmd), "put memory-mcp on PATH, or give its full path in the hook")
				}
			}
			switch {
			case lost:
			case len(missing) == 0:
				ok("%s: SessionStart and SessionEnd hooks run memory-mcp", settings)
			default:
				ok("%s: no %s hook for memory-mcp (memory-mcp setup claude-code adds it)", settings, strings.Join(missing, " or "))
			}
		}
	}
	if found == 0 {
		ok("no agent config found here or in your home; memory-mcp setup claude-code|cursor|vscode|codex writes one")
	}
	return out
}

// runnable reports whether cmd, a name looked up on PATH or a path, is a
// program that can be started.
func runnable(cmd string) bool {
	_, err := exec.LookPath(cmd)
	return err == nil
}
