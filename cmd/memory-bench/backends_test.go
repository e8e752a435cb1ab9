package main

import (
	"io"
	"slices"
	"testing"
)

func TestBackendsFlag(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil || !slices.Equal(c.backends, []string{"sqlite"}) {
		t.Errorf("default: %v %v", c.backends, err)
	}
	c, err = parseFlags([]string{"-backends", "sqlite, postgres", "-db", "postgres://u@127.0.0.1:5432/postgres"}, io.Discard)
	if err != nil || !slices.Equal(c.backends, []string{"sqlite", "postgres"}) {
		t.Errorf("both: %v %v", c.backends, err)
	}
	for _, bad := range [][]string{
		{"-backends", "postgres"},
		{"-backends", "postgres", "-db", "/tmp/x.db"},
		{"-backends", "mysql"},
		{"-backends", "sqlite,sqlite"},
		{"-compare", "-backends", "sqlite,postgres", "-db", "postgres://u@h/d"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
