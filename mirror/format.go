package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/adrg/frontmatter"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"gopkg.in/yaml.v2"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// Limits on what Decode accepts. A memory is a page of prose: anything
// bigger is not one, and parsing it would only cost time.
const (
	maxFileBytes        = 256 << 10
	maxFrontMatterBytes = 64 << 10
)

// derivedDescriptionLen caps, in bytes, a description taken from a heading
// or a first line, which can be a whole paragraph long. Bytes, not
// characters: the store's own limit is in bytes, and 200 CJK characters
// are 600 of them.
const derivedDescriptionLen = 200

// describeScan is how much of a body is searched for its title.
const describeScan = 8 << 10

// timeLayout is RFC 3339 at second precision: sub-second digits would change
// the file on every write without meaning anything to a reader.
const timeLayout = "2006-01-02T15:04:05Z"

// Encode renders rec as its markdown file: YAML front matter with the
// fields in a fixed order, a blank line and the body. The output depends on
// nothing but rec, so an unchanged record always encodes to the same bytes.
// Volatile fields (use count, last access, expiry) and the session and
// source are left out; metadata is written, sorted by key, only when there
// is some, because a file edit replaces the record's metadata with the
// file's.
func Encode(rec memory.Record) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	if rec.ID != "" {
		b.WriteString("id: " + quote(rec.ID) + "\n")
	}
	b.WriteString("type: " + plainOrQuoted(string(rec.Type)) + "\n")
	b.WriteString("description: " + quote(rec.Description) + "\n")
	b.WriteString("confidence: " + formatConfidence(rec.Confidence) + "\n")
	b.WriteString("tags: [")
	for i, t := range rec.Tags {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(t))
	}
	b.WriteString("]\n")
	if !rec.CreatedAt.IsZero() {
		b.WriteString("created: " + rec.CreatedAt.UTC().Format(timeLayout) + "\n")
	}
	if !rec.UpdatedAt.IsZero() {
		b.WriteString("updated: " + rec.UpdatedAt.UTC().Format(timeLayout) + "\n")
	}
	if len(rec.Metadata) > 0 {
		b.WriteString("metadata:\n")
		keys := make([]string, 0, len(rec.Metadata))
		for k := range rec.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString("  " + quote(k) + ": " + quote(rec.Metadata[k]) + "\n")
		}
	}
	b.WriteString("---\n")
	if body := canonBody(clean(rec.Body)); body != "" {
		b.WriteString("\n" + body + "\n")
	}
	return b.Bytes()
}

// clean makes s safe to put in a file Decode accepts: valid UTF-8, no NUL.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// quote writes s as a YAML double-quoted scalar. Go's escapes (\n, \t,
// \xNN, \uNNNN, \UNNNNNNNN) are all valid YAML escapes, and every character
// strconv leaves unescaped is one YAML may hold in a double-quoted scalar.
func quote(s string) string { return strconv.Quote(clean(s)) }

var plainWord = regexp.MustCompile(`^[a-z]+$`)

func plainOrQuoted(s string) string {
	if plainWord.MatchString(s) && s != "null" && s != "true" && s != "false" && s != "yes" && s != "no" && s != "on" && s != "off" && s != "y" && s != "n" {
		return s
	}
	return quote(s)
}

func formatConfidence(c float64) string {
	if math.IsNaN(c) || math.IsInf(c, 0) {
		// Never valid; write something Decode refuses rather than a YAML
		// special value it might misread.
		return `"invalid"`
	}
	return strconv.FormatFloat(c, 'f', -1, 64)
}

// canonBody is the body as a file holds it: see memory.CanonBody.
func canonBody(s string) string { return memory.CanonBody(s) }

// Decode parses the markdown file stem.md. The stem is the record's key and
// must already be a normalised key: "Foo Bar.md" is refused, not renamed.
// Without front matter the file is a semantic record whose description is
// its first heading (else its first line) as plain text; front matter
// without a description gets one the same way. Missing confidence is 0.5,
// missing type semantic.
//
// The record is not validated beyond its shape (Store.Import does that,
// secrets included). The error says what is wrong — size, binary content,
// bad YAML, an unknown field or type, a bad stem — and never quotes a value
// that could be a secret.
func Decode(stem string, data []byte) (memory.Record, error) {
	if len(data) > maxFileBytes {
		return memory.Record{}, fmt.Errorf("file is %d bytes; the limit is %d (256 KiB)", len(data), maxFileBytes)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return memory.Record{}, errors.New("file is binary (it contains NUL bytes)")
	}
	if !utf8.Valid(data) {
		return memory.Record{}, errors.New("file is not valid UTF-8")
	}
	if err := checkStem(stem); err != nil {
		return memory.Record{}, err
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	if bytes.Contains(data, []byte("\r\n")) {
		data = []byte(memory.UnixNewlines(string(data)))
	}

	var fm frontMatter
	rest := data
	if line, ok := opensFrontMatter(data); ok {
		fm.line = line
		parsed := false
		formats := []*frontmatter.Format{
			frontmatter.NewFormat("---", "---", func(b []byte, _ any) error { parsed = true; return fm.parse(b) }),
			frontmatter.NewFormat("---yaml", "---", func(b []byte, _ any) error { parsed = true; return fm.parse(b) }),
		}
		var err error
		rest, err = frontmatter.Parse(bytes.NewReader(data), nil, formats...)
		if err != nil {
			return memory.Record{}, err
		}
		if !parsed {
			return memory.Record{}, fmt.Errorf("front matter opened on line %d is never closed with ---", line)
		}
	}

	rec := memory.Record{
		ID: fm.id, Scope: scope.Project, Type: memory.Semantic, Key: stem,
		Body: canonBody(string(rest)), Tags: fm.tags, Confidence: 0.5,
		CreatedAt: fm.created, UpdatedAt: fm.updated, Source: memory.FromMarkdown, Metadata: fm.metadata,
	}
	if fm.typ != "" {
		rec.Type = memory.Type(fm.typ)
	}
	if fm.confidence != nil {
		rec.Confidence = *fm.confidence
	}
	if fm.description != nil {
		rec.Description = *fm.description
	} else {
		rec.Description = describe([]byte(rec.Body))
	}
	return rec, nil
}

func checkStem(stem string) error {
	k, err := memory.NormalizeKey("file name", stem)
	if errors.Is(err, memory.ErrSecretRejected) {
		return fmt.Errorf("file name looks like a secret; nothing was imported from it (rename or delete the file)")
	}
	if err != nil {
		return fmt.Errorf("file name is not a valid key: keys match %s (lower-case letters, digits, '.', '_', '-'; no '..')", memory.KeyRule)
	}
	if k != stem {
		return fmt.Errorf("file name is not a normalised key; rename it to %s.md", k)
	}
	return nil
}

// opensFrontMatter reports whether data starts, after blank lines, with a
// YAML front matter delimiter, and on which line. frontmatter.Parse treats
// an unclosed block as no front matter at all; a file that meant to have
// some must be refused instead of imported with its YAML as the body.
func opensFrontMatter(data []byte) (int, bool) {
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		switch s := string(bytes.TrimSpace(line)); s {
		case "":
			data = rest
			continue
		case "---", "---yaml":
			return n, true
		}
		return 0, false
	}
	return 0, false
}

// fields are the front matter fields in the order Encode writes them.
var fields = []string{"id", "type", "description", "confidence", "tags", "created", "updated", "metadata"}

var (
	ulidRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$`)
	uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

type frontMatter struct {
	line        int // of the opening delimiter, for messages
	id, typ     string
	description *string
	confidence  *float64
	tags        []string
	created     time.Time
	updated     time.Time
	metadata    map[string]string
}

// raw is the front matter decoded field by field. Each field has its own
// type whose UnmarshalYAML names the field when the value has the wrong
// shape: yaml.v2's own type errors quote the start of the value, which
// could be part of a secret. A string-kinded field keeps a scalar's text
// as written ("yes" stays "yes", not true).
type raw struct {
	ID          idField          `yaml:"id"`
	Type        typeField        `yaml:"type"`
	Description descriptionField `yaml:"description"`
	Confidence  confidenceField  `yaml:"confidence"`
	Tags        tagsField        `yaml:"tags"`
	Created     createdField     `yaml:"created"`
	Updated     updatedField     `yaml:"updated"`
	Metadata    metadataField    `yaml:"metadata"`
}

type (
	idField          string
	typeField        string
	descriptionField string
	confidenceField  float64
	tagsField        []string
	createdField     string
	updatedField     string
	metadataField    map[string]string
)

// decodeAs decodes into v, or fails with a message that names the field
// and the expected shape but not the value.
func decodeAs(u func(any) error, v any, msg string) error {
	if u(v) != nil {
		return errors.New("front matter " + msg)
	}
	return nil
}

const timeShape = "must be an RFC 3339 time such as 2024-05-01T10:00:00Z"

func (f *idField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*string)(f), "id must be a ULID or a UUID (or be left out for a new record)")
}

func (f *typeField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*string)(f), "type must be semantic or procedural")
}

func (f *descriptionField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*string)(f), "description must be a single string")
}

func (f *confidenceField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*float64)(f), "confidence must be a number between 0 and 1")
}

func (f *createdField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*string)(f), "created "+timeShape)
}

func (f *updatedField) UnmarshalYAML(u func(any) error) error {
	return decodeAs(u, (*string)(f), "updated "+timeShape)
}

func (f *tagsField) UnmarshalYAML(u func(any) error) error {
	if u((*[]string)(f)) == nil {
		return nil
	}
	// A single tag written without brackets.
	var one string
	if u(&one) == nil {
		*f = tagsField{one}
		return nil
	}
	return errors.New("front matter tags must be a list of strings")
}

func (f *metadataField) UnmarshalYAML(u func(any) error) error {
	var keys yaml.MapSlice
	if err := decodeAs(u, (*map[string]string)(f), "metadata must be a mapping of strings to strings"); err != nil {
		return err
	}
	if u(&keys) == nil && len(keys) != len(*f) {
		return errors.New("front matter metadata has a key twice")
	}
	return nil
}

// strings returns every string the front matter holds, keys included.
func (r *raw) strings() []string {
	out := []string{string(r.ID), string(r.Type), string(r.Description), string(r.Created), string(r.Updated)}
	out = append(out, r.Tags...)
	for k, v := range r.Metadata {
		out = append(out, k, v)
	}
	return out
}

// parse decodes front matter b into fm. It is frontmatter's unmarshal hook.
func (fm *frontMatter) parse(b []byte) error {
	if len(b) > maxFrontMatterBytes {
		return fmt.Errorf("front matter is %d bytes; the limit is %d (64 KiB)", len(b), maxFrontMatterBytes)
	}
	// First as a generic mapping, to refuse what is not one, unknown fields
	// and repeated fields (yaml.v2 would silently keep the last), and to
	// learn which fields are there: null counts as absent.
	var top yaml.MapSlice
	if err := yaml.Unmarshal(b, &top); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return errors.New("front matter must be a YAML mapping of fields")
		}
		return fmt.Errorf("front matter is not valid YAML: %s", fm.yamlReason(err))
	}
	set := map[string]bool{}
	seen := map[string]bool{}
	for _, item := range top {
		k, ok := item.Key.(string)
		if !ok || !slices.Contains(fields, k) {
			name := "a field"
			if ok {
				name = "field " + safeQuote(k)
			}
			return fmt.Errorf("front matter has %s this format does not know (fields: %s)", name, strings.Join(fields, ", "))
		}
		if seen[k] {
			return fmt.Errorf("front matter field %s appears twice", k)
		}
		seen[k] = true
		set[k] = item.Value != nil
	}

	var r raw
	if err := yaml.Unmarshal(b, &r); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// yaml.v2 takes a quoted "~" or "null" for null before asking
			// the field; its message would quote the value.
			return errors.New("front matter has a field whose value is of the wrong kind")
		}
		return err // one of the field errors above
	}
	for _, v := range r.strings() {
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return errors.New("front matter holds an escaped NUL or invalid UTF-8; memories are text")
		}
	}
	if id := string(r.ID); id != "" && !ulidRE.MatchString(id) && !uuidRE.MatchString(id) {
		return errors.New("front matter id must be a ULID or a UUID (or be left out for a new record)")
	}
	fm.id = string(r.ID)
	if set["type"] {
		t := strings.ToLower(strings.TrimSpace(string(r.Type)))
		switch memory.Type(t) {
		case memory.Semantic, memory.Procedural:
			fm.typ = t
		case memory.Working, memory.Episodic:
			return fmt.Errorf("front matter type %s cannot live in a markdown file (semantic or procedural only)", t)
		default:
			return fmt.Errorf("front matter type %s is unknown (want semantic or procedural)", safeQuote(string(r.Type)))
		}
	}
	if set["description"] {
		d := string(r.Description)
		fm.description = &d
	}
	if set["confidence"] {
		c := float64(r.Confidence)
		if math.IsNaN(c) || c < 0 || c > 1 {
			return errors.New("front matter confidence must be a number between 0 and 1")
		}
		fm.confidence = &c
	}
	if len(r.Tags) > 0 {
		fm.tags = r.Tags
	}
	var err error
	if fm.created, err = parseTime("created", string(r.Created)); err != nil {
		return err
	}
	if fm.updated, err = parseTime("updated", string(r.Updated)); err != nil {
		return err
	}
	if len(r.Metadata) > 0 {
		fm.metadata = r.Metadata
	}
	return nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlReason is yaml.v2's syntax error with its line counted in the file.
// A message quoting the document (an anchor name, say) is cut down to its
// line, in case what it quotes is a secret.
func (fm *frontMatter) yamlReason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		line = n + fm.line
		msg = msg[len(m[0]):]
	}
	if strings.ContainsAny(msg, "'\"`") || memory.ScanField("", msg) != nil {
		msg = "syntax error"
	}
	if line > 0 {
		return fmt.Sprintf("line %d: %s", line, msg)
	}
	return msg
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			// Files hold seconds; finer digits would not survive a rewrite.
			return t.UTC().Truncate(time.Second), nil
		}
	}
	return time.Time{}, fmt.Errorf("front matter %s %s", field, timeShape)
}

// safeQuote quotes s for an error message when it is short and does not
// look like a secret; otherwise it says the value is withheld.
func safeQuote(s string) string {
	if len(s) > 40 || !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r") || memory.ScanField("", s) != nil {
		return "(value withheld)"
	}
	return strconv.Quote(s)
}

// md parses bodies to find their title. goldmark parsers are safe for
// concurrent use and carry no configuration of ours.
var md = goldmark.New().Parser()

// describe returns the plain text of body's first heading, else of its first
// line, clipped to derivedDescriptionLen bytes.
func describe(body []byte) string {
	if len(body) > describeScan {
		// goldmark is quadratic on some inputs (deeply nested quotes or
		// lists, runs of "[a]("): a title is near the top, so parse only that.
		cut := body[:describeScan]
		if i := bytes.LastIndexByte(cut, '\n'); i > 0 {
			cut = cut[:i]
		}
		body = cut
	}
	doc := md.Parse(text.NewReader(body))
	var heading, para string
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.Kind() {
		case ast.KindHeading:
			if s := inlineText(n, body, false); s != "" {
				heading = s
				return ast.WalkStop, nil
			}
			return ast.WalkSkipChildren, nil
		case ast.KindParagraph, ast.KindTextBlock:
			if para == "" {
				para = inlineText(n, body, true)
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	d := heading
	if d == "" {
		d = para
	}
	if d == "" {
		// Only code or HTML: its first non-blank line is the best title.
		for _, line := range strings.Split(string(body), "\n") {
			if d = strings.Join(strings.Fields(line), " "); d != "" {
				break
			}
		}
	}
	return clipWords(d, derivedDescriptionLen)
}

// inlineText flattens n's inline content to plain text: emphasis, links and
// code lose their markup, raw HTML is dropped. With firstLine it stops at
// the first line break.
func inlineText(n ast.Node, src []byte, firstLine bool) string {
	var b strings.Builder
	ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || c == n {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				if firstLine {
					return ast.WalkStop, nil
				}
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.Label(src))
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.Join(strings.Fields(b.String()), " ")
}

// clipWords shortens s to at most n bytes, ellipsis included, cutting on
// a rune boundary, and at a word boundary when there is one in the second
// half.
func clipWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := s[:n-len(ellipsis)]
	for len(cut) > 0 && !utf8.RuneStart(s[len(cut)]) {
		cut = cut[:len(cut)-1]
	}
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
		cut = cut[:i]
	}
	return cut + ellipsis
}
