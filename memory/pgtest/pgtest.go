// Package pgtest gives tests a fresh PostgreSQL database of their own, on
// the server named by MEMORY_MCP_TEST_POSTGRES (a postgres:// URL of a role
// that may create databases; `.ci/postgres` starts a throwaway cluster and
// prints it). Where it is not set, a test that needs PostgreSQL is skipped,
// except under CI (the CI environment variable set), where it fails: CI
// must never pass by skipping.
//
// It imports the standard library and pgx only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the variable holding the server's URL.
const Env = "MEMORY_MCP_TEST_POSTGRES"

// ServerURL returns the URL of the test server, skipping tb when there is
// none (failing it under CI).
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(Env)
	if u == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set: CI must run the PostgreSQL tests (eval \"$(.ci/postgres)\")", Env)
		}
		tb.Skipf("%s is not set; eval \"$(.ci/postgres)\" to run the PostgreSQL tests", Env)
	}
	return u
}

// New creates an empty database for tb and returns its URL; the database is
// dropped when tb ends, whoever is still connected to it.
func New(tb testing.TB) string {
	tb.Helper()
	server := ServerURL(tb)
	var b [6]byte
	rand.Read(b[:])
	name := "memtest_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, server, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, server, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		tb.Fatalf("%s: %v", Env, err)
	}
	u.Path = "/" + name
	return u.String()
}

func admin(ctx context.Context, server, stmt string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", Env, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}
