// Package memory holds the record model and the SQLite store that keeps it.
//
// Every write goes through Store.Put (and Store.Update, Store.Delete, which
// share its checks): keys are normalised and validated, every field is scanned
// for secrets, and expiry defaults are applied, so nothing reaches the database
// unchecked. The *sql.DB never leaves this package.
//
// It imports scope, secrets and its pure engines memory/index (keywords) and
// memory/vector (vectors), and nothing else of this module; the embeddings
// endpoint reaches it through the Embedder interface.
package memory

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"prom.codes/memory-mcp/scope"
)

// Type is what kind of memory a record holds.
type Type string

// The four types.
const (
	Working    Type = "working"    // scratch notes for the current task
	Episodic   Type = "episodic"   // what happened in one session
	Semantic   Type = "semantic"   // durable facts
	Procedural Type = "procedural" // repeatable how-to
)

// Types lists every type in a stable order.
var Types = []Type{Working, Episodic, Semantic, Procedural}

// ParseType validates a type name. It returns an *Error with code
// CodeInvalidArgument naming field for anything else.
func ParseType(field, s string) (Type, error) {
	t := Type(strings.ToLower(strings.TrimSpace(s)))
	switch t {
	case Working, Episodic, Semantic, Procedural:
		return t, nil
	}
	return "", Errorf(CodeInvalidArgument, field, "unknown type %q (want working, episodic, semantic or procedural)", s)
}

// DefaultTTL is how long a record of type t lives when no ttl is given; zero
// means forever.
func DefaultTTL(t Type) time.Duration {
	switch t {
	case Working:
		return 24 * time.Hour
	case Episodic:
		return 30 * 24 * time.Hour
	}
	return 0
}

// Source says where a record came from.
type Source string

// The sources.
const (
	FromTool     Source = "tool"
	FromMarkdown Source = "markdown"
	FromCapture  Source = "capture"
	FromCLI      Source = "cli"
)

// Limits on field sizes.
const (
	MaxKeyLen         = 100
	MaxBodyBytes      = 64 << 10
	MaxDescriptionLen = 500
	MaxTags           = 32
	MaxTagLen         = 64
	MaxMetadata       = 32
	MaxMetadataBytes  = 4 << 10
)

// Record is one memory.
type Record struct {
	ID             string            `json:"id"`
	Scope          scope.Level       `json:"scope"`
	Type           Type              `json:"type"`
	Key            string            `json:"key"`
	Description    string            `json:"description,omitempty"`
	Body           string            `json:"body,omitempty"`
	Tags           []string          `json:"tags,omitempty"`
	Confidence     float64           `json:"confidence"`
	UseCount       int64             `json:"use_count"`
	LastAccessedAt *time.Time        `json:"last_accessed_at,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty"`
	SessionID      string            `json:"session_id,omitempty"`
	Source         Source            `json:"source,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

// ScopeLevel implements scope.Candidate.
func (r Record) ScopeLevel() scope.Level { return r.Scope }

// Name implements scope.Candidate.
func (r Record) Name() (string, string) { return string(r.Type), r.Key }

// Mirrored reports whether the record belongs in the markdown mirror: project
// scope, semantic or procedural.
func (r Record) Mirrored() bool {
	return r.Scope == scope.Project && (r.Type == Semantic || r.Type == Procedural)
}

// KeyRule is the shape every key must have after normalisation.
const KeyRule = "[a-z0-9][a-z0-9._-]{0,99}"

var keyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

var spaces = regexp.MustCompile(`\s+`)

// windowsDevice matches keys whose file Windows reserves for a device,
// whatever follows the first dot: con.md cannot be checked out there, and
// one such file breaks the checkout of the whole repository.
var windowsDevice = regexp.MustCompile(`^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)

// NormalizeKey lower-cases s, trims it and turns runs of white space into a
// single '-', then checks the result against KeyRule. The error is an *Error
// with code CodeInvalidArgument naming field.
func NormalizeKey(field, s string) (string, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = spaces.ReplaceAllString(k, "-")
	if k == "" {
		return "", Errorf(CodeInvalidArgument, field, "is empty")
	}
	if !keyRE.MatchString(k) || k == "." || k == ".." || strings.Contains(k, "..") {
		return "", Errorf(CodeInvalidArgument, field, "%q does not match %s (lower-case letters, digits, '.', '_', '-'; at most %d characters; no '..')", clip(s, 40), KeyRule, MaxKeyLen)
	}
	if windowsDevice.MatchString(k) {
		return "", Errorf(CodeInvalidArgument, field, "%q is a device name on Windows (con, prn, aux, nul, com0-9, lpt0-9), where its markdown file could not be checked out; choose another key", clip(s, 40))
	}
	return k, nil
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Code is a stable error code that the tool layer puts at the start of an error.
type Code string

// The codes.
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeNotFound        Code = "not_found"
	CodeConflict        Code = "conflict"
	CodeSecretRejected  Code = "secret_rejected"
	CodeTooLarge        Code = "too_large"
	CodeInternal        Code = "internal"
)

// Error is a domain failure with a stable code and the field it concerns.
type Error struct {
	Code  Code
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Msg)
	}
	return fmt.Sprintf("%s: %s %s", e.Code, e.Field, e.Msg)
}

// Is lets errors.Is(err, ErrNotFound) match any not_found *Error, and so on
// for the other sentinels.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Field == "" && t.Code == e.Code
}

// Errorf builds an *Error.
func Errorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrConflict        = &Error{Code: CodeConflict}
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrSecretRejected  = &Error{Code: CodeSecretRejected}
	ErrTooLarge        = &Error{Code: CodeTooLarge}
)
