// Package memory holds the record model and the store that keeps it, over
// a Backend it defines: memory/sqlite's embedded file by default, or
// memory/postgres's database that the replicas of a team server share. The
// store's statements are written here, once, for both (see backend.go).
//
// Every write goes through Store.Put (and Store.Update, Store.Delete, which
// share its checks): keys are normalised and validated, every field is scanned
// for secrets, and expiry defaults are applied, so nothing reaches the database
// unchecked. The *sql.DB leaves this package only through Store.DB, for
// the packages over it that keep tables of their own (see seam.go):
// memory/semantic (the embedding queue and vectors) and memory/token
// (bearer tokens). They write no record: their statements join the
// records table to their own at most, and whole records are read through
// Store.Found.
//
// It imports scope, secrets and its pure engines memory/index (keywords)
// and memory/excerpt (hit excerpts), and nothing else of this module; no
// package it imports may import it. It imports database/sql but no
// driver: only its tests import memory/sqlite and memory/postgres.
package memory

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
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
// CodeInvalidArgument naming field, not s, for anything else.
func ParseType(field, s string) (Type, error) {
	t := Type(strings.ToLower(strings.TrimSpace(s)))
	switch t {
	case Working, Episodic, Semantic, Procedural:
		return t, nil
	}
	return "", Errorf(CodeInvalidArgument, field, "is unknown (want working, episodic, semantic or procedural)")
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

// Source says where a record came from: one of the From constants.
type Source string

const (
	FromTool     Source = "tool"
	FromMarkdown Source = "markdown"
	FromCapture  Source = "capture"
	FromCLI      Source = "cli"
	FromSync     Source = "sync"
)

// Limits on field sizes, and on a use count an import may carry.
const (
	MaxKeyLen         = 100
	MaxBodyBytes      = 64 << 10
	MaxDescriptionLen = 500
	MaxTags           = 32
	MaxTagLen         = 64
	MaxMetadata       = 32
	MaxMetadataBytes  = 4 << 10
	MaxUseCount       = 1 << 40
)

// MaxTTL is the longest time to live a record may be given: a hundred
// years, far from where an expiry would overflow into the past.
const MaxTTL = 100 * 365 * 24 * time.Hour

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

// NormalizeKey lower-cases s, trims it and turns runs of spaces into a
// single '-', then checks the result against KeyRule. A key holding a
// control character (a newline, a tab) is refused rather than rewritten,
// and so is one shaped like a secret, before and after lower-casing: a key
// names a file that git tracks. The error is an *Error with code
// CodeInvalidArgument, or CodeSecretRejected, naming field; it never holds
// s.
func NormalizeKey(field, s string) (string, error) {
	if err := ScanKey(field, s); err != nil {
		return "", err
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", Errorf(CodeInvalidArgument, field, "holds a control character (a newline, a tab or the like); a key is one line")
	}
	k := strings.ToLower(strings.TrimSpace(s))
	if strings.ContainsAny(k, " \t\n\f\r") { // the regexp costs more than the rest
		k = spaces.ReplaceAllString(k, "-")
	}
	if k == "" {
		return "", Errorf(CodeInvalidArgument, field, "is empty")
	}
	if !keyRE.MatchString(k) || k == "." || k == ".." || strings.Contains(k, "..") {
		return "", Errorf(CodeInvalidArgument, field, "does not match %s (lower-case letters, digits, '.', '_', '-'; at most %d characters; no '..')", KeyRule, MaxKeyLen)
	}
	if windowsDevice.MatchString(k) {
		return "", Errorf(CodeInvalidArgument, field, "is a device name on Windows (con, prn, aux, nul, com0-9, lpt0-9), where its markdown file could not be checked out; choose another key")
	}
	// Lower-casing loses nothing of an AWS key id: the stored key must not
	// hold one in any case.
	if err := ScanKey(field, strings.ToUpper(k)); err != nil {
		return "", err
	}
	return k, nil
}

// maxScannedKey bounds the input ScanKey looks at piece by piece; a longer
// key is refused by the key rule whatever it holds, and is scanned whole.
const maxScannedKey = 4 * MaxKeyLen

// minSecretLen is shorter than any token shape the scanner knows, so that
// ScanKey can skip shorter pieces.
const minSecretLen = 16

// ScanKey reports a secret in a key, or in any run of its words: in a
// slug, '-', '_' and '.' glue a token to the words around it ("prod-AKIA…"),
// where in prose they would make it part of a longer identifier that the
// secret scanner rightly leaves alone. The error names field and the rule,
// never the value.
func ScanKey(field, s string) error {
	if err := ScanField(field, s); err != nil || len(s) > maxScannedKey {
		return err
	}
	var cuts []int
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("-_. ", s[i]) >= 0 {
			cuts = append(cuts, i)
		}
	}
	starts := append([]int{0}, cuts...)
	ends := append(cuts, len(s))
	for a, i := range starts {
		if a > 0 {
			i++ // after the separator
		}
		for _, j := range ends {
			if j-i < minSecretLen || (i == 0 && j == len(s)) {
				continue
			}
			if err := ScanField(field, s[i:j]); err != nil {
				return err
			}
		}
	}
	return nil
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
	// Unsynced marks a conflict that is only a markdown file changed
	// after the last sync looked at it: once a sync has imported the
	// change, the same call may go through.
	Unsynced bool
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
