package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"prom.codes/memory-mcp/weave"
)

// TestInstructionsIndexUnderItsCap: with more memories than the
// instructions' index holds, it lists procedures first, then facts in the
// order recall weaves them (confidence first, whatever the key), says how
// many more there are and where to read them, and stays under its cap;
// memory://index still lists them all.
func TestInstructionsIndexUnderItsCap(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	write := func(args map[string]any) {
		t.Helper()
		ok(t, cs, "memory_write", args)
	}
	write(map[string]any{"type": "procedural", "key": "release-steps", "body": "1. make release\n2. git push --tags", "description": "Cut a release"})
	write(map[string]any{"type": "semantic", "scope": "system", "key": "test-runner", "body": "go test ./...", "description": "How tests run everywhere"})
	write(map[string]any{"type": "semantic", "key": "test-runner", "body": "make test", "description": "How tests run here", "confidence": 0.95})
	for i := range 150 {
		write(map[string]any{"type": "semantic", "key": fmt.Sprintf("fact-%d", i), "body": fmt.Sprintf("Fact number %d.", i), "description": fmt.Sprintf("Fact %d", i)})
	}
	ok(t, cs, "memory_read", map[string]any{}) // loads the tokenizer the instructions wait for
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}

	cs2 := connect(t, e, nil)
	instr := cs2.InitializeResult().Instructions
	if n := weave.New().Count(instr); n > instructionsBudget {
		t.Errorf("instructions are %d tokens, over the cap of %d", n, instructionsBudget)
	}
	for _, row := range []string{"| release-steps | Cut a release | procedural | project |", "| test-runner | How tests run here | semantic | project |"} {
		if !strings.Contains(instr, row) {
			t.Errorf("instructions lack %q:\n%s", row, instr)
		}
	}
	if strings.Contains(instr, "How tests run everywhere") {
		t.Errorf("instructions list the overridden record:\n%s", instr)
	}
	if strings.Index(instr, "release-steps") > strings.Index(instr, "| test-runner") {
		t.Errorf("the procedure does not come first:\n%s", instr)
	}
	rows := strings.Count(instr, "\n| ") - 1 // less the header row
	m := regexp.MustCompile(`\n_… and (\d+) more: read memory://index\._\n$`).FindStringSubmatch(instr)
	if m == nil || m[1] != fmt.Sprint(152-rows) {
		t.Errorf("instructions with %d rows do not end saying how many more (%d) and where:\n%s", rows, 152-rows, instr)
	}
	if full := readResource(t, cs2, "memory://index"); strings.Count(full, "\n| ")-1 != 152 || strings.Contains(full, "more:") {
		t.Errorf("memory://index is not complete:\n%s", full)
	}
}

// instructionsBudget is the cap, in tokens, on the initialize instructions.
const instructionsBudget = 500
