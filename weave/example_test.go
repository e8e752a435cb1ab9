package weave_test

import (
	"fmt"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/weave"
)

func ExampleWeaver_Weave() {
	updated := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	recs := []memory.Record{
		{ID: "1", Scope: scope.Project, Type: memory.Semantic, Key: "test-runner", Description: "How tests are run",
			Body: "Use `make test`.\n\n# Why\nIt sets the build tags.", Confidence: 0.9, UpdatedAt: updated},
		{ID: "2", Scope: scope.System, Type: memory.Semantic, Key: "go-version", Description: "Go toolchain",
			Body: "Go 1.26.", Confidence: 0.8, UpdatedAt: updated},
		{ID: "3", Scope: scope.Project, Type: memory.Procedural, Key: "release", Description: "Cut a release",
			Body: "1. Tag.\n2. Push the tag.", UseCount: 3, UpdatedAt: updated},
		{ID: "4", Scope: scope.Project, Type: memory.Procedural, Key: "bisect", Description: "Find a regression",
			Body: "```sh\n# mark the known-good tag first\ngit bisect start HEAD v1.0.0\n```", UseCount: 1, UpdatedAt: updated},
	}
	w := weave.New()
	b := w.Weave(recs, weave.Options{MaxTokens: 90})
	fmt.Print(b.Markdown)
	fmt.Println("---")
	fmt.Println(b.Tokens, "tokens; included", b.Included, "omitted", b.Omitted)
	// Output:
	// # Project memory
	//
	// ## Facts
	//
	// ### test-runner — How tests are run
	//
	// Use `make test`.
	//
	// #### Why
	// It sets the build tags.
	//
	// ### go-version — Go toolchain (system scope)
	//
	// Go 1.26.
	//
	// ## Procedures
	//
	// ### release — Cut a release
	//
	// 1. Tag.
	// 2. Push the tag.
	//
	// _1 more not shown: call memory_search or memory_read with a key._
	// ---
	// 83 tokens; included [1 2 3] omitted 1
}

func ExampleWeaver_Index() {
	recs := []memory.Record{
		{Scope: scope.Project, Type: memory.Procedural, Key: "release", Description: "Cut a release"},
		{Scope: scope.Tenant, Type: memory.Semantic, Key: "style", Description: "Tabs | spaces"},
		{Scope: scope.Project, Type: memory.Episodic, Key: "session-7", Description: "Fixed the flaky test"},
	}
	md, tokens := weave.New().Index(recs, 0, 0)
	fmt.Print(md)
	fmt.Println(tokens, "tokens")
	// Output:
	// # Memory index
	//
	// | key | description | type | scope |
	// |---|---|---|---|
	// | release | Cut a release | procedural | project |
	// | style | Tabs \| spaces | semantic | tenant |
	// | session-7 | Fixed the flaky test | episodic | project |
	// 60 tokens
}
