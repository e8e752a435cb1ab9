package main

import (
	"context"
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
}
