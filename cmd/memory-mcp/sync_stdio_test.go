package main

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A running stdio server pushes its shared writes and pulls the team's by
// itself, and says nothing on stdout but MCP frames (the client would
// fail on anything else).
func TestSyncStdioServerSyncsByItself(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		tok := tm.token("acme", "alice")
		alice := tm.machine(tok)
		alice.extra = append(alice.extra, "PROMETHEUS_MEMORY_SYNC_INTERVAL=1s")
		bob := tm.machine(tm.token("acme", "bob"))
		cs, cmd, stderr := startBinary(t, binary, alice)
		t.Cleanup(func() {
			cs.Close()
			cmd.Wait()
			if strings.Contains(stderr.String(), tok) {
				t.Errorf("the stdio server logged the token")
			}
		})
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "from-stdio", "scope": "tenant", "body": "Written through the stdio server."})
		eventually(t, "bob pulls what alice's stdio server pushed", func() bool {
			syncOK(t, bob)
			return body(t, bob, "tenant", "from-stdio") == "Written through the stdio server."
		})
		put(t, bob, "tenant", "from-bob", "Written on bob's machine.")
		syncOK(t, bob)
		eventually(t, "alice's stdio server pulls bob's fact", func() bool {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_read",
				Arguments: map[string]any{"key": "from-bob", "type": "semantic"}})
			return err == nil && !res.IsError && strings.Contains(text(res), "Written on bob's machine.")
		})
	})
}
