package memory

import (
	"context"
	"fmt"
	"time"

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

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE 1 = 0`).Scan(&one); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
