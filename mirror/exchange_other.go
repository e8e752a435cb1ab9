//go:build !linux

package mirror

import "os"

// exchange reports that files cannot be swapped in one step here; the
// caller holds the file aside and renames (see Dir.write).
func exchange(r *os.Root, tmp, name string) (bool, error) { return false, nil }

// renameNoReplace renames tmp to name.
func renameNoReplace(r *os.Root, tmp, name string) error { return r.Rename(tmp, name) }
