package mirror

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

var (
	t0 = time.Date(2025, 2, 10, 14, 30, 0, 0, time.UTC)
	t1 = time.Date(2025, 2, 11, 9, 0, 0, 0, time.UTC)
)

// goldenRecords are the records whose files are kept under testdata.
var goldenRecords = map[string]memory.Record{
	"semantic": {
		ID: "01JNB4Z8Q0M7V3K2D5T6R9WXYA", Scope: scope.Project, Type: memory.Semantic, Key: "test-runner",
		Description: "Tests run with make test, not go test", Body: "# Test runner\n\nRun `make test`.\n",
		Tags: []string{"testing", "make"}, Confidence: 0.8, CreatedAt: t0, UpdatedAt: t1,
		// Never in a file:
		UseCount: 7, LastAccessedAt: &t1, ExpiresAt: &t1, SessionID: "s1", Source: memory.FromTool,
	},
	"procedural": {
		ID: "2f1c7a9e-4b3d-4e8a-9c1f-6d2b8e7a5c30", Scope: scope.Project, Type: memory.Procedural, Key: "deploy-staging",
		Description: `Deploy: "staging" \ yes`, Body: "\n\n1. `make image`\r\n2. apply\n\n\n",
		Tags: []string{"deploy", "no", "x: y"}, Confidence: 1, CreatedAt: t0, UpdatedAt: t1,
		Metadata: map[string]string{"owner": "platform", "a key": "line\nbreak", "emoji": "🚀"},
	},
	"minimal": {Type: memory.Semantic, Key: "bare", Body: "Just a body."},
}

func TestEncodeGolden(t *testing.T) {
	for name, rec := range goldenRecords {
		t.Run(name, func(t *testing.T) {
			got := Encode(rec)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Encode (-golden +got):\n%s", diff)
			}
			if !bytes.Equal(Encode(rec), got) {
				t.Error("Encode is not deterministic")
			}
		})
	}
}

func TestEncodeShape(t *testing.T) {
	for name, rec := range goldenRecords {
		b := string(Encode(rec))
		if strings.Contains(b, "\r") {
			t.Errorf("%s: file has a CR", name)
		}
		if !strings.HasSuffix(b, "\n") || strings.HasSuffix(b, "\n\n") {
			t.Errorf("%s: file does not end in exactly one newline: %q", name, b[max(0, len(b)-10):])
		}
		var keys []string
		for _, line := range strings.Split(strings.SplitN(b, "\n---\n", 2)[0], "\n")[1:] {
			if k, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
				keys = append(keys, k)
			}
		}
		want := []string{"id", "type", "description", "confidence", "tags", "created", "updated"}
		if rec.ID == "" {
			want = []string{"type", "description", "confidence", "tags"}
		}
		if len(rec.Metadata) > 0 {
			want = append(want, "metadata")
		}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("%s: field order (-want +got):\n%s", name, diff)
		}
		for _, volatile := range []string{"use_count", "last_accessed", "expires", "session", "source"} {
			if strings.Contains(b, volatile) {
				t.Errorf("%s: file mentions %s", name, volatile)
			}
		}
	}
}

// canonical is rec as a file can hold it: the fields Decode returns.
func canonical(rec memory.Record) memory.Record {
	out := memory.Record{
		ID: rec.ID, Scope: scope.Project, Type: rec.Type, Key: rec.Key, Description: rec.Description,
		Body: canonBody(rec.Body), Tags: rec.Tags, Confidence: rec.Confidence,
		CreatedAt: rec.CreatedAt.Truncate(time.Second), UpdatedAt: rec.UpdatedAt.Truncate(time.Second),
		Source: memory.FromMarkdown, Metadata: rec.Metadata,
	}
	if len(out.Tags) == 0 {
		out.Tags = nil
	}
	return out
}

func TestDecodeEncodeRoundTrip(t *testing.T) {
	for name, rec := range goldenRecords {
		got, err := Decode(rec.Key, Encode(rec))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(canonical(rec), got); diff != "" {
			t.Errorf("%s: Decode(Encode(r)) (-want +got):\n%s", name, diff)
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, stem, in string
		want           memory.Record
	}{{
		name: "no front matter: heading as plain text",
		stem: "go-version", in: "# The **Go** version is `pinned`\n\nGo 1.26.\n",
		want: memory.Record{Type: memory.Semantic, Description: "The Go version is pinned", Body: "# The **Go** version is `pinned`\n\nGo 1.26.", Confidence: 0.5},
	}, {
		name: "no heading: first line",
		stem: "note", in: "\n\nUse *make* for builds,\nnot go build.\n\n# Later heading\n",
		want: memory.Record{Type: memory.Semantic, Description: "Later heading", Body: "Use *make* for builds,\nnot go build.\n\n# Later heading", Confidence: 0.5},
	}, {
		name: "no heading at all",
		stem: "note", in: "Use [make](https://example.com) for builds,\nnot go build.\n",
		want: memory.Record{Type: memory.Semantic, Description: "Use make for builds,", Body: "Use [make](https://example.com) for builds,\nnot go build.", Confidence: 0.5},
	}, {
		name: "setext heading",
		stem: "note", in: "Release *steps*\n===\n\nTag it.\n",
		want: memory.Record{Type: memory.Semantic, Description: "Release steps", Body: "Release *steps*\n===\n\nTag it.", Confidence: 0.5},
	}, {
		name: "only code",
		stem: "note", in: "```sh\nmake test\n```\n",
		want: memory.Record{Type: memory.Semantic, Description: "```sh", Body: "```sh\nmake test\n```", Confidence: 0.5},
	}, {
		name: "CRLF and BOM",
		stem: "crlf", in: "\uFEFF---\r\ntype: procedural\r\ndescription: \"Build\"\r\n---\r\n\r\nStep one.\r\nStep two.\r\n",
		want: memory.Record{Type: memory.Procedural, Description: "Build", Body: "Step one.\nStep two.", Confidence: 0.5},
	}, {
		name: "front matter without description derives one",
		stem: "release", in: "---\ntype: Procedural\ntags: release\n---\n## Cut a _release_\n\nTag it.\n",
		want: memory.Record{Type: memory.Procedural, Description: "Cut a release", Body: "## Cut a _release_\n\nTag it.", Tags: []string{"release"}, Confidence: 0.5},
	}, {
		name: "empty description stays empty",
		stem: "x", in: "---\ndescription: \"\"\nconfidence: 0\n---\n# Heading\n",
		want: memory.Record{Type: memory.Semantic, Body: "# Heading", Confidence: 0},
	}, {
		name: "YAML 1.1 words stay text",
		stem: "x", in: "---\nid: 01JNB4Z8Q0M7V3K2D5T6R9WXYA\ndescription: yes\ntags: [no, 42, on]\nconfidence: 1\ncreated: 2025-02-10\nupdated: 2025-02-11T09:00:00.999+00:00\nmetadata:\n  n: 1\n---\nBody\n",
		want: memory.Record{
			ID: "01JNB4Z8Q0M7V3K2D5T6R9WXYA", Type: memory.Semantic, Description: "yes", Body: "Body", Tags: []string{"no", "42", "on"}, Confidence: 1,
			CreatedAt: time.Date(2025, 2, 10, 0, 0, 0, 0, time.UTC), UpdatedAt: t1, Metadata: map[string]string{"n": "1"},
		},
	}, {
		name: "---yaml opener and body with a rule",
		stem: "x", in: "---yaml\ntype: semantic\n---\n\n---\nafter a rule\n",
		want: memory.Record{Type: memory.Semantic, Description: "after a rule", Body: "---\nafter a rule", Confidence: 0.5},
	}, {
		name: "empty front matter",
		stem: "x", in: "---\n---\nText\n",
		want: memory.Record{Type: memory.Semantic, Description: "Text", Body: "Text", Confidence: 0.5},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.stem, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Key, tt.want.Scope, tt.want.Source = tt.stem, scope.Project, memory.FromMarkdown
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	secret := fakeSecret()
	tests := []struct {
		name, stem, in, want string
	}{
		{"bad YAML", "x", "---\ndescription: [never closed\n---\nBody\n", "not valid YAML"},
		{"YAML line in file terms", "x", "---\ntype: semantic\n\tbad: tab\n---\nBody\n", "line 3:"},
		{"not a mapping", "x", "---\n- a\n- b\n---\nBody\n", "must be a YAML mapping"},
		{"unknown type", "x", "---\ntype: gossip\n---\nBody\n", `type "gossip" is unknown`},
		{"working type", "x", "---\ntype: working\n---\nBody\n", "semantic or procedural only"},
		{"episodic type", "x", "---\ntype: episodic\n---\nBody\n", "semantic or procedural only"},
		{"unknown field", "x", "---\ntitle: x\n---\nBody\n", `field "title" this format does not know`},
		{"repeated field", "x", "---\ntags: [a]\ntags: [b]\n---\nBody\n", "tags appears twice"},
		{"repeated metadata key", "x", "---\nmetadata:\n  a: 1\n  a: 2\n---\nBody\n", "metadata has a key twice"},
		{"bad id", "x", "---\nid: 42\n---\nBody\n", "ULID or a UUID"},
		{"confidence out of range", "x", "---\nconfidence: 1.5\n---\nBody\n", "between 0 and 1"},
		{"confidence not a number", "x", "---\nconfidence: high\n---\nBody\n", "between 0 and 1"},
		{"tags of maps", "x", "---\ntags: [{a: b}]\n---\nBody\n", "list of strings"},
		{"bad time", "x", "---\ncreated: last tuesday\n---\nBody\n", "RFC 3339"},
		{"escaped NUL", "x", "---\ndescription: \"a\\0b\"\n---\nBody\n", "NUL"},
		{"unclosed", "x", "\n---\ntype: semantic\nBody\n", "line 2 is never closed"},
		{"stem not normalised", "Foo Bar", "Body\n", "rename it to foo-bar.md"},
		{"stem invalid", "-x", "Body\n", "not a valid key"},
		{"stem with dots", "a..b", "Body\n", "not a valid key"},
		{"binary", "x", "Body\x00\x01\n", "binary"},
		{"invalid UTF-8", "x", "Body \xff\xfe\n", "UTF-8"},
		{"huge", "x", strings.Repeat("a", maxFileBytes+1), "256 KiB"},
		{"huge front matter", "x", "---\ndescription: \"" + strings.Repeat("a", maxFrontMatterBytes) + "\"\n---\nBody\n", "64 KiB"},
		{"secret as unknown field", "x", "---\n" + secret + ": 1\n---\nBody\n", "value withheld"},
		{"secret as type", "x", "---\ntype: " + secret + "\n---\nBody\n", "value withheld"},
		{"secret as confidence", "x", "---\nconfidence: " + secret + "\n---\nBody\n", "between 0 and 1"},
		{"secret as anchor", "x", "---\ndescription: *" + secret + "\n---\nBody\n", "syntax error"},
		{"secret as id", "x", "---\nid: " + secret + "\n---\nBody\n", "ULID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.stem, []byte(tt.in))
			if err == nil {
				t.Fatal("Decode accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "ghp_") || strings.Contains(err.Error(), "a1B2c3") {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

// fakeSecret is shaped like a GitHub token, built here so that no secret
// sits in the source. (A body as repetitive as "a1B2"×9 is taken for a
// placeholder by the scanner.)
func fakeSecret() string { return "ghp_" + strings.Repeat("a1B2c3D4e5F6", 3) }

// billionLaughs is the classic alias bomb: nine levels of nine aliases,
// 9^9 strings if expanded.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("---\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString(n + ": &" + n + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",") + "]\n")
		prev = n
	}
	b.WriteString("---\nBody\n")
	return b.String()
}

// TestDecodeAliasBomb would run out of memory, or time, if the aliases were
// expanded; it passing at all is the proof. yaml.v2 stops at an alias ratio
// and the front matter cap bounds the document.
func TestDecodeAliasBomb(t *testing.T) {
	for _, field := range []string{"a", "tags", "metadata"} {
		doc := strings.Replace(billionLaughs(), "\ni:", "\n"+field+":", 1)
		if _, err := Decode("bomb", []byte(doc)); err == nil {
			t.Errorf("alias bomb in %s accepted", field)
		}
	}
}

func BenchmarkDecodeAliasBomb(b *testing.B) {
	doc := []byte(billionLaughs())
	for range b.N {
		if _, err := Decode("bomb", doc); err == nil {
			b.Fatal("accepted")
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	data := Encode(goldenRecords["procedural"])
	b.SetBytes(int64(len(data)))
	for range b.N {
		if _, err := Decode("deploy-staging", data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecode checks that Decode never panics, and that whatever it accepts
// survives Encode and Decode again unchanged: a file the server imports and
// later rewrites keeps its meaning.
func FuzzDecode(f *testing.F) {
	for _, rec := range goldenRecords {
		f.Add(rec.Key, Encode(rec))
	}
	for _, set := range []string{"good", "bad"} {
		entries, _ := os.ReadDir(filepath.Join("..", "testdata", "mirror", set))
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join("..", "testdata", "mirror", set, e.Name()))
			f.Add(strings.TrimSuffix(e.Name(), ".md"), b)
		}
	}
	f.Add("x", []byte(billionLaughs()))
	f.Add("x", []byte("---\ndescription: \"\\u2028\\x85\\t\"\ntags: \"one\"\n---\n  indented\n"))
	f.Fuzz(func(t *testing.T, stem string, data []byte) {
		rec, err := Decode(stem, data)
		if err != nil {
			return
		}
		again, err := Decode(stem, Encode(rec))
		if err != nil {
			t.Fatalf("Decode(Encode(r)) failed: %v\nfile:\n%s", err, Encode(rec))
		}
		if diff := cmp.Diff(rec, again); diff != "" {
			t.Fatalf("Decode(Encode(r)) differs (-first +second):\n%s\nfile:\n%s", diff, Encode(rec))
		}
	})
}

// hostile are bodies on which a markdown parser can go quadratic; Decode
// parses only the top of a body for its title, so each takes milliseconds
// (see BenchmarkDecodeHostile) instead of tens of seconds.
var hostile = map[string]string{
	"open links":      strings.Repeat("[a](", 60000),
	"nested quotes":   strings.Repeat("> ", 120000) + "a",
	"nested lists":    strings.Repeat("  - ", 60000) + "a",
	"brackets":        strings.Repeat("[", 250000),
	"emphasis":        strings.Repeat("*a", 120000),
	"deep YAML flow":  "---\na: " + strings.Repeat("[", 60000) + "\n---\nx",
	"deep YAML block": "---\n" + strings.Repeat("- ", 30000) + "x\n---\nx",
}

func TestDecodeHostile(t *testing.T) {
	for name, in := range hostile {
		rec, err := Decode("x", []byte(in))
		if err == nil && len(rec.Description) > 3*derivedDescriptionLen {
			t.Errorf("%s: description of %d bytes", name, len(rec.Description))
		}
	}
}

func BenchmarkDecodeHostile(b *testing.B) {
	for name, in := range hostile {
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) {
			for range b.N {
				Decode("x", []byte(in))
			}
		})
	}
}
