package storetest_test

import (
	"errors"
	"path/filepath"
	"testing"

	"prom.codes/memory-mcp/memory/storetest"
)

func sqliteDB(t *testing.T) string { return filepath.Join(t.TempDir(), "memory.db") }

func TestSQLite(t *testing.T) { storetest.Run(t, sqliteDB) }

func TestPostgres(t *testing.T) {
	storetest.PostgresServer(t)
	storetest.Run(t, func(t *testing.T) string { return storetest.NewPostgres(t) })
}

// The same corpus and queries give the same hits, in the same order with
// the same scores, on both backends.
func TestSearchSameOnBothBackends(t *testing.T) {
	lite := storetest.SearchResults(t, storetest.Open(t, sqliteDB(t), storetest.NewClock()))
	pg := storetest.SearchResults(t, storetest.Open(t, storetest.NewPostgres(t), storetest.NewClock()))
	for i := range lite {
		if lite[i] != pg[i] {
			t.Errorf("sqlite   %s\npostgres %s", lite[i], pg[i])
		}
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
