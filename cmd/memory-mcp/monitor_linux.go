package main

/*
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

void memory_mcp_touched_only(void); // touched_linux.go

static const char monitor_setting[] = "schedtrace=2147483647";

// has_setting reports whether the GODEBUG value g sets key.
static int has_setting(const char *g, const char *key) {
	size_t k = strlen(key);
	for (const char *p = g; *p; ) {
		while (*p == ' ' || *p == '\t') p++;
		if (strncmp(p, key, k) == 0 && p[k] == '=') return 1;
		const char *c = strchr(p, ',');
		if (!c) break;
		p = c + 1;
	}
	return 0;
}

// stdio_serve reports whether argv asks for the stdio server: no command
// or serve alone, with --db (or -db) and its value anywhere: the command
// lines the Go code serves over stdio for (run, dbFlag, runServe).
static int stdio_serve(int argc, char **argv) {
	int serve = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--db") == 0 || strcmp(a, "-db") == 0) {
			if (++i >= argc) return 0;
			continue;
		}
		if (strncmp(a, "--db=", 5) == 0 || strncmp(a, "-db=", 4) == 0) continue;
		if (strcmp(a, "serve") == 0 && !serve) {
			serve = 1;
			continue;
		}
		return 0;
	}
	return 1;
}

// memory_mcp_stdio readies the stdio server, before the Go runtime
// starts. It starts the server again with the monitor's setting added to
// GODEBUG (see monitorSetting): done here, the first process costs an
// exec and no initialisation of Go's packages. If the exec fails, the
// server runs as it is, and keepMonitorAwake says so. The process that
// serves then has its files' pages mapped only as it touches them (see
// mapTouchedOnly).
__attribute__((constructor)) static void memory_mcp_stdio(int argc, char **argv) {
	if (!stdio_serve(argc, argv)) return;
	const char *g = getenv("GODEBUG");
	if (g && has_setting(g, "schedtrace")) {
		memory_mcp_touched_only();
		return;
	}
	size_t n = 0;
	while (environ[n]) n++;
	char **env = malloc((n + 2) * sizeof *env);
	size_t len = strlen("GODEBUG=") + (g ? strlen(g) + 1 : 0) + sizeof monitor_setting;
	char *v = malloc(len);
	if (!env || !v) {
		free(env);
		free(v);
		return;
	}
	strcpy(v, "GODEBUG=");
	if (g && *g) {
		strcat(v, g);
		strcat(v, ",");
	}
	strcat(v, monitor_setting);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "GODEBUG=", 8) != 0) env[j++] = environ[i];
	}
	env[j++] = v;
	env[j] = NULL;
	// By its path, so that the process keeps its name (an exec names it
	// after the file: /proc/self/exe would make it "exe"); by /proc if
	// that file is gone.
	char path[4096];
	ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
	if (k > 0) {
		path[k] = 0;
		execve(path, argv, env);
	}
	execve("/proc/self/exe", argv, env);
	free(v);
	free(env);
	memory_mcp_touched_only();
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
)

// keepMonitorAwake is the Go side of keeping the runtime's monitor awake
// (see monitorSetting): the constructor above (memory_mcp_stdio) starts
// the stdio server again, before the Go runtime starts, for every command
// line the stdio server is run by. In the server started so, this puts
// back the GODEBUG it was given, for the processes it starts. If the
// server runs without the setting all the same (the exec failed: no /proc,
// say), it says so on stderr and serves as it is: starting again from
// here would fail the same way.
func keepMonitorAwake() {
	cur, set := os.LookupEnv("GODEBUG")
	if _, again := monitorEnv(cur, set); again {
		fmt.Fprintln(os.Stderr, "memory-mcp: could not start again with the runtime's monitor kept awake; serving as it is")
		return
	}
	if strings.HasSuffix(cur, monitorSetting) {
		if given, ok := givenEnv(cur); ok {
			os.Setenv("GODEBUG", given)
		} else {
			os.Unsetenv("GODEBUG")
		}
	}
}
