// Package scope names the four levels of the scope chain, derives a project's
// identity from its workspace root and resolves which record wins when several
// scopes hold the same type and key.
//
// It is a leaf: standard library only, and no I/O beyond what Root needs to
// find the workspace (the environment, the working directory and git's layout).
package scope

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// Level is one rung of the scope chain. Lower values are narrower.
type Level int

// The chain, narrowest first.
const (
	Project Level = iota
	Workspace
	Tenant
	System
)

// Levels lists the chain narrowest first.
var Levels = []Level{Project, Workspace, Tenant, System}

var names = [...]string{"project", "workspace", "tenant", "system"}

// String returns the level's lower-case name.
func (l Level) String() string {
	if l < Project || l > System {
		return fmt.Sprintf("level(%d)", int(l))
	}
	return names[l]
}

// ErrUnknown is returned by Parse for a name that is not a level.
var ErrUnknown = errors.New("unknown scope")

// Parse turns a level's name into a Level. The empty string is not accepted;
// callers supply their own default.
func Parse(s string) (Level, error) {
	for i, n := range names {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want project, workspace, tenant or system)", ErrUnknown, s)
}

// MarshalText implements encoding.TextMarshaler.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Narrower reports whether l wins over m when both hold the same type and key.
func (l Level) Narrower(m Level) bool { return l < m }

// Identity is a project's stable identity: a hash of its cleaned absolute
// workspace root. Two roots never share an identity.
type Identity string

// IdentityOf hashes root, which must be absolute, in the form identityPath
// gives it on this system.
func IdentityOf(root string) Identity {
	sum := sha256.Sum256([]byte(identityPath(root, runtime.GOOS == "windows")))
	return Identity(hex.EncodeToString(sum[:16]))
}

// identityPath is the spelling of root that IdentityOf hashes.
//
// Outside Windows it is the cleaned path, byte for byte: Linux file systems
// (and case-sensitive APFS volumes) can hold both Repo and repo, so folding
// case could merge two projects.
//
// On Windows, where paths name files without regard to case or separator,
// two spellings of one directory are one project: the path is lower-cased
// (the drive letter too), both / and \ separate, and it is cleaned as
// filepath.Clean does there, keeping the \ of a drive root and the leading
// \\ of a UNC path. So C:\Repo, c:\repo\ and C:/Repo/./x/.. are one root.
func identityPath(root string, windows bool) string {
	if !windows {
		return path.Clean(root)
	}
	p := strings.ToLower(strings.ReplaceAll(root, `\`, "/"))
	prefix := ""
	switch {
	case strings.HasPrefix(p, "//"): // \\server\share\...
		prefix, p = "/", p[1:]
	case len(p) >= 2 && p[1] == ':':
		prefix, p = p[:2], p[2:]
	}
	return strings.ReplaceAll(prefix+path.Clean("/"+p), "/", `\`)
}

// Root finds the workspace root: env (PROMETHEUS_WORKSPACE_ROOT) when set,
// else the git top-level above wd, else wd itself. The result is absolute and
// clean. Symlinks are resolved so that two spellings of one directory give one
// identity.
func Root(env, wd string) (string, error) {
	dir := env
	if dir == "" {
		if wd == "" {
			var err error
			if wd, err = os.Getwd(); err != nil {
				return "", fmt.Errorf("working directory: %w", err)
			}
		}
		dir = gitTop(wd)
		if dir == "" {
			dir = wd
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace root %s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return filepath.Clean(abs), nil
}

// gitTop walks up from dir to the first directory holding .git (a directory,
// or a file for worktrees and submodules). It does not run git.
func gitTop(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
