//go:build !cgo

package memory

// vfsParam is nothing without cgo (nor is SQLite).
func vfsParam() string { return "" }
