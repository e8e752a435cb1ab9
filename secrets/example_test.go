package secrets_test

import (
	"fmt"
	"strings"

	"prom.codes/memory-mcp/secrets"
)

func ExampleScan() {
	// A made-up token, assembled so that no key-shaped literal is committed.
	token := "gh" + "p_" + strings.Repeat("Zq7Xw2Lm9Np4", 3)

	if f, ok := secrets.Scan("export GITHUB_TOKEN=" + token); ok {
		// Report the rule, never the value.
		fmt.Printf("rejected: %s (%s)\n", f.Rule, f.Description)
	}

	_, ok := secrets.Scan("Rotate the API key every 90 days; GITHUB_TOKEN=<YOUR_TOKEN>")
	fmt.Println("prose and placeholders flagged:", ok)
	// Output:
	// rejected: github-pat (GitHub personal access token)
	// prose and placeholders flagged: false
}
