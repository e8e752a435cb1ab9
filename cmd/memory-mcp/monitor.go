package main

import "strings"

// The Go runtime's monitor thread sleeps deeply while the process is
// idle. The first system call of a request wakes it, and from then on it
// looks every 20 µs until the process is idle again: some fifteen wakes in
// a fact's write, each a switch of context on another processor, which on
// a machine of two processors is the client's (a Go client writing
// facts through the harness: 0.55 ms p50, 0.51 ms without them). With
// GODEBUG's schedtrace set it never sleeps deeply, so no system call
// wakes it, and it looks only every 10 ms once it has found nothing to do
// for a millisecond. The price is those looks while the server is idle:
// about 110 wakes a second, where the deep sleep and the server's timers
// made 27. The runtime reads schedtrace only at start, so the stdio
// server starts itself again with it set (see keepMonitorAwake). Its
// period is the longest there is, 24.8 days, counted from the machine's
// boot: on a machine up longer than that, the runtime writes one line of
// its scheduler's state to stderr as the server starts, and one every
// 24.8 days after; a fatal error writes that state too. A GODEBUG that
// sets schedtrace itself (schedtrace=0: as before) is left alone.
const monitorSetting = "schedtrace=2147483647"

// monitorEnv returns the GODEBUG to start the stdio server again with, or
// false when it runs as it should already: cur (the GODEBUG it was given,
// set tells whether at all) sets schedtrace.
func monitorEnv(cur string, set bool) (string, bool) {
	if hasSetting(cur, "schedtrace") {
		return "", false
	}
	if !set || cur == "" {
		return monitorSetting, true
	}
	return cur + "," + monitorSetting, true
}

// givenEnv returns the GODEBUG the server was given before it started
// itself again, for the processes it starts, and whether there was one;
// cur is the GODEBUG it runs with.
func givenEnv(cur string) (string, bool) {
	if cur == monitorSetting {
		return "", false
	}
	if given, ok := strings.CutSuffix(cur, ","+monitorSetting); ok {
		return given, true
	}
	return cur, true
}

// hasSetting reports whether the GODEBUG value godebug sets key.
func hasSetting(godebug, key string) bool {
	for _, f := range strings.Split(godebug, ",") {
		if k, _, ok := strings.Cut(strings.TrimSpace(f), "="); ok && k == key {
			return true
		}
	}
	return false
}
