// Package token keeps the bearer tokens of a team server in the store's
// tokens table: it makes them, lists them, revokes them and
// authenticates a request's token. The store keeps only a token's hash.
//
// It may import memory, whose Store it works over (through DB, WriteTx
// and Now) and whose Token it returns; memory must not import it.
package token

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

	"prom.codes/memory-mcp/memory"
)

// Store is the tokens of a memory.Store.
type Store struct{ st *memory.Store }

// Of returns the tokens of st.
func Of(st *memory.Store) Store { return Store{st} }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// Spec is what a token is made for.
type Spec struct {
	Name, Tenant, User, Profile string
	Admin                       bool
}

// Create makes a token for nt and returns it with its row. The token is
// returned only here: the store keeps its hash. Errors: CodeInvalidArgument
// for a missing or malformed tenant, user, profile or name.
func (s Store) Create(ctx context.Context, nt Spec) (string, memory.Token, error) {
	if nt.Profile == "" {
		nt.Profile = memory.DefaultProfile
	}
	for _, f := range []struct{ field, v string }{{"tenant", nt.Tenant}, {"user", nt.User}, {"profile", nt.Profile}} {
		if !nameRE.MatchString(f.v) {
			return "", memory.Token{}, memory.Errorf(memory.CodeInvalidArgument, f.field, "must match %s", nameRE.String()[1:len(nameRE.String())-1])
		}
	}
	if len(nt.Name) > 200 || !utf8.ValidString(nt.Name) || strings.IndexFunc(nt.Name, unicode.IsControl) >= 0 {
		return "", memory.Token{}, memory.Errorf(memory.CodeInvalidArgument, "name", "must be one line of valid UTF-8, at most 200 bytes")
	}
	var raw [32]byte
	rand.Read(raw[:])
	secret := memory.TokenPrefix + hex.EncodeToString(raw[:])
	var idb [6]byte
	rand.Read(idb[:])
	t := memory.Token{
		ID: "tok_" + hex.EncodeToString(idb[:]), Name: nt.Name, Tenant: nt.Tenant, User: nt.User,
		Profile: nt.Profile, Admin: nt.Admin, CreatedAt: s.st.Now().UTC(),
	}
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		admin := 0 // the schema's flags are integers
		if t.Admin {
			admin = 1
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, hash, name, tenant, "user", profile, admin, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			t.ID, tokenHash(secret), t.Name, t.Tenant, t.User, t.Profile, admin, t.CreatedAt.UnixNano())
		return err
	})
	if err != nil {
		return "", memory.Token{}, fmt.Errorf("create token: %w", err)
	}
	return secret, t, nil
}

func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

const tokenCols = `id, name, tenant, "user", profile, admin, created_at, last_used_at`

func scanToken(row interface{ Scan(...any) error }) (memory.Token, error) {
	var t memory.Token
	var created int64
	var last sql.NullInt64
	if err := row.Scan(&t.ID, &t.Name, &t.Tenant, &t.User, &t.Profile, &t.Admin, &created, &last); err != nil {
		return memory.Token{}, err
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	if last.Valid {
		u := time.Unix(0, last.Int64).UTC()
		t.LastUsedAt = &u
	}
	return t, nil
}

// List lists every token, oldest first.
func (s Store) List(ctx context.Context) ([]memory.Token, error) {
	rows, err := s.st.DB().QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []memory.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Revoke deletes the token whose id, or value, is idOrToken, and
// returns what it was. Errors: memory.ErrNotFound.
func (s Store) Revoke(ctx context.Context, idOrToken string) (memory.Token, error) {
	var t memory.Token
	if !utf8.ValidString(idOrToken) || strings.ContainsRune(idOrToken, 0) {
		return t, memory.ErrNotFound // no token's id or value holds these bytes
	}
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `DELETE FROM tokens WHERE id = $1 OR hash = $2 RETURNING `+tokenCols, idOrToken, tokenHash(idOrToken)))
		if errors.Is(err, sql.ErrNoRows) {
			return memory.ErrNotFound
		}
		return err
	})
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		err = fmt.Errorf("revoke token: %w", err)
	}
	return t, err
}

// usedEvery is how stale a token's last use may get: noting every request
// would make each one a write.
const usedEvery = time.Minute

// Authenticate returns the token whose value is secret, and notes its use.
// Errors: memory.ErrNotFound for anything that is not a live token, whatever the
// reason.
func (s Store) Authenticate(ctx context.Context, secret string) (memory.Token, error) {
	return memory.Retry(ctx, s.st, func() (memory.Token, error) { return s.authenticate1(ctx, secret) })
}

func (s Store) authenticate1(ctx context.Context, secret string) (memory.Token, error) {
	if !strings.HasPrefix(secret, memory.TokenPrefix) || len(secret) != len(memory.TokenPrefix)+64 {
		return memory.Token{}, memory.ErrNotFound
	}
	h := tokenHash(secret)
	var stored string
	t, err := scanToken(rowWithHash{s.st.DB().QueryRowContext(ctx, `SELECT `+tokenCols+`, hash FROM tokens WHERE hash = $1`, h), &stored})
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Token{}, memory.ErrNotFound
	}
	if err != nil {
		return memory.Token{}, fmt.Errorf("authenticate: %w", err)
	}
	// The index found it; compare in constant time all the same.
	if subtle.ConstantTimeCompare([]byte(stored), []byte(h)) != 1 {
		return memory.Token{}, memory.ErrNotFound
	}
	now := s.st.Now().UTC()
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= usedEvery {
		err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE tokens SET last_used_at = $1 WHERE id = $2`, now.UnixNano(), t.ID)
			return err
		})
		if err != nil {
			return memory.Token{}, fmt.Errorf("authenticate: %w", err)
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
