package postgres

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://ann:s3cret@db:5432/memory?sslmode=require":     "postgres://ann:xxxxx@db:5432/memory?sslmode=require",
		"postgres://ann@db/memory":                                 "postgres://ann@db/memory",
		"postgresql://db/memory?password=s3cret&user=ann":          "postgresql://db/memory?password=xxxxx&user=ann",
		"postgres://ann@db/memory?sslmode=disable;password=s3cret": "postgres://ann@db/memory?(unparsable)",
		"postgres://ann@db/memory#s3cret":                          "postgres://ann@db/memory",
		// A password holding @ and #, unescaped: its end would be shown
		// as the host.
		"postgres://ann:s3@cret#x@db/memory":                         "postgres://(unparsable URL)",
		"postgres://ann@db/memory?sslkey=k.pem&sslpassword=s3cret":   "postgres://ann@db/memory?sslkey=k.pem&sslpassword=xxxxx",
		"postgres://ann:s3cret@db/memory?sslpassword=s3cret":         "postgres://ann:xxxxx@db/memory?sslpassword=xxxxx",
		"postgres://ann:p%40ss@db/memory?password=s3cret&password=x": "postgres://ann:xxxxx@db/memory?password=xxxxx",
	} {
		if got := redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redact(%s) = %s, want %s", in, got, want)
		}
	}
}
