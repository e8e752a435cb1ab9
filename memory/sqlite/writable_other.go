//go:build !unix

package sqlite

// writable leaves it to SQLite to find that path cannot be written.
func writable(string) error { return nil }
