//go:build !cgo

package memory

import (
	"database/sql"
	"errors"
)

// walHeader is not read without cgo (nor is SQLite): callers ask the
// database.
type walHeader struct{}

func logIndexOf(*sql.Conn) (walHeader, error) {
	return walHeader{}, errors.New("log index not readable without cgo")
}

func (walHeader) read() (changeToken, bool) { return changeToken{}, false }
