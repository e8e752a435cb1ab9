package memory

import (
	"errors"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/scope"
)

func TestBucket(t *testing.T) {
	root := scope.IdentityOf("/w")
	for _, l := range []scope.Level{scope.Workspace, scope.Tenant, scope.System} {
		if b := Bucket(root, l); b != "" {
			t.Errorf("workspace root: Bucket(%s) = %q, want the global bucket", l, b)
		}
	}
	if b := Bucket(root, scope.Project); b != string(root) {
		t.Errorf("workspace root: Bucket(project) = %q", b)
	}
	a := TeamIdentity("acme", "ann", "default")
	a2 := TeamIdentity("acme", "ann", "ci")
	b := TeamIdentity("acme", "bob", "default")
	x := TeamIdentity("other", "ann", "default")
	buckets := func(p scope.Identity) [4]string {
		return [4]string{Bucket(p, 0), Bucket(p, 1), Bucket(p, 2), Bucket(p, 3)}
	}
	ba, ba2, bb, bx := buckets(a), buckets(a2), buckets(b), buckets(x)
	if ba[0] == ba2[0] || ba[1] != ba2[1] || ba[2] != ba2[2] {
		t.Errorf("two profiles of one user: %q %q", ba, ba2)
	}
	if ba[1] == bb[1] || ba[2] != bb[2] {
		t.Errorf("two users of one tenant: %q %q", ba, bb)
	}
	if ba[2] == bx[2] || ba[1] == bx[1] {
		t.Errorf("same user name in two tenants: %q %q", ba, bx)
	}
	if ba[3] != "" || ba[1] == "" || ba[2] == "" || ba[1] == ba[2] {
		t.Errorf("team buckets: %q", ba)
	}
	// Names that would run together if joined are told apart.
	if TeamIdentity("a/b", "c", "d") == TeamIdentity("a", "b/c", "d") {
		t.Error("tenant a/b user c and tenant a user b/c share an identity")
	}
}

// TestTeamIsolation writes at every level as several team members and
// checks what each of them sees on every read path.
func TestTeamIsolation(t *testing.T) {
	s, _ := mustOpen(t)
	admin := Token{Tenant: "acme", User: "root", Profile: "default", Admin: true}
	ann := Token{Tenant: "acme", User: "ann", Profile: "default"}
	annCI := Token{Tenant: "acme", User: "ann", Profile: "ci"}
	bob := Token{Tenant: "acme", User: "bob", Profile: "default"}
	eve := Token{Tenant: "evil", User: "ann", Profile: "default"}
	root := Project{ID: scope.IdentityOf("/laptop/w")}

	put := func(who Token, l scope.Level, key, body string) {
		t.Helper()
		if _, _, err := s.Put(ctx, who.Project(), Write{Scope: l, Type: Semantic, Key: key, Body: body}); err != nil {
			t.Fatalf("%s writes %s %s: %v", who.User, l, key, err)
		}
	}
	put(ann, scope.Project, "p-ann", "ann's default profile")
	put(ann, scope.Workspace, "w-ann", "all of ann's profiles")
	put(bob, scope.Tenant, "t-acme", "all of acme")
	put(admin, scope.System, "s-all", "everyone")
	put(eve, scope.Tenant, "t-evil", "all of evil")
	// A workspace root's server on the same database keeps its broader
	// levels in the global bucket: no team member sees them.
	if _, _, err := s.Put(ctx, root, Write{Scope: scope.Workspace, Type: Semantic, Key: "laptop-w", Body: "mine"}); err != nil {
		t.Fatal(err)
	}
	// Narrowest wins across identities.
	put(admin, scope.System, "runner", "go test")
	put(bob, scope.Tenant, "runner", "make test")
	put(annCI, scope.Workspace, "runner", "ann's runner")
	put(annCI, scope.Project, "runner", "ci runner")

	want := map[string][]string{
		"ann":   {"p-ann", "runner=ann's runner", "s-all", "t-acme", "w-ann"},
		"annCI": {"runner=ci runner", "s-all", "t-acme", "w-ann"},
		"bob":   {"runner=make test", "s-all", "t-acme"},
		"eve":   {"runner=go test", "s-all", "t-evil"},
		"admin": {"runner=make test", "s-all", "t-acme"},
	}
	for name, who := range map[string]Token{"ann": ann, "annCI": annCI, "bob": bob, "eve": eve, "admin": admin} {
		var got []string
		recs, err := s.Effective(ctx, who.Identity(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Key == "runner" {
				got = append(got, "runner="+r.Body)
			} else {
				got = append(got, r.Key)
			}
		}
		sort.Strings(got)
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("%s sees (-want +got):\n%s", name, diff)
		}
		list, _, err := s.List(ctx, who.Identity(), ListOptions{})
		if err != nil || len(list) != len(want[name]) {
			t.Errorf("%s lists %d records (err %v), want %d", name, len(list), err, len(want[name]))
		}
		hits, err := s.Search(ctx, who.Identity(), SearchOptions{Query: "ann acme evil everyone mine profiles runner test"})
		if err != nil || len(hits) != len(want[name]) {
			t.Errorf("%s finds %d records (err %v), want %d", name, len(hits), err, len(want[name]))
		}
		n, err := s.CountAll(ctx, who.Identity())
		if err != nil || n != len(want[name]) {
			t.Errorf("%s counts %d records (err %v), want %d", name, n, err, len(want[name]))
		}
	}
	// The workspace root still sees its own broader records, and the
	// system ones.
	recs, err := s.Index(ctx, root.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	if diff := cmp.Diff([]string{"laptop-w", "runner", "s-all"}, keys); diff != "" {
		t.Errorf("workspace root sees (-want +got):\n%s", diff)
	}

	// Only an admin writes, updates or deletes system memory.
	if _, _, err := s.Put(ctx, ann.Project(), Write{Scope: scope.System, Type: Semantic, Key: "s-ann", Body: "x"}); !isCode(err, CodeInvalidArgument) {
		t.Errorf("non-admin system write: %v", err)
	}
	body := "changed"
	sys := scope.System
	if _, err := s.Update(ctx, bob.Project(), Selector{Key: "s-all", Scope: &sys}, Patch{Body: &body}); !isCode(err, CodeInvalidArgument) {
		t.Errorf("non-admin system update: %v", err)
	}
	if _, err := s.Delete(ctx, eve.Project(), Selector{Key: "s-all"}); !isCode(err, CodeInvalidArgument) {
		t.Errorf("non-admin system delete: %v", err)
	}
	if r, err := s.Peek(ctx, ann.Identity(), Selector{Key: "s-all"}); err != nil || r.Body != "everyone" {
		t.Errorf("system record after refused changes: %q %v", r.Body, err)
	}
	// Deleting the narrowest shows the next one out again, for that
	// identity only.
	if _, err := s.Delete(ctx, annCI.Project(), Selector{Key: "runner"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Peek(ctx, annCI.Identity(), Selector{Key: "runner"}); r.Body != "ann's runner" {
		t.Errorf("after deleting ci's runner, ci reads %q", r.Body)
	}
	// Another tenant cannot reach a record by id.
	tacme, _ := s.Peek(ctx, bob.Identity(), Selector{Key: "t-acme"})
	if _, err := s.Peek(ctx, eve.Identity(), Selector{ID: tacme.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("evil reads acme's record by id: %v", err)
	}
	if _, err := s.Delete(ctx, eve.Project(), Selector{ID: tacme.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("evil deletes acme's record by id: %v", err)
	}
}

func isCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}
