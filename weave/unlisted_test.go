package weave

import (
	"strings"
	"testing"
)

// TestUnlisted: records the caller never read still count as not shown.
func TestUnlisted(t *testing.T) {
	recs := fixture()
	all := shared.Weave(recs, Options{MaxTokens: 8000})
	b := shared.Weave(recs, Options{MaxTokens: 8000, Unlisted: 40})
	if b.Omitted != all.Omitted+40 || !strings.Contains(b.Markdown, "_40 more not shown") {
		t.Errorf("Omitted = %d (without unlisted %d):\n%s", b.Omitted, all.Omitted, b.Markdown)
	}
	if b.Tokens != shared.Count(b.Markdown) || b.Tokens > 8000 {
		t.Errorf("Tokens = %d, Count = %d", b.Tokens, shared.Count(b.Markdown))
	}
	md, tokens := shared.Index(recs[:3], 0, 10)
	if !strings.Contains(md, "… and 10 more: read memory://index.") || tokens != shared.Count(md) {
		t.Errorf("Index with unlisted rows:\n%s", md)
	}
}
