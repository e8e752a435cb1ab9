package memory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"prom.codes/memory-mcp/scope"
)

// TokenPrefix starts every bearer token.
const TokenPrefix = "mem_"

// Token is a bearer token as the store keeps it: who it speaks for, never
// the token itself.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name,omitempty"`
	Tenant     string     `json:"tenant"`
	User       string     `json:"user"`
	Profile    string     `json:"profile"`
	Admin      bool       `json:"admin"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Identity is the project identity the token's profile works in.
func (t Token) Identity() scope.Identity { return TeamIdentity(t.Tenant, t.User, t.Profile) }

// Project is what the token's calls write through: its identity, no
// markdown mirror, and the system level read-only unless it is an admin's.
func (t Token) Project() Project {
	p := Project{ID: t.Identity()}
	if !t.Admin {
		p.ReadOnly = []scope.Level{scope.System}
	}
	return p
}

// DefaultProfile is the profile of a token made without one.
const DefaultProfile = "default"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// NewToken is what a token is made for.
type NewToken struct {
	Name, Tenant, User, Profile string
	Admin                       bool
}

// CreateToken makes a token for nt and returns it with its row. The token is
// returned only here: the store keeps its hash. Errors: CodeInvalidArgument
// for a missing or malformed tenant, user, profile or name.
func (s *Store) CreateToken(ctx context.Context, nt NewToken) (string, Token, error) {
	if nt.Profile == "" {
		nt.Profile = DefaultProfile
	}
	for _, f := range []struct{ field, v string }{{"tenant", nt.Tenant}, {"user", nt.User}, {"profile", nt.Profile}} {
		if !nameRE.MatchString(f.v) {
			return "", Token{}, Errorf(CodeInvalidArgument, f.field, "must match %s", nameRE.String()[1:len(nameRE.String())-1])
		}
	}
	if len(nt.Name) > 200 || !utf8.ValidString(nt.Name) || strings.IndexFunc(nt.Name, unicode.IsControl) >= 0 {
		return "", Token{}, Errorf(CodeInvalidArgument, "name", "must be one line of valid UTF-8, at most 200 bytes")
	}
	var raw [32]byte
	rand.Read(raw[:])
	secret := TokenPrefix + hex.EncodeToString(raw[:])
	var idb [6]byte
	rand.Read(idb[:])
	t := Token{
		ID: "tok_" + hex.EncodeToString(idb[:]), Name: nt.Name, Tenant: nt.Tenant, User: nt.User,
		Profile: nt.Profile, Admin: nt.Admin, CreatedAt: s.now().UTC(),
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		admin := 0 // the schema's flags are integers
		if t.Admin {
			admin = 1
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, hash, name, tenant, "user", profile, admin, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			t.ID, tokenHash(secret), t.Name, t.Tenant, t.User, t.Profile, admin, t.CreatedAt.UnixNano())
		return err
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	return secret, t, nil
}

func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

const tokenCols = `id, name, tenant, "user", profile, admin, created_at, last_used_at`

func scanToken(row scanner) (Token, error) {
	var t Token
	var created int64
	var last sql.NullInt64
	if err := row.Scan(&t.ID, &t.Name, &t.Tenant, &t.User, &t.Profile, &t.Admin, &created, &last); err != nil {
		return Token{}, err
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	t.LastUsedAt = fromNanos(last)
	return t, nil
}

// Tokens lists every token, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken deletes the token whose id, or value, is idOrToken, and
// returns what it was. Errors: ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, idOrToken string) (Token, error) {
	var t Token
	if !storableText(idOrToken) {
		return t, ErrNotFound // no token's id or value holds these bytes
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `DELETE FROM tokens WHERE id = $1 OR hash = $2 RETURNING `+tokenCols, idOrToken, tokenHash(idOrToken)))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("revoke token: %w", err)
	}
	return t, err
}

// usedEvery is how stale a token's last use may get: noting every request
// would make each one a write.
const usedEvery = time.Minute

// Authenticate returns the token whose value is secret, and notes its use.
// Errors: ErrNotFound for anything that is not a live token, whatever the
// reason.
func (s *Store) Authenticate(ctx context.Context, secret string) (Token, error) {
	return retry(ctx, s, func() (Token, error) { return s.authenticate1(ctx, secret) })
}

func (s *Store) authenticate1(ctx context.Context, secret string) (Token, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) != len(TokenPrefix)+64 {
		return Token{}, ErrNotFound
	}
	h := tokenHash(secret)
	var stored string
	t, err := scanToken(rowWithHash{s.db.QueryRowContext(ctx, `SELECT `+tokenCols+`, hash FROM tokens WHERE hash = $1`, h), &stored})
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("authenticate: %w", err)
	}
	// The index found it; compare in constant time all the same.
	if subtle.ConstantTimeCompare([]byte(stored), []byte(h)) != 1 {
		return Token{}, ErrNotFound
	}
	now := s.now().UTC()
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= usedEvery {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE tokens SET last_used_at = $1 WHERE id = $2`, now.UnixNano(), t.ID)
			return err
		})
		if err != nil {
			return Token{}, fmt.Errorf("authenticate: %w", err)
		}
		t.LastUsedAt = &now
	}
	return t, nil
}

// rowWithHash scans a token row followed by its hash.
type rowWithHash struct {
	row  *sql.Row
	hash *string
}

func (r rowWithHash) Scan(dest ...any) error { return r.row.Scan(append(dest, r.hash)...) }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE 1 = 0`).Scan(&one); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
