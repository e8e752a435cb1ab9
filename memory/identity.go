package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"prom.codes/memory-mcp/scope"
)

// teamPrefix starts every team identity. A workspace root's identity is bare
// hex, so the two never meet.
const teamPrefix = "team:"

// TeamIdentity is the project identity of a profile on a team server: the
// profile's own memory. It is built so that the buckets of the broader
// levels are its prefixes: the user's memory (workspace) shared by all their
// profiles, and the tenant's. Names are hashed, one level at a time, so no
// name can be spelled to reach into another's bucket.
func TeamIdentity(tenant, user, profile string) scope.Identity {
	return scope.Identity(teamPrefix + part("tenant", tenant) + "/" + part("user", user) + "/" + part("profile", profile))
}

func part(level, name string) string {
	sum := sha256.Sum256([]byte(level + "\x00" + name))
	return hex.EncodeToString(sum[:12])
}

// Bucket is the partition where records of level l live for project p.
//
// For a workspace root's identity the project's records live under the
// identity and workspace, tenant and system records share the global bucket
// "". For a team identity each level has its own bucket (the identity cut
// back to that level) and only system records are global.
func Bucket(p scope.Identity, l scope.Level) string {
	s := string(p)
	if l == scope.Project {
		return s
	}
	if !strings.HasPrefix(s, teamPrefix) || l == scope.System {
		return ""
	}
	parts := strings.SplitN(strings.TrimPrefix(s, teamPrefix), "/", 3)
	if len(parts) != 3 {
		return ""
	}
	if l == scope.Workspace {
		return teamPrefix + parts[0] + "/" + parts[1]
	}
	return teamPrefix + parts[0]
}

// globalFrom is the narrowest level whose records live in the global bucket
// for p: a team identity sees only system records there, so that records a
// workspace root's server keeps there for its own workspace and tenant levels
// stay out of every team's sight.
func globalFrom(p scope.Identity) scope.Level {
	if strings.HasPrefix(string(p), teamPrefix) {
		return scope.System
	}
	return scope.Workspace
}

// writable checks that p may write a record of level l.
func (p Project) writable(l scope.Level) error {
	for _, ro := range p.ReadOnly {
		if ro == l {
			return Errorf(CodeInvalidArgument, "scope", "%s memory is read-only here: writing it takes an admin token", l)
		}
	}
	return nil
}
