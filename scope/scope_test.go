package scope

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Level
		ok   bool
	}{
		{"project", Project, true}, {"Workspace", Workspace, true}, {" tenant ", Tenant, true}, {"system", System, true},
		{"", 0, false}, {"global", 0, false}, {"projects", 0, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("Parse(%q) = %v, %v", tc.in, got, err)
		}
	}
	if Project.String() != "project" || System.String() != "system" || Level(9).String() != "level(9)" {
		t.Error("String")
	}
	if !Project.Narrower(System) || System.Narrower(Tenant) {
		t.Error("Narrower")
	}
}

func TestIdentity(t *testing.T) {
	if IdentityOf("/a/b") != IdentityOf("/a/b/") || IdentityOf("/a/b") != IdentityOf("/a/./c/../b") {
		t.Error("cleaning does not give one identity")
	}
	if IdentityOf("/a/b") == IdentityOf("/a/c") {
		t.Error("two roots share an identity")
	}
}

// TestIdentityPath pins the rule for both kinds of system, whatever the
// tests run on: Windows folds case and separators, the others do not.
func TestIdentityPath(t *testing.T) {
	tests := []struct {
		in      string
		windows bool
		want    string
	}{
		{`/home/me/Repo`, false, `/home/me/Repo`},
		{`/home/me/Repo/`, false, `/home/me/Repo`},
		{`/home/me/./x/../Repo`, false, `/home/me/Repo`},
		{`//home//me/Repo`, false, `/home/me/Repo`},
		{`/`, false, `/`},
		{`/home/me/repo\x`, false, `/home/me/repo\x`}, // a backslash is a name's byte there
		{`C:\Repo`, true, `c:\repo`},
		{`c:\repo\`, true, `c:\repo`},
		{`C:/Repo/./x/..`, true, `c:\repo`},
		{`C:\Users\Me\\Code\Repo`, true, `c:\users\me\code\repo`},
		{`C:\`, true, `c:\`},
		{`D:\Repo`, true, `d:\repo`},
		{`\\Server\Share\Repo\`, true, `\\server\share\repo`},
		{`//server/share/repo`, true, `\\server\share\repo`},
	}
	for _, tt := range tests {
		if got := identityPath(tt.in, tt.windows); got != tt.want {
			t.Errorf("identityPath(%q, windows=%v) = %q, want %q", tt.in, tt.windows, got, tt.want)
		}
	}
	if identityPath(`C:\Repo`, true) == identityPath(`D:\Repo`, true) {
		t.Error("two drives share a root")
	}
	if identityPath(`/a/Repo`, false) == identityPath(`/a/repo`, false) {
		t.Error("case folded outside Windows")
	}
}

// TestIdentityOnThisSystem: IdentityOf uses the rule of the system it runs
// on, so that C:\Repo and c:\repo\ are one project on Windows only.
func TestIdentityOnThisSystem(t *testing.T) {
	// An identity outside Windows is the hash of the cleaned path as it
	// always was: the projects of existing databases keep their records.
	if runtime.GOOS != "windows" {
		if got := IdentityOf("/home/me/Repo/"); got != "d67ef1492f2fe78b17af387fa48a28b1" {
			t.Errorf("IdentityOf(/home/me/Repo/) = %s, changed", got)
		}
	}
	same := IdentityOf(`C:\Repo`) == IdentityOf(`c:\repo\`)
	if same != (runtime.GOOS == "windows") {
		t.Errorf("C:\\Repo and c:\\repo\\ share an identity: %v on %s", same, runtime.GOOS)
	}
}

func TestRoot(t *testing.T) {
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	sub := filepath.Join(repo, "pkg", "deep")
	os.MkdirAll(sub, 0o755)
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	plain := filepath.Join(tmp, "plain")
	os.Mkdir(plain, 0o755)
	link := filepath.Join(tmp, "link")
	os.Symlink(repo, link)
	real := func(p string) string { r, _ := filepath.EvalSymlinks(p); return r }

	for _, tc := range []struct{ name, env, wd, want string }{
		{"env wins", plain, sub, real(plain)},
		{"git top-level", "", sub, real(repo)},
		{"working directory", "", plain, real(plain)},
		{"symlink resolved", link, "", real(repo)},
	} {
		got, err := Root(tc.env, tc.wd)
		if err != nil || got != tc.want {
			t.Errorf("%s: Root = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

type cand struct {
	l       Level
	typ, id string
}

func (c cand) ScopeLevel() Level      { return c.l }
func (c cand) Name() (string, string) { return c.typ, "k" }

func TestResolve(t *testing.T) {
	in := []cand{{System, "semantic", "sys"}, {Project, "semantic", "proj"}, {Tenant, "semantic", "ten"}, {System, "procedural", "proc"}}
	got := Resolve(in)
	want := []cand{{Project, "semantic", "proj"}, {System, "procedural", "proc"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(cand{})); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
}
