package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestNewGivesAnEmptyDatabaseOfItsOwn(t *testing.T) {
	a, b := New(t), New(t)
	if a == b {
		t.Fatalf("two tests share %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("new database has %d tables", n)
	}
}
