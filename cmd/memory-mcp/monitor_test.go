package main

import "testing"

// TestMonitorEnv: the GODEBUG the stdio server starts itself again with
// adds the monitor's setting to what it was given, and what it gives the
// processes it starts is that again; a GODEBUG that sets schedtrace itself
// is left as it is.
func TestMonitorEnv(t *testing.T) {
	for _, c := range []struct {
		given string
		set   bool
		want  string // "": not started again
	}{
		{"", false, monitorSetting},
		{"", true, monitorSetting},
		{"gctrace=1", true, "gctrace=1," + monitorSetting},
		{"gctrace=1,madvdontneed=0", true, "gctrace=1,madvdontneed=0," + monitorSetting},
		{"schedtrace=0", true, ""},
		{"gctrace=1, schedtrace=1000", true, ""},
		{"schedtraceX=1", true, "schedtraceX=1," + monitorSetting},
	} {
		got, again := monitorEnv(c.given, c.set)
		if again != (c.want != "") || got != c.want {
			t.Errorf("monitorEnv(%q, %v) = %q, %v; want %q", c.given, c.set, got, again, c.want)
			continue
		}
		if !again {
			continue
		}
		if hasSetting(got, "schedtrace") != true {
			t.Errorf("%q does not set schedtrace", got)
		}
		given, set := givenEnv(got)
		if given != c.given || set != (c.given != "") {
			t.Errorf("givenEnv(%q) = %q, %v; want %q back", got, given, set, c.given)
		}
	}
}
