package storetest

// The PostgreSQL tests make a fresh database each on the server named by
// MEMORY_MCP_TEST_POSTGRES (a postgres:// URL of a role that may create
// databases; `.ci/postgres` starts a throwaway cluster and prints it).
// Where it is not set, a test that needs PostgreSQL is skipped, except
// under CI (the CI environment variable set), where it fails: CI must
// never pass by skipping.

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

// PostgresEnv names the variable holding the URL of the PostgreSQL server
// the tests make their databases on.
const PostgresEnv = "MEMORY_MCP_TEST_POSTGRES"

// PostgresServer returns the URL of that server, skipping tb when there is
// none (failing it under CI).
func PostgresServer(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(PostgresEnv)
	if u == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set: CI must run the PostgreSQL tests (eval \"$(.ci/postgres)\")", PostgresEnv)
		}
		tb.Skipf("%s is not set; eval \"$(.ci/postgres)\" to run the PostgreSQL tests", PostgresEnv)
	}
	return u
}

// NewPostgres creates an empty database for tb and returns its URL; the
// database is dropped when tb ends, whoever is still connected to it.
func NewPostgres(tb testing.TB) string {
	tb.Helper()
	server := PostgresServer(tb)
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
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

// admin runs stmt on the server, outside any test database.
func admin(ctx context.Context, server, stmt string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", PostgresEnv, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}
