package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalReport runs the evaluation end to end on a small corpus and
// checks that it reports the sessions by kind.
func TestEvalReport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: seeds a store")
	}
	var out strings.Builder
	cfg := config{evalDir: filepath.Join("..", "..", "testdata", "eval"), evalSizes: []int{300}, seed: 1}
	if err := runEval(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"paraphrase", "two-turn", "when", "person"}, "| all | 51 |", "| sessions | 51 |", "| no date words |") {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Hybrid search with the stand-in endpoint, beside keyword search: on
	// the conversations it finds more (the stand-in is
	// deterministic, so this is the fusion's behaviour, not chance).
	var kw, hy float64
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| conversations | 31 | ") && strings.Count(line, "|") == 9 {
			var r10, mrr float64
			if _, err := fmt.Sscanf(line, "| conversations | 31 | %f | %f | %f | %f |", &kw, &r10, &mrr, &hy); err != nil {
				t.Fatalf("hybrid row %q: %v", line, err)
			}
		}
	}
	if kw == 0 || hy <= kw {
		t.Errorf("conversations: keyword recall@5 %.3f, hybrid %.3f; want hybrid ahead:\n%s", kw, hy, out.String())
	}
}

// TestEvalThroughServer checks that the known items are searched for
// through the real server over stdio as well as through the store, and
// that both paths find the same records.
func TestEvalThroughServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: seeds a store and builds the server")
	}
	var out strings.Builder
	cfg := config{evalDir: filepath.Join("..", "..", "testdata", "eval"), evalSizes: []int{400}, seed: 3}
	if err := runEval(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The scores of a row: every column but the last, the search's time.
	scores := func(path string) []string {
		for _, line := range strings.Split(out.String(), "\n") {
			if cols := strings.Split(line, "|"); strings.HasPrefix(line, "| 400 | "+path+" |") {
				return cols[3 : len(cols)-2]
			}
		}
		t.Fatalf("no %s row in:\n%s", path, out.String())
		return nil
	}
	if store, server := scores("store"), scores("MCP"); strings.Join(store, "|") != strings.Join(server, "|") {
		t.Errorf("through the store %v, through the server %v", store, server)
	}
}
