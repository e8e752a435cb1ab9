package weave

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pkoukk/tiktoken-go"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// shared is one Weaver for the whole package's tests, so the encoding and
// the count cache are built once.
var shared = New()

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(days int) time.Time { return t0.Add(time.Duration(days) * 24 * time.Hour) }

func ptr[T any](v T) *T { return &v }

// fixture mixes facts and procedures across scopes, with bodies that carry
// headings, setext headings and fenced code holding '#' lines, plus two
// records of types that are never woven.
func fixture() []memory.Record {
	return []memory.Record{
		{ID: "01", Scope: scope.Project, Type: memory.Semantic, Key: "test-runner", Description: "How tests are run",
			Body:       "Use `make test`; it runs `go test -race ./...` with the right build tags.\n\n# Why\n\nThe Makefile sets CGO_ENABLED=1, which SQLite needs.",
			Confidence: 0.9, UseCount: 5, UpdatedAt: at(1)},
		{ID: "02", Scope: scope.System, Type: memory.Semantic, Key: "go-version", Description: "Go toolchain",
			Body:       "Go 1.26 everywhere. Check with `go version`.",
			Confidence: 0.9, UseCount: 2, UpdatedAt: at(2)},
		{ID: "03", Scope: scope.Project, Type: memory.Semantic, Key: "db-path", Description: "Where the database lives",
			Body:       "The database is `~/.prometheus/memory.db`.\n\n```sh\n# override it for tests\nexport PROMETHEUS_MEMORY_DB_PATH=/tmp/m.db\n```\n",
			Confidence: 0.7, UseCount: 3, UpdatedAt: at(3)},
		{ID: "04", Scope: scope.Workspace, Type: memory.Semantic, Key: "error-style", Description: "How errors read",
			Body:       "## Error style\nWrap with what you were doing: `fmt.Errorf(\"open %s: %w\", path, err)`.\n\n###### Never\nSay \"failed to\".",
			Confidence: 0.7, UseCount: 9, UpdatedAt: at(1)},
		{ID: "05", Scope: scope.Tenant, Type: memory.Semantic, Key: "commit-style", Description: "Commit messages",
			Body:       "Conventional commits\n====================\n\nPrefix with `feat:`, `fix:` or `chore:`.\n\nScope\n-----\n\nName the package: `fix(weave): ...`.",
			Confidence: 0.5, UseCount: 1, UpdatedAt: at(4)},
		{ID: "06", Scope: scope.Project, Type: memory.Semantic, Key: "ci", Description: "Continuous integration",
			Body:       "CI runs `.ci/run`: gofmt, go vet, go test -race ./... and go mod tidy with no diff. It takes about four minutes; a red run blocks the merge queue, so run `.ci/run` locally before pushing anything larger than a typo fix.",
			Confidence: 0.5, UseCount: 0, UpdatedAt: at(5), LastAccessedAt: ptr(at(9))},
		{ID: "07", Scope: scope.Project, Type: memory.Semantic, Key: "secrets-policy", Description: "Never store secrets",
			Body:       "Secrets are refused at write time; use placeholders such as `<YOUR_TOKEN>`.",
			Confidence: 0.95, UseCount: 0, UpdatedAt: at(0)},
		{ID: "08", Scope: scope.Project, Type: memory.Semantic, Key: "lint", Description: "Linters",
			Body:       "~~~yaml\n## not a heading: a YAML comment\nlinters: [staticcheck]\n~~~\n#hashtag is not a heading either.",
			Confidence: 0.6, UseCount: 0, UpdatedAt: at(2)},
		{ID: "09", Scope: scope.Project, Type: memory.Episodic, Key: "session-42", Description: "Yesterday's session",
			Body: "Fixed the flaky test.", Confidence: 1, UseCount: 100, UpdatedAt: at(8)},
		{ID: "10", Scope: scope.Project, Type: memory.Working, Key: "scratch", Description: "Scratch",
			Body: "half a thought", Confidence: 1, UseCount: 100, UpdatedAt: at(8)},
		{ID: "11", Scope: scope.Project, Type: memory.Procedural, Key: "release", Description: "Cut a release",
			Body:     "1. Update CHANGELOG.md.\n2. Tag: `git tag -s vX.Y.Z`.\n3. Push the tag; CI publishes the binaries.",
			UseCount: 4, UpdatedAt: at(1)},
		{ID: "12", Scope: scope.Project, Type: memory.Procedural, Key: "add-migration", Description: "Add a schema migration",
			Body:     "### Steps\n\n```sql\n-- memory/migrations/0003_x.sql\n# psql prompt, not a heading\n```\n\n    # indented code, not a heading\n\nThen run the tests twice: migrations must re-run safely.",
			UseCount: 4, UpdatedAt: at(3)},
		{ID: "13", Scope: scope.Workspace, Type: memory.Procedural, Key: "debug-flaky", Description: "Chase a flaky test",
			Body:     "Run `go test -count=50 -race -run TestX ./pkg` and read the first failure.",
			UseCount: 1, UpdatedAt: at(6)},
		{ID: "14", Scope: scope.Project, Type: memory.Procedural, Key: "regen-golden", Description: "Regenerate golden files",
			Body:     "`go test ./weave -update`, then review the diff.",
			UseCount: 7, UpdatedAt: at(2)},
		{ID: "15", Scope: scope.Project, Type: memory.Semantic, Key: "owner", Description: "Who to ask | about weave\nand recall",
			Confidence: 0.5, UseCount: 1, UpdatedAt: at(4)},
	}
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./weave -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// describe renders a block for a golden file: the numbers, then the block.
func describe(b Block) string {
	return fmt.Sprintf("tokens: %d\nincluded: %s\nomitted: %d\n-----\n%s", b.Tokens, strings.Join(b.Included, " "), b.Omitted, b.Markdown)
}

func TestWeaveGolden(t *testing.T) {
	for _, budget := range []int{80, 200, 8000} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			b := shared.Weave(fixture(), Options{MaxTokens: budget})
			check(t, shared, b, budget, 13)
			golden(t, fmt.Sprintf("weave-%d", budget), describe(b))
		})
	}
}

func TestIndexGolden(t *testing.T) {
	for _, budget := range []int{0, 100} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			md, tokens := shared.Index(fixture(), budget, 0)
			if n := shared.Count(md); tokens != n {
				t.Errorf("tokens = %d, Count = %d", tokens, n)
			}
			if budget > 0 && tokens > budget {
				t.Errorf("tokens = %d, over the cap %d", tokens, budget)
			}
			golden(t, fmt.Sprintf("index-%d", budget), fmt.Sprintf("tokens: %d\n-----\n%s", tokens, md))
		})
	}
}

// check asserts what holds of every block.
func check(t *testing.T, w *Weaver, b Block, limit, eligible int) {
	t.Helper()
	if n := w.Count(b.Markdown); b.Tokens != n {
		t.Errorf("Tokens = %d, Count(Markdown) = %d", b.Tokens, n)
	}
	if b.Tokens > limit {
		t.Errorf("Tokens = %d, over the cap %d", b.Tokens, limit)
	}
	if b.Omitted+len(b.Included) != eligible {
		t.Errorf("Omitted %d + Included %d != eligible %d", b.Omitted, len(b.Included), eligible)
	}
	seen := map[string]bool{}
	for _, id := range b.Included {
		if seen[id] {
			t.Errorf("id %s included twice", id)
		}
		seen[id] = true
	}
}

func TestWeaveOrder(t *testing.T) {
	b := shared.Weave(fixture(), Options{MaxTokens: 100000})
	// Facts by confidence, use count, recency, key; then procedures by use
	// count, recency, key. 05 and 15 tie up to the key; 12 beats 11 on
	// recency.
	want := []string{"07", "01", "02", "04", "03", "08", "05", "15", "06", "14", "12", "11", "13"}
	if diff := cmp.Diff(want, b.Included); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if b.Omitted != 0 {
		t.Errorf("Omitted = %d, want 0", b.Omitted)
	}
	if strings.Contains(b.Markdown, "session-42") || strings.Contains(b.Markdown, "scratch") {
		t.Errorf("episodic or working record woven:\n%s", b.Markdown)
	}
}

func TestWeaveRelevant(t *testing.T) {
	opts := Options{
		MaxTokens: 100000,
		// A procedure, an unknown id, a fact, an episodic record (never
		// woven) and a repeat.
		Relevant: []string{"13", "nope", "05", "09", "13"},
	}
	b := shared.Weave(fixture(), opts)
	want := []string{"05", "07", "01", "02", "04", "03", "08", "15", "06", "13", "14", "12", "11"}
	if diff := cmp.Diff(want, b.Included); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	// Relevant records are packed first whatever their type: with room for
	// little, the relevant procedure is packed before every fact, yet shown
	// in its own section, after the facts.
	small := shared.Weave(fixture(), Options{MaxTokens: 90, Relevant: []string{"13"}})
	if diff := cmp.Diff([]string{"07", "13"}, small.Included); diff != "" {
		t.Errorf("Included (-want +got):\n%s", diff)
	}
	if !strings.Contains(small.Markdown, "## Procedures\n\n### debug-flaky") {
		t.Errorf("relevant procedure not shown:\n%s", small.Markdown)
	}
}

func TestWeaveDeterministic(t *testing.T) {
	recs := fixture()
	want := shared.Weave(recs, Options{MaxTokens: 300})
	// Reverse the input and use a fresh Weaver (empty cache): same block.
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	got := New().Weave(recs, Options{MaxTokens: 300})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("weave differs with input order (-want +got):\n%s", diff)
	}
}

func TestWeaveTinyBudgets(t *testing.T) {
	for _, budget := range []int{1, 5, 10, 20, 25, 30} {
		b := shared.Weave(fixture(), Options{MaxTokens: budget})
		check(t, shared, b, budget, 13)
		if len(b.Included) != 0 {
			t.Errorf("budget %d: included %v", budget, b.Included)
		}
		if b.Markdown != "" && !strings.HasPrefix(b.Markdown, title+"_13 more not shown") && b.Markdown != notShown(13) {
			t.Errorf("budget %d: Markdown = %q", budget, b.Markdown)
		}
	}
	if b := shared.Weave(fixture(), Options{MaxTokens: 1}); b.Markdown != "" || b.Tokens != 0 || b.Omitted != 13 {
		t.Errorf("budget 1: got %+v, want an empty block omitting 13", b)
	}
}

func TestWeaveDefaultBudget(t *testing.T) {
	var recs []memory.Record
	for i := range 200 {
		recs = append(recs, memory.Record{ID: fmt.Sprint(i), Type: memory.Semantic, Key: fmt.Sprintf("k%03d", i),
			Body: strings.Repeat("Some durable fact about the project. ", 5), Confidence: 0.5})
	}
	for _, max := range []int{0, -3} {
		b := shared.Weave(recs, Options{MaxTokens: max})
		check(t, shared, b, DefaultMaxTokens, 200)
		if b.Tokens < DefaultMaxTokens-100 {
			t.Errorf("MaxTokens %d: Tokens = %d, want close to %d", max, b.Tokens, DefaultMaxTokens)
		}
	}
}

func TestWeaveEmpty(t *testing.T) {
	onlyOthers := fixture()[8:10]
	for _, recs := range [][]memory.Record{nil, onlyOthers} {
		b := shared.Weave(recs, Options{})
		want := Block{Markdown: "No project memory yet.\n", Tokens: shared.Count("No project memory yet.\n")}
		if diff := cmp.Diff(want, b); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	if b := shared.Weave(nil, Options{MaxTokens: 2}); !cmp.Equal(b, Block{}) {
		t.Errorf("budget 2: got %+v, want the zero Block", b)
	}
}

func TestWeaveDuplicateIDs(t *testing.T) {
	recs := fixture()
	recs = append(recs, recs[0], recs[10])
	b := shared.Weave(recs, Options{MaxTokens: 100000})
	check(t, shared, b, 100000, 13)
}

func TestWeaveStopsAtFirstMisfit(t *testing.T) {
	recs := []memory.Record{
		{ID: "a", Type: memory.Semantic, Key: "a", Body: "short", Confidence: 0.9},
		{ID: "b", Type: memory.Semantic, Key: "b", Body: strings.Repeat("long body text ", 100), Confidence: 0.8},
		{ID: "c", Type: memory.Semantic, Key: "c", Body: "short", Confidence: 0.7},
	}
	b := shared.Weave(recs, Options{MaxTokens: 100})
	if diff := cmp.Diff([]string{"a"}, b.Included); diff != "" {
		t.Errorf("Included (-want +got):\n%s", diff)
	}
	if b.Omitted != 2 || !strings.HasSuffix(b.Markdown, "_2 more not shown: call memory_search or memory_read with a key._\n") {
		t.Errorf("Omitted = %d, Markdown:\n%s", b.Omitted, b.Markdown)
	}
}

func TestWeaveSectionHeadings(t *testing.T) {
	recs := []memory.Record{
		{ID: "a", Scope: scope.Project, Type: memory.Semantic, Key: "plain"},
		{ID: "b", Scope: scope.Tenant, Type: memory.Semantic, Key: "described", Description: "  two\nlines  "},
	}
	b := shared.Weave(recs, Options{})
	want := "# Project memory\n\n## Facts\n\n### described — two lines (tenant scope)\n\n### plain\n"
	if b.Markdown != want {
		t.Errorf("Markdown:\n%q\nwant:\n%q", b.Markdown, want)
	}
}

func TestDemote(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"levels", "# a\n## b\n### c\n#### d\n###### f", "#### a\n##### b\n###### c\n###### d\n###### f"},
		{"indented up to three", "   # a\n    # code", "   #### a\n    # code"},
		{"bare and tabbed", "#\n#\tx", "####\n####\tx"},
		{"not headings", "#hashtag\n####### seven\nx # y", "#hashtag\n####### seven\nx # y"},
		{"backtick fence", "```sh\n# comment\n```\n# after", "```sh\n# comment\n```\n#### after"},
		{"tilde fence", "~~~\n# in\n```\n# still in\n~~~\n# out", "~~~\n# in\n```\n# still in\n~~~\n#### out"},
		{"longer closing fence", "````\n# in\n```\n# in\n`````\n# out", "````\n# in\n```\n# in\n`````\n#### out"},
		{"unclosed fence is closed", "```\n# in\n# in", "```\n# in\n# in\n```"},
		{"unclosed long tilde fence", "~~~~\n# in\n~~~", "~~~~\n# in\n~~~\n~~~~"},
		{"backticks in info are not a fence", "``` a`b\n# out", "``` a`b\n#### out"},
		{"setext", "Title\n=====\n\nSub\n---\ntext", "#### Title\n\n##### Sub\ntext"},
		{"setext single char", "Title\n=", "#### Title"},
		{"multi-line setext left alone", "one\ntwo\n---", "one\ntwo\n---"},
		{"setext after a heading", "# A\nB\n===", "#### A\n#### B"},
		{"setext after a fence", "```\nx\n```\nB\n---", "```\nx\n```\n##### B"},
		{"rule after blank", "text\n\n---\n", "text\n\n---\n"},
		{"list item then rule", "- item\n---", "- item\n---"},
		{"ordered item then rule", "1. item\n---", "1. item\n---"},
		{"table", "| a |\n---", "| a |\n---"},
		{"quote", "> # quoted\n---", "> # quoted\n---"},
		{"setext in fence", "```\nTitle\n===\n```", "```\nTitle\n===\n```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := demote(tt.in); got != tt.want {
				t.Errorf("demote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTidyBody(t *testing.T) {
	r := memory.Record{Key: "k", Body: "\r\n  \n    code\r\nline\r\n\n  \t"}
	if got, want := section(&r), "### k\n\n    code\nline\n\n"; got != want {
		t.Errorf("section = %q, want %q", got, want)
	}
}

func TestIndexCapped(t *testing.T) {
	recs := fixture()
	full, fullTokens := shared.Index(recs, 0, 0)
	if n := shared.Count(full); fullTokens != n {
		t.Errorf("uncapped: tokens = %d, Count = %d", fullTokens, n)
	}
	if got := strings.Count(full, "\n| ") - 1; got != len(recs) {
		t.Errorf("uncapped: %d rows, want %d", got, len(recs))
	}
	for budget := 1; budget <= fullTokens+5; budget += 3 {
		md, tokens := shared.Index(recs, budget, 0)
		if n := shared.Count(md); tokens != n || tokens > budget {
			t.Fatalf("budget %d: tokens = %d, Count = %d", budget, tokens, n)
		}
		rows := strings.Count(md, "\n| ") - 1 // less the header row
		if rows < 0 {
			rows = 0
		}
		switch {
		case md == "":
		case budget >= fullTokens:
			if md != full {
				t.Errorf("budget %d: want the whole index", budget)
			}
		case rows == 0:
			if want := fmt.Sprintf("# Memory index\n\n_%d records not shown: read memory://index._\n", len(recs)); md != want {
				t.Errorf("budget %d: no rows, got:\n%s", budget, md)
			}
		case !strings.HasSuffix(md, fmt.Sprintf("\n_… and %d more: read memory://index._\n", len(recs)-rows)):
			t.Errorf("budget %d: %d rows, bad ending:\n%s", budget, rows, md)
		}
	}
	if md, tokens := shared.Index(nil, 0, 0); md != "# Memory index\n\nNo records yet.\n" || tokens != shared.Count(md) {
		t.Errorf("empty index = %q, %d", md, tokens)
	}
}

func TestCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a | b", `a \| b`},
		{`a \| b`, `a \\\| b`},
		{"two\r\nlines\n", "two lines"},
		{`C:\path`, `C:\path`},
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"<|endoftext|>", 7}, // plain text, not the one special token
	}
	for _, tt := range tests {
		if got := shared.Count(tt.in); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if err := shared.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
}

func TestLoadFailure(t *testing.T) {
	w := New()
	w.load = func() (*tiktoken.Tiktoken, error) { return nil, errors.New("no ranks") }
	if w.Err() == nil {
		t.Fatal("Err() = nil, want the load error")
	}
	if got := w.Count("abcde"); got != 3 {
		t.Errorf("Count = %d, want the estimate 3", got)
	}
	for _, budget := range []int{1, 50, 200, 8000} {
		b := w.Weave(fixture(), Options{MaxTokens: budget})
		check(t, w, b, budget, 13)
	}
	for _, budget := range []int{0, 30, 100} {
		md, tokens := w.Index(fixture(), budget, 0)
		if n := w.Count(md); tokens != n || budget > 0 && tokens > budget {
			t.Errorf("Index(%d): tokens = %d, Count = %d", budget, tokens, n)
		}
	}
}

func TestConcurrent(t *testing.T) {
	w := New()
	var wg sync.WaitGroup
	blocks := make([]Block, 8)
	for i := range blocks {
		wg.Go(func() {
			w.Preload()
			blocks[i] = w.Weave(fixture(), Options{MaxTokens: 400})
			w.Index(fixture(), 200, 0)
		})
	}
	wg.Wait()
	for i := range blocks {
		if diff := cmp.Diff(blocks[0], blocks[i]); diff != "" {
			t.Errorf("block %d differs (-0 +%d):\n%s", i, i, diff)
		}
	}
}

func TestCacheBounded(t *testing.T) {
	w := New()
	for i := range maxCached {
		w.counts[countKey{uint64(i), 1}] = 1
	}
	w.cached("fresh text")
	if n := len(w.counts); n != 1 {
		t.Errorf("cache holds %d entries after filling up, want 1", n)
	}
}

func TestWeaveHeadingSkipsRepeatedDescription(t *testing.T) {
	recs := []memory.Record{
		{ID: "1", Scope: scope.Project, Type: memory.Procedural, Key: "verify", Description: "Verify", Body: "1. make lint\n"},
		{ID: "2", Scope: scope.Project, Type: memory.Semantic, Key: "ci", Description: "How CI runs", Body: "On every push.\n"},
	}
	md := shared.Weave(recs, Options{MaxTokens: 1000}).Markdown
	for _, want := range []string{"### verify\n", "### ci — How CI runs\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("block lacks %q:\n%s", want, md)
		}
	}
}
