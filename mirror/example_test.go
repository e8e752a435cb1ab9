package mirror_test

import (
	"fmt"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

func ExampleEncode() {
	created := time.Date(2025, 2, 10, 14, 30, 0, 0, time.UTC)
	fmt.Print(string(mirror.Encode(memory.Record{
		ID: "01JNB4Z8Q0M7V3K2D5T6R9WXYA", Scope: scope.Project, Type: memory.Semantic, Key: "test-runner",
		Description: "Tests run with make test", Body: "Run `make test`, not `go test`.",
		Tags: []string{"testing"}, Confidence: 0.8, CreatedAt: created, UpdatedAt: created.Add(time.Hour),
		UseCount: 12, // volatile: not in the file
	})))
	// Output:
	// ---
	// id: "01JNB4Z8Q0M7V3K2D5T6R9WXYA"
	// type: semantic
	// description: "Tests run with make test"
	// confidence: 0.8
	// tags: ["testing"]
	// created: 2025-02-10T14:30:00Z
	// updated: 2025-02-10T15:30:00Z
	// ---
	//
	// Run `make test`, not `go test`.
}

func ExampleDecode() {
	rec, err := mirror.Decode("release", []byte("## Cut a **release**\n\nTag main and push the tag.\n"))
	fmt.Println(rec.Type, rec.Key, rec.Confidence, err)
	fmt.Printf("%q\n", rec.Description)

	_, err = mirror.Decode("Release Notes", []byte("Text\n"))
	fmt.Println(err)
	// Output:
	// semantic release 0.5 <nil>
	// "Cut a release"
	// file name is not a normalised key; rename it to release-notes.md
}
