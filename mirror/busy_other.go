//go:build !windows

package mirror

// busy reports whether err is a transient refusal to rename or remove a
// file another process holds open. Outside Windows an open file never stops
// either, so no error is.
func busy(error) bool { return false }
